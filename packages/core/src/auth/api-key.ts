/**
 * API keys: held only as SHA-256 digests, compared in constant time, never stored, logged or
 * echoed in plaintext.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#authentication
 */
import { hash, timingSafeEqual } from 'node:crypto';
import { StaticApiKeysSchema, assertOptions } from '../options.js';
import type { PlanLimits, PlanName, Principal } from './principal.js';
import type { ApiKeyRefusalReason, StoreBackend } from '../diagnostics.js';

/** Length of an API-key digest in bytes (SHA-256). */
export const API_KEY_HASH_BYTES = 32;

/** SHA-256 digest of an API key: 32 bytes. Hashing first gives every comparison a fixed length. */
export function hashApiKey(apiKey: string): Buffer {
  // One-shot hashing (Node ≥ 20.12), no Hash object per request. Asking for a latin1 string and copying it
  // into a (pooled) Buffer is faster than asking for a Buffer, which allocates a fresh ArrayBuffer in C++ for
  // every digest (measured in isolation; the request it is part of: BENCHMARKS.md, section "HTTP: GET
  // /v1/categories, authenticated, three categories").
  return Buffer.from(hash('sha256', apiKey, 'binary'), 'latin1'); // 'binary' is Node's name for latin1
}

/**
 * A digest's lookup key: its first 6 bytes as a number (48 bits). Cheaper than a string of the digest (no
 * string to build and hash per request); keys that share a lookup key are all kept, and the full digest is
 * always confirmed in constant time.
 */
export function lookupKey(digest: Uint8Array): number {
  return (
    (digest[0] as number) * 2 ** 40 +
    (digest[1] as number) * 2 ** 32 +
    (digest[2] as number) * 2 ** 24 +
    (digest[3] as number) * 2 ** 16 +
    (digest[4] as number) * 2 ** 8 +
    (digest[5] as number)
  );
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
 * What the pipeline tells {@link ApiKeyStore.findPrincipal} about one lookup: whether the caller may spend a
 * backend lookup on a key the store knows nothing of. A store without an in-process cache ignores both fields.
 *
 * - `cachedOnly`: it may not. A store with a cache answers a cached key as usual and treats a digest it holds
 *   nothing of as unknown (`undefined`) without asking its backend; it may still look up a digest it has
 *   accepted before (`managedApiKeys` does, so a valid key keeps working from a refused address). The
 *   pipeline sets it while the caller's address is refused by the anonymous rate limit, so that a flood of
 *   well-formed unknown keys from one address stops reaching the backend.
 * - `reserveLookup()`: it may once its turn comes. A store with a cache calls it (at most once per call of
 *   `findPrincipal`) before asking its backend about a digest it holds nothing of, and looks up only when it
 *   resolves `true`; `false` means treat the key as unknown. The pipeline lets one such lookup per caller
 *   without a valid key (its anonymous key: the address, by default) run at a time, until the request's
 *   anonymous charge is known, so the anonymous limit bounds the lookups at any concurrency. Never rejects.
 */
export interface FindPrincipalContext {
  cachedOnly?: boolean;
  reserveLookup?(): Promise<boolean>;
}

/**
 * Resolves an API key to the {@link Principal} it belongs to. Implement it over your own key database, or use
 * {@link staticApiKeys} (a fixed list) or `managedApiKeys` (keys issued, rotated and revoked at run time).
 *
 * `findPrincipal` receives the SHA-256 digest of the presented key (32 bytes), never the key itself, and
 * answers (a promise of) `undefined` for an unknown key. A rejection with a `PetstoreError` answers with its
 * code (e.g. 503 `service_unavailable` with `Retry-After`); any other rejection (or a thrown error) becomes a
 * 500 `internal_error` answer.
 *
 * `acceptsKey` (optional) is a cheap, synchronous check of the key's format, run before the key is hashed:
 * `false` means the key cannot be one of this store's, and the store is not asked. When every store of the
 * petstore answers `false`, the key is refused (401) without any hashing or lookup.
 *
 * `findByKeyId` (optional) answers the principal of a key by its `keyId`, or `undefined`: it lets an operator
 * read or reset a key's limits by `keyId` (`petstore.rateLimits.peek({ keyId })`); without it, pass the
 * `{ accountId }` instead. Never called while serving a request.
 */
export interface ApiKeyStore {
  /**
   * Optional: the storage system it runs on, in OpenTelemetry `db.system.name` terms (`redis`, `postgresql`;
   * `memory` in process memory), reported on the `petstore:store` diagnostics channel; `custom` when absent.
   */
  readonly backend?: StoreBackend;
  findPrincipal(apiKeyHash: Uint8Array, context?: FindPrincipalContext): Promise<Principal | undefined>;
  acceptsKey?(apiKey: string): boolean;
  findByKeyId?(keyId: string): Promise<Principal | undefined>;
  /**
   * Optional: why this store refused the key with this SHA-256 digest (32 bytes) that its last `findPrincipal`
   * answered `undefined` for although it knows the key — `revoked` or `expired` — or `undefined` (an unknown key,
   * or one it no longer remembers). Synchronous: answered from what the lookup just read, never from the
   * backend. Asked only after a refused lookup, and only while something listens on the `petstore:request`
   * diagnostics channel (its `authFailure`).
   */
  refusalReason?(apiKeyHash: Uint8Array): ApiKeyRefusalReason | undefined;
}

/** One key of a {@link staticApiKeys} store. */
export interface StaticApiKey {
  /** The API key in plaintext; hashed on construction and then dropped. */
  key: string;
  plan: PlanName;
  /** Account the key belongs to. Default: the key's `keyId`. */
  accountId?: string;
  /** Custom limits (needed for `enterprise`, whose limits are "custom"). */
  limits?: PlanLimits;
}

/**
 * A fixed set of API keys, e.g. from configuration. Holds only SHA-256 digests: the plaintext keys are
 * hashed here and not kept. Lookup finds the candidates by the digest's first 6 bytes, then confirms one with a constant-time
 * comparison of the full 32-byte digests.
 *
 * Each principal's `keyId` is the first 16 bytes of the digest in base64url (22 characters): stable, not
 * secret, and useless for recovering the key. `findByKeyId` finds a principal by it (for the operator's
 * `petstore.rateLimits`).
 *
 * @throws TypeError naming the entry and the field, when an entry is not `{ key, plan, accountId?, limits? }`
 *   (a missing or empty key, a plan other than free, pro, business, enterprise, limits that are not whole
 *   numbers ≥ 0), or when a key appears twice. The key itself is never part of the message.
 */
export function staticApiKeys(keys: readonly StaticApiKey[]): ApiKeyStore {
  assertOptions(StaticApiKeysSchema, keys, 'staticApiKeys');
  // Candidates by lookup key; almost always one each.
  const byLookupKey = new Map<number, { hash: Buffer; principal: Principal }[]>();
  const byKeyId = new Map<string, Principal>();
  for (const entry of keys) {
    const keyHash = hashApiKey(entry.key);
    const candidates = byLookupKey.get(lookupKey(keyHash)) ?? [];
    if (candidates.some((candidate) => candidate.hash.equals(keyHash))) {
      throw new TypeError('staticApiKeys: the same API key is listed twice');
    }
    const keyId = keyHash.subarray(0, 16).toString('base64url');
    const principal: Principal = Object.freeze({
      keyId,
      accountId: entry.accountId ?? keyId,
      plan: entry.plan,
      ...(entry.limits ? { limits: Object.freeze({ ...entry.limits }) } : {}),
    });
    candidates.push({ hash: keyHash, principal });
    byLookupKey.set(lookupKey(keyHash), candidates);
    byKeyId.set(keyId, principal);
  }
  return {
    backend: 'memory',
    async findPrincipal(apiKeyHash) {
      if (apiKeyHash.byteLength !== API_KEY_HASH_BYTES) return undefined;
      const candidates = byLookupKey.get(lookupKey(apiKeyHash));
      if (candidates === undefined) return undefined;
      for (const candidate of candidates) {
        if (apiKeyHashesEqual(candidate.hash, apiKeyHash)) return candidate.principal;
      }
      return undefined;
    },
    findByKeyId: async (keyId) => byKeyId.get(keyId),
  };
}
