/**
 * vitest setup file (run before every test file, also where the files of a worker share their modules): after
 * each test, the keys and clients that test-support/redis.ts handed out are cleaned up.
 */
import { afterEach } from 'vitest';
import { cleanUpAfterTest } from './redis.js';

afterEach(cleanUpAfterTest);
