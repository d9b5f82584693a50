/**
 * API keys (SPEC §5): held only as SHA-256 digests, compared in constant time, never stored, logged or
 * echoed in plaintext.
 */
import { hash, timingSafeEqual } from 'node:crypto';
import type { PlanLimits, PlanName, Principal } from './principal.js';

/** Length of an API-key digest in bytes (SHA-256). */
export const API_KEY_HASH_BYTES = 32;

/** SHA-256 digest of an API key: 32 bytes. Hashing first gives every comparison a fixed length. */
export function hashApiKey(apiKey: string): Buffer {
  // One-shot hashing (Node ≥ 20.12): no Hash object per request.
  return hash('sha256', apiKey, 'buffer');
}

/** A digest as a map key: 32 bytes as a 32-character latin1 string (no copy, unlike hex). */
function digestKey(digest: Uint8Array): string {
  const bytes = Buffer.isBuffer(digest) ? digest : Buffer.from(digest.buffer, digest.byteOffset, digest.byteLength);
  return bytes.toString('latin1');
}

/**
 * Compares two API-key digests in constant time. Digests of another length than 32 bytes compare unequal
 * (without throwing, unlike a bare `crypto.timingSafeEqual`).
 */
export function apiKeyHashesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== API_KEY_HASH_BYTES || b.byteLength !== API_KEY_HASH_BYTES) return false;
  return timingSafeEqual(a, b);
}

/**
 * Resolves an API key to the {@link Principal} it belongs to. Implement it over your own key database.
 *
 * `findPrincipal` receives the SHA-256 digest of the presented key (32 bytes), never the key itself, and
 * answers `undefined` for an unknown key. It may be synchronous or return a promise. A thrown error becomes a
 * 500 `internal_error` answer.
 */
export interface ApiKeyStore {
  findPrincipal(apiKeyHash: Uint8Array): Principal | undefined | Promise<Principal | undefined>;
}

/** One key of a {@link staticApiKeys} store. */
export interface StaticApiKey {
  /** The API key in plaintext; hashed on construction and then dropped. */
  key: string;
  plan: PlanName;
  /** Account the key belongs to. Default: the key's `keyId`. */
  accountId?: string;
  /** Custom limits (needed for `enterprise`, see SPEC §8). */
  limits?: PlanLimits;
}

/**
 * A fixed set of API keys, e.g. from configuration. Holds only SHA-256 digests: the plaintext keys are
 * hashed here and not kept. Lookup finds the candidate by digest, then confirms it with a constant-time
 * comparison of the full 32-byte digests.
 *
 * Each principal's `keyId` is the first 16 bytes of the digest in base64url (22 characters): stable, not
 * secret, and useless for recovering the key.
 *
 * @throws TypeError when a key is empty or appears twice.
 */
export function staticApiKeys(keys: readonly StaticApiKey[]): ApiKeyStore {
  const byDigest = new Map<string, { hash: Buffer; principal: Principal }>();
  for (const entry of keys) {
    if (entry.key.length === 0) throw new TypeError('staticApiKeys: an API key must not be empty');
    const keyHash = hashApiKey(entry.key);
    const digest = digestKey(keyHash);
    if (byDigest.has(digest)) throw new TypeError('staticApiKeys: the same API key is listed twice');
    const keyId = keyHash.subarray(0, 16).toString('base64url');
    const principal: Principal = Object.freeze({
      keyId,
      accountId: entry.accountId ?? keyId,
      plan: entry.plan,
      ...(entry.limits ? { limits: Object.freeze({ ...entry.limits }) } : {}),
    });
    byDigest.set(digest, { hash: keyHash, principal });
  }
  return {
    findPrincipal(apiKeyHash) {
      const candidate = byDigest.get(digestKey(apiKeyHash));
      if (candidate === undefined) return undefined;
      return apiKeyHashesEqual(candidate.hash, apiKeyHash) ? candidate.principal : undefined;
    },
  };
}
