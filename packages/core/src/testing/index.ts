/**
 * `@petstore/core/testing` — for users of the library and for store and adapter authors: a fake clock, an
 * in-process test client, the storage conformance suites and the rate-limit model comparison.
 *
 * The suites take your runner's `describe`/`it` (vitest, jest, mocha, `node:test`) and assert with
 * `node:assert`; nothing here imports a test runner.
 *
 * @packageDocumentation
 */
export * from './fake-clock.js';
export * from './test-api.js';
export * from './test-client.js';
export * from './rate-limit-store-suite.js';
export * from './rate-limit-model-comparison.js';
export * from './category-store-suite.js';
export * from './api-key-record-store-suite.js';
