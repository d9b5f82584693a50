/**
 * vitest setup file (run before every test file, also where the files of a worker share their modules): after
 * each test, the migrated schemas it used go to the next tests; after each file, the pools that
 * test-support/postgres.ts opened are ended.
 */
import { afterAll, afterEach } from 'vitest';
import { endPoolsAfterFile, releaseSchemasAfterTest } from './postgres.js';

afterEach(releaseSchemasAfterTest);
afterAll(endPoolsAfterFile);
