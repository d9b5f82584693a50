/**
 * vitest setup file (run before every test file, also where the files of a worker share their modules): after
 * each file, the pools that test-support/postgres.ts opened are ended.
 */
import { afterAll } from 'vitest';
import { endPoolsAfterFile } from './postgres.js';

afterAll(endPoolsAfterFile);
