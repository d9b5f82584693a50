/**
 * @petstore/storage-memory — category and rate-limit stores in process memory, bounded by lru-cache.
 *
 * @packageDocumentation
 */
export * from './rate-limit-store.js';
export * from './category-store.js';
