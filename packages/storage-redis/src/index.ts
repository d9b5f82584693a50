/**
 * @petstore/storage-redis — category, rate-limit and API-key record stores for `@petstore/core` in Redis, over an
 * ioredis 5 client you create and own. Each store operation is one Redis command (mostly a Lua script), atomic
 * across every process sharing the server; every rate-limit key and idempotency record carries a TTL. The API-key
 * record store tells every process of each change through Redis pub/sub.
 *
 * @packageDocumentation
 */
export * from './rate-limit-store.js';
export * from './category-store.js';
export { DEFAULT_CALL_TIMEOUT_MS, DEFAULT_KEY_PREFIX, RedisTimeoutError } from './redis-call.js';
export * from './api-key-record-store.js';
