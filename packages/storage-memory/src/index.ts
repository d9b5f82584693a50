/**
 * @petstore/storage-memory — category, rate-limit and API-key record stores in process memory, bounded.
 *
 * @packageDocumentation
 */
export * from './rate-limit-store.js';
export * from './category-store.js';
export * from './api-key-record-store.js';
