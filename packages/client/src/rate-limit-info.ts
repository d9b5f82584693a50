/**
 * The rate-limit state the server reports on every answer (`X-RateLimit-Limit`,
 * `X-RateLimit-Remaining`, `X-RateLimit-Reset`). Counts are in units: each operation charges its cost (the
 * `x-rate-limit-cost` of the operation in the OpenAPI description; 1 unless the server configures otherwise),
 * so a create that costs 5 lowers `remaining` by 5.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#rate-limit-headers
 */
import type { PetstoreFetchHeaders } from './fetch-types.js';

/** What the last answer's `X-RateLimit-*` headers said. */
export interface RateLimitInfo {
  /** `X-RateLimit-Limit`: units allowed in the window closest to exhaustion. */
  limit: number;
  /** `X-RateLimit-Remaining`: units left in that window (0 while the key is banned). */
  remaining: number;
  /** `X-RateLimit-Reset`: when that window resets, as a Unix timestamp in whole seconds. */
  resetAtSeconds: number;
}

function nonNegativeInteger(value: string | null): number | undefined {
  const text = value?.trim();
  if (!text || !/^\d+$/.test(text)) return undefined;
  const number = Number(text);
  return Number.isSafeInteger(number) ? number : undefined;
}

/**
 * Reads the three `X-RateLimit-*` headers.
 * @returns the values, or `undefined` unless all three are present as non-negative integers (a 503 from
 *   an unreachable rate-limit store, or a proxy's answer, carries none).
 */
export function readRateLimitInfo(headers: PetstoreFetchHeaders): RateLimitInfo | undefined {
  const limit = nonNegativeInteger(headers.get('x-ratelimit-limit'));
  const remaining = nonNegativeInteger(headers.get('x-ratelimit-remaining'));
  const resetAtSeconds = nonNegativeInteger(headers.get('x-ratelimit-reset'));
  if (limit === undefined || remaining === undefined || resetAtSeconds === undefined) return undefined;
  return { limit, remaining, resetAtSeconds };
}
