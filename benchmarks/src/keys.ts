/**
 * Realistic rate-limit keys for the benchmarks: `key:<keyId>`, where a keyId is 16 random bytes in base64url
 * (22 characters), the shape the engine uses for API keys (`@petstore/core` auth/api-key.ts).
 */
import { randomBytes } from 'node:crypto';

const KEY_ID_BYTES = 16;
const KEYS_PER_REFILL = 4096;

/**
 * A source of distinct keys `key:<22-char base64url>`; each call answers a new key (128 random bits, so
 * collisions are negligible). Keys are built the way the engine builds them (`key:${keyId}`), so a key kept
 * by a store costs what it costs in production.
 */
export function keySource(): () => string {
  let buffer = randomBytes(KEY_ID_BYTES * KEYS_PER_REFILL);
  let offset = 0;
  return () => {
    if (offset === buffer.length) {
      buffer = randomBytes(KEY_ID_BYTES * KEYS_PER_REFILL);
      offset = 0;
    }
    const keyId = buffer.toString('base64url', offset, offset + KEY_ID_BYTES);
    offset += KEY_ID_BYTES;
    return `key:${keyId}`;
  };
}

/** `count` distinct keys from {@link keySource}. */
export function distinctKeys(count: number): string[] {
  const next = keySource();
  const keys = new Array<string>(count);
  for (let i = 0; i < count; i++) keys[i] = next();
  return keys;
}
