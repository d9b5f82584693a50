/**
 * vitest setup file (run before every test file, also where the files of a worker share their modules): the
 * clients and sockets that test-support/redis.ts handed out are closed after each test, the keys of the prefixes
 * it handed out deleted after each file.
 */
import { afterAll, afterEach } from 'vitest';
import { closeClientsAfterTest, deleteKeysAfterFile } from './redis.js';

afterEach(closeClientsAfterTest);
afterAll(deleteKeysAfterFile);
