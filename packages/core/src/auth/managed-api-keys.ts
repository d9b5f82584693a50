/**
 * Managed API keys: issued, rotated and revoked at run time, kept in an {@link ApiKeyRecordStore} (memory, Redis,
 * PostgreSQL or your own), looked up through a bounded in-process cache that every instance keeps in step with
 * the store's change notifications.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/keys.md
 */
import { hex } from '@petstore/internal';
import { LRUCache } from 'lru-cache';
import { systemClock, type Clock } from '../clock.js';
import { PetstoreError, isPetstoreError } from '../errors.js';
import { apiKeyWatchChannel, type ApiKeyRefusalReason, type ApiKeyWatchState, type StoreBackend } from '../diagnostics.js';
import {
  IssueApiKeySchema,
  KeyIdSchema,
  ListApiKeysSchema,
  ManagedApiKeysOptionsSchema,
  RotateApiKeySchema,
  UpdateApiKeySchema,
  assertOptions,
} from '../options.js';
import { DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS } from '../rate-limit/engine.js';
import { API_KEY_HASH_BYTES, apiKeyHashesEqual, hashApiKey, lookupKey, type ApiKeyStore, type FindPrincipalContext } from './api-key.js';
import type { ApiKeyRecord, ApiKeyRecordChange, ApiKeyRecordStore, ApiKeyRecordWatcher } from './api-key-records.js';
import {
  DEFAULT_MANAGED_KEY_PREFIX,
  assertManagedKeyPrefix,
  generateKeyId,
  generateManagedKey,
  isWellFormedManagedKey,
} from './managed-key-format.js';
import type { PlanLimits, PlanName, Principal } from './principal.js';

/** The cache of {@link managedApiKeys} unless told otherwise: its bounds (entries) and lifetimes (ms). */
export const DEFAULT_MANAGED_KEYS_CACHE = Object.freeze({
  /** Known keys held (records, revoked and expired ones included). */
  maxKeys: 10_000,
  /** How long a known key's record is trusted without a notification, in ms. */
  ttlMs: 30_000,
  /** Unknown keys remembered as unknown. */
  maxUnknownKeys: 10_000,
  /** How long an unknown key is remembered as unknown, in ms. */
  unknownTtlMs: 10_000,
});

/** How long a rotated key keeps working unless `rotate(keyId, { graceMs })` says otherwise: 24 hours, in ms. */
export const DEFAULT_ROTATION_GRACE_MS = 86_400_000;

/** First and longest wait before watching the store again after `watch()` failed, in ms. */
const WATCH_RETRY_FIRST_MS = 1_000;
const WATCH_RETRY_MAX_MS = 30_000;

/** Options of {@link managedApiKeys}. */
export interface ManagedApiKeysOptions {
  /** Where the records live: `memoryApiKeyRecordStore()`, `redisApiKeyRecordStore(...)`, `postgresApiKeyRecordStore(...)`. */
  store: ApiKeyRecordStore;
  /**
   * The prefix of the keys issued and accepted: 1–16 characters `[a-z][a-z0-9]*` then `_`. Default `pet_`. A key
   * with another prefix is refused without a lookup, so a deployment that changes it refuses the keys it issued
   * before.
   */
  prefix?: string;
  /**
   * The lookup cache (see {@link DEFAULT_MANAGED_KEYS_CACHE}): `maxKeys` known keys trusted for `ttlMs`, and
   * `maxUnknownKeys` unknown keys remembered for `unknownTtlMs` (entries, and ms; whole numbers ≥ 1). The TTLs
   * bound how long a change is missed when the store's notifications are lost.
   */
  cache?: { maxKeys?: number; ttlMs?: number; maxUnknownKeys?: number; unknownTtlMs?: number };
  /** The clock (Unix epoch ms) for record times, expiry, grace periods and cache TTLs. Default: the system clock. */
  clock?: Clock;
}

/** Whether a managed key is accepted now: `active`, or refused since `expiresAtMs` or `revokedAtMs`. */
export type ApiKeyStatus = 'active' | 'expired' | 'revoked';

/**
 * What an operator sees of a managed key: its record without any digest. Times are Unix epoch ms.
 * `previousKeyValidUntilMs` is present while the key replaced by the last rotation still works (its grace
 * period's end).
 */
export interface ApiKeyInfo {
  keyId: string;
  accountId: string;
  plan: PlanName;
  limits?: PlanLimits;
  name?: string;
  status: ApiKeyStatus;
  createdAtMs: number;
  updatedAtMs: number;
  expiresAtMs?: number;
  revokedAtMs?: number;
  previousKeyValidUntilMs?: number;
}

/**
 * A key just issued or rotated: `key` is the plaintext, shown this once and never stored or logged (only its
 * SHA-256 digest is kept); `keyId` its public id; `record` the key's info.
 */
export interface IssuedApiKey {
  key: string;
  keyId: string;
  record: ApiKeyInfo;
}

/**
 * The input of {@link ManagedApiKeys.issue}: the account (1–200 characters, no control characters), the plan,
 * optional custom limits (whole numbers ≥ 0) and name (1–200 characters), and optionally an expiry: at
 * `expiresAtMs` (Unix epoch ms, in the future) or `expiresInMs` from now (ms ≥ 1), not both.
 */
export interface IssueApiKeyOptions {
  accountId: string;
  plan: PlanName;
  limits?: PlanLimits;
  name?: string;
  expiresAtMs?: number;
  expiresInMs?: number;
}

/** The input of {@link ManagedApiKeys.update}: what to set; `null` clears `limits` or `name`; absent keeps. */
export interface UpdateApiKeyOptions {
  plan?: PlanName;
  limits?: PlanLimits | null;
  name?: string | null;
}

/** The options of {@link ManagedApiKeys.rotate}: `graceMs` (whole ms ≥ 0) the replaced key keeps working; 0 ends it at once. */
export interface RotateApiKeyOptions {
  graceMs?: number;
}

/** The options of {@link ManagedApiKeys.list}: one account's keys, `limit` (1–1000, default 100) per page, after a keyId. */
export interface ListApiKeysOptions {
  accountId?: string;
  limit?: number;
  after?: string;
}

/**
 * Managed API keys: an {@link ApiKeyStore} for `createPetstore({ apiKeys })` (alone or with other stores) and
 * the operator's operations on the keys.
 *
 * Every operation's input is checked: a wrong one throws a `TypeError` naming the field. An unknown `keyId`
 * rejects with `PetstoreError` code `not_found`; a store failure with the store's error (`service_unavailable`
 * for the library's stores).
 */
export interface ManagedApiKeys extends ApiKeyStore {
  /** The prefix of this manager's keys. */
  readonly prefix: string;
  /** True when `apiKey` has this manager's format and checksum; the pipeline asks before hashing a key. */
  acceptsKey(apiKey: string): boolean;
  /**
   * The principal of the key with this SHA-256 digest (32 bytes), if the key is accepted now: not revoked, not
   * expired, and, for the key replaced by a rotation, within its grace period. From the cache when it holds
   * the digest (known or unknown), else from the store (concurrent lookups of one digest share one store call).
   * While the watch is not heard ({@link ManagedApiKeys.watchState} `connecting` or `disconnected`), a cached
   * acceptance is checked at the store again; a cached refusal stands (revocation and expiry are final).
   *
   * A digest this manager has never accepted (not among the last `cache.maxKeys` accepted) and does not hold
   * is looked up only if the caller may spend a lookup: not with `context.cachedOnly` (it is unknown, without a
   * store call), and with `context.reserveLookup` only once that resolves `true`. A digest it accepted before is
   * looked up whatever the context, so a valid key keeps working from a refused address past the cache's TTL.
   * @throws PetstoreError `service_unavailable` (with `retryAfterSeconds`) when the store fails.
   */
  findPrincipal(apiKeyHash: Uint8Array, context?: FindPrincipalContext): Promise<Principal | undefined>;
  /** The principal of the key with this `keyId`, in any state (for `petstore.rateLimits`), or `undefined`. */
  findByKeyId(keyId: string): Promise<Principal | undefined>;
  /** The record store's `backend` (`custom` when it has none), for the `petstore:store` diagnostics channel. */
  readonly backend: StoreBackend;
  /**
   * Why the key with this digest is refused, from the cache: `revoked`, `expired` (past `expiresAtMs`, or the
   * key replaced by a rotation past its grace period), or `undefined` (accepted now, unknown, or not cached).
   */
  refusalReason(apiKeyHash: Uint8Array): ApiKeyRefusalReason | undefined;
  /** Issues a new key. @throws TypeError naming the field of a wrong input. */
  issue(options: IssueApiKeyOptions): Promise<IssuedApiKey>;
  /** The key's info, or `undefined` for an unknown `keyId`. */
  get(keyId: string): Promise<ApiKeyInfo | undefined>;
  /** Keys in `keyId` order, a page at a time; `next` is the `after` of the next page, absent on the last. */
  list(options?: ListApiKeysOptions): Promise<{ keys: ApiKeyInfo[]; next?: string }>;
  /**
   * Changes a key's plan, limits or name; obeyed by every instance once the change is heard (or the cache's
   * TTL has passed).
   * @throws PetstoreError `not_found` for an unknown keyId; `gone` for a revoked key.
   */
  update(keyId: string, changes: UpdateApiKeyOptions): Promise<ApiKeyInfo>;
  /**
   * Gives the key a new secret; the replaced one keeps working for `graceMs` (default
   * {@link DEFAULT_ROTATION_GRACE_MS}, 24 h; 0 refuses it at once), then is refused (401). A second rotation
   * within a grace period ends the older replaced key at once: only the last replaced key has a grace period.
   * The key keeps its `keyId`, account, plan and expiry.
   * @throws PetstoreError `not_found` for an unknown keyId; `gone` for a revoked or expired key.
   */
  rotate(keyId: string, options?: RotateApiKeyOptions): Promise<IssuedApiKey>;
  /**
   * Refuses the key (and a key it replaced in a grace period) from now on; a second revocation keeps the first
   * time. Obeyed by this instance before the promise resolves, by the others once they hear of it.
   * @throws PetstoreError `not_found` for an unknown keyId.
   */
  revoke(keyId: string): Promise<ApiKeyInfo>;
  /**
   * Resolves once the manager hears the store's changes (at once for a store without `watch`). Rejects when
   * the first attempt to watch failed; the manager keeps trying (after 1 s, doubling up to 30 s), and the
   * cache's TTLs bound what it misses meanwhile. Optional to await.
   */
  ready(): Promise<void>;
  /** Stops watching the store (the store itself stays open: close it yourself). Lookups go on, TTL-bound. */
  close(): Promise<void>;
  /**
   * Whether this manager hears the store's changes now (see {@link ApiKeyWatchState}): `watching`;
   * `connecting` (the first `watch()` under way) or `disconnected` (it failed and is retried, or the store
   * reported a break), both checking every accepted key at the store; `unwatched` (a store without `watch`, or
   * after `close()`), trusting the cache for its TTL. Each change is published on the
   * `petstore:api-key-watch` diagnostics channel.
   */
  readonly watchState: ApiKeyWatchState;
  /**
   * Removes the records of keys revoked or expired `olderThanMs` (a whole number of ms ≥ 0) or longer ago:
   * `revokedAtMs` or `expiresAtMs` at or before `beforeMs` = now − `olderThanMs`. Their keys stay refused (401
   * as unknown keys); they no longer show in `get` or `list`. Every instance's cache drops them once it hears.
   * @returns `removed`, how many records went, and `beforeMs` (Unix epoch ms), the cut-off used
   * @throws TypeError when `olderThanMs` is not a whole number ≥ 0, or the store has no `purge`; a store failure
   *   with the store's error (`service_unavailable` for the library's stores).
   */
  purge(options: { olderThanMs: number }): Promise<{ removed: number; beforeMs: number }>;
}

/** A cached lookup of one digest: the record it found and whether the digest is the record's previous one. */
interface KnownEntry {
  digest: Uint8Array;
  record: ApiKeyRecord;
  previous: boolean;
  principal: Principal;
}

/** What {@link managedApiKeys}' cache answers for a digest it cannot answer for: ask the store. */
const MISS: unique symbol = Symbol('miss');


function principalOf(record: ApiKeyRecord): Principal {
  return Object.freeze({
    keyId: record.keyId,
    accountId: record.accountId,
    plan: record.plan,
    ...(record.limits === undefined ? {} : { limits: Object.freeze({ requestsPerMinute: record.limits.requestsPerMinute, requestsPerDay: record.limits.requestsPerDay }) }),
  });
}

function statusOf(record: ApiKeyRecord, nowMs: number): ApiKeyStatus {
  if (record.revokedAtMs !== undefined) return 'revoked';
  if (record.expiresAtMs !== undefined && record.expiresAtMs <= nowMs) return 'expired';
  return 'active';
}

function infoOf(record: ApiKeyRecord, nowMs: number): ApiKeyInfo {
  const info: ApiKeyInfo = { keyId: record.keyId, accountId: record.accountId, plan: record.plan, status: statusOf(record, nowMs), createdAtMs: record.createdAtMs, updatedAtMs: record.updatedAtMs };
  if (record.limits !== undefined) info.limits = { requestsPerMinute: record.limits.requestsPerMinute, requestsPerDay: record.limits.requestsPerDay };
  if (record.name !== undefined) info.name = record.name;
  if (record.expiresAtMs !== undefined) info.expiresAtMs = record.expiresAtMs;
  if (record.revokedAtMs !== undefined) info.revokedAtMs = record.revokedAtMs;
  if (record.previousDigest !== undefined && record.previousValidUntilMs !== undefined && record.previousValidUntilMs > nowMs && info.status === 'active') {
    info.previousKeyValidUntilMs = record.previousValidUntilMs;
  }
  return info;
}

/** A store failure as the pipeline answers it: the store's PetstoreError, or 503 with Retry-After. */
function storeFailure(error: unknown): PetstoreError {
  if (isPetstoreError(error)) return error;
  return new PetstoreError('service_unavailable', 'The API key store is unavailable; retry later.', {
    cause: error,
    retryAfterSeconds: DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS,
  });
}

const notFound = (keyId: string) => new PetstoreError('not_found', `No API key has the keyId ${JSON.stringify(keyId.slice(0, 60))}.`);

/**
 * Managed API keys over `options.store`: see {@link ManagedApiKeys}.
 *
 * Lookups: an LRU cache of known digests (`cache.maxKeys`, `cache.ttlMs`) and one of unknown digests
 * (`cache.maxUnknownKeys`, `cache.unknownTtlMs`), on `lru-cache`, timed by `options.clock`. A cached record is
 * judged against the clock at each use (revocation, expiry, grace period), so a key expires on time without a
 * lookup. The store's `watch` removes changed digests from both caches (and everything after a reconnection);
 * changes made through this manager are removed at once too. While the watch is broken (the store's
 * `onDisconnect`, or a `watch()` that failed), accepted keys are checked at the store on every use. The digests
 * of the last `cache.maxKeys` keys accepted are remembered beyond the TTL (digests only, no record), so that
 * they may still be looked up for a caller that may not spend lookups on unknown keys.
 *
 * @throws TypeError naming the option, for a wrong option (a store without the record-store methods, a prefix
 *   that is not 1–16 characters `[a-z][a-z0-9]*` followed by `_`, cache bounds that are not whole numbers ≥ 1).
 */
export function managedApiKeys(options: ManagedApiKeysOptions): ManagedApiKeys {
  assertOptions(ManagedApiKeysOptionsSchema, options, 'managedApiKeys');
  const prefix = options.prefix ?? DEFAULT_MANAGED_KEY_PREFIX;
  assertManagedKeyPrefix(prefix, 'managedApiKeys: prefix');
  const { store } = options;
  const clock = options.clock ?? systemClock;
  const cacheOptions = { ...DEFAULT_MANAGED_KEYS_CACHE, ...options.cache };
  // lru-cache reads the time from `perf`; ttlResolution 0 reads it at every check, so the TTLs move with an
  // injected (fake) clock at once.
  const perf = { now: () => clock.now() };
  // maxSize, with a size of 1 per entry, bounds the entry count as `max` would, but allocates as entries come:
  // `max` makes lru-cache allocate its arrays for every entry when the cache is created (BENCHMARKS.md,
  // "Memory store").
  const known = new LRUCache<number, KnownEntry>({ maxSize: cacheOptions.maxKeys, sizeCalculation: () => 1, ttl: cacheOptions.ttlMs, ttlResolution: 0, perf });
  const unknown = new LRUCache<number, Uint8Array>({ maxSize: cacheOptions.maxUnknownKeys, sizeCalculation: () => 1, ttl: cacheOptions.unknownTtlMs, ttlResolution: 0, perf });
  /** Store lookups under way, by digest (hex): concurrent misses of one digest share one. */
  const inFlight = new Map<string, Promise<ApiKeyRecord | undefined>>();
  /**
   * Digests accepted by a lookup, kept without a TTL and through notifications: not trusted as valid, only
   * allowed a lookup where an unknown digest is not (a refused address). Filled only by keys that were valid.
   */
  const accepted = new LRUCache<number, Uint8Array>({ maxSize: cacheOptions.maxKeys, sizeCalculation: () => 1 });

  function forget(digests: readonly Uint8Array[]): void {
    for (const digest of digests) {
      const lookup = lookupKey(digest);
      known.delete(lookup);
      unknown.delete(lookup);
      // A lookup under way may have read the store before the change: its answer is not cached (see lookUp).
      inFlight.delete(hex(digest));
    }
  }
  function forgetAll(): void {
    known.clear();
    unknown.clear();
    inFlight.clear();
  }

  /** Why a cached or fetched record for `digest` is refused now, or `undefined` when it is accepted. */
  function refusalOf(entry: KnownEntry): ApiKeyRefusalReason | undefined {
    const { record } = entry;
    const nowMs = clock.now();
    if (record.revokedAtMs !== undefined) return 'revoked';
    if (record.expiresAtMs !== undefined && record.expiresAtMs <= nowMs) return 'expired';
    if (entry.previous && (record.previousValidUntilMs === undefined || record.previousValidUntilMs <= nowMs)) return 'expired';
    return undefined;
  }

  /** The principal of a cached or fetched record for `digest`, judged now. */
  function judge(entry: KnownEntry): Principal | undefined {
    return refusalOf(entry) === undefined ? entry.principal : undefined;
  }

  /** The cache's entry for `digest` from a record the store found for it. */
  function entryOf(digest: Uint8Array, record: ApiKeyRecord): KnownEntry | undefined {
    if (apiKeyHashesEqual(record.digest, digest)) return { digest, record, previous: false, principal: principalOf(record) };
    if (record.previousDigest !== undefined && apiKeyHashesEqual(record.previousDigest, digest)) {
      return { digest, record, previous: true, principal: principalOf(record) };
    }
    return undefined; // the store answered a record that does not hold this digest: treat it as unknown
  }

  /** Fetches the record of `digest` from the store, sharing a lookup under way, and caches the answer. */
  function lookUp(digest: Uint8Array): Promise<ApiKeyRecord | undefined> {
    const id = hex(digest);
    const pending = inFlight.get(id);
    if (pending !== undefined) return pending;
    const copy = new Uint8Array(digest); // the caller's buffer may be reused
    const lookup: Promise<ApiKeyRecord | undefined> = store.findByDigest(copy).then(
      (record) => {
        // Cached only if no change of this digest was heard meanwhile (forget() dropped it from inFlight).
        const entry = record === undefined ? undefined : entryOf(copy, record);
        if (inFlight.get(id) === lookup) {
          inFlight.delete(id);
          if (entry === undefined) unknown.set(lookupKey(copy), copy);
          else known.set(lookupKey(copy), entry);
        }
        if (entry !== undefined && refusalOf(entry) === undefined) accepted.set(lookupKey(copy), copy);
        else if (wasAccepted(copy)) accepted.delete(lookupKey(copy));
        return record;
      },
      (error: unknown) => {
        if (inFlight.get(id) === lookup) inFlight.delete(id);
        throw storeFailure(error);
      },
    );
    inFlight.set(id, lookup);
    return lookup;
  }

  /** Whether a lookup accepted `digest` (among the last `maxKeys` accepted): the full digest is compared. */
  function wasAccepted(digest: Uint8Array): boolean {
    const remembered = accepted.get(lookupKey(digest));
    return remembered !== undefined && apiKeyHashesEqual(remembered, digest);
  }

  /** The cache's answer for `digest`: a principal, `undefined` (refused or unknown), or MISS (ask the store). */
  function fromCache(digest: Uint8Array): Principal | undefined | typeof MISS {
    const lookup = lookupKey(digest);
    const cached = known.get(lookup);
    if (cached !== undefined && apiKeyHashesEqual(cached.digest, digest)) {
      const principal = judge(cached);
      // A refusal is final (revocation, expiry, end of a grace period); an acceptance is trusted only while the
      // store's changes are heard, or on a store that has none (TTL-bound by design).
      return principal === undefined || watchState === 'watching' || watchState === 'unwatched' ? principal : MISS;
    }
    const unknownDigest = unknown.get(lookup);
    return unknownDigest !== undefined && apiKeyHashesEqual(unknownDigest, digest) ? undefined : MISS;
  }

  async function findPrincipal(apiKeyHash: Uint8Array, context?: FindPrincipalContext): Promise<Principal | undefined> {
    if (apiKeyHash.byteLength !== API_KEY_HASH_BYTES) return undefined;
    const cached = fromCache(apiKeyHash);
    if (cached !== MISS) return cached;
    // A digest never accepted here costs a lookup only if the caller may spend one; a lookup under way is free.
    if (context !== undefined && !wasAccepted(apiKeyHash) && !inFlight.has(hex(apiKeyHash))) {
      if (context.cachedOnly === true) return undefined;
      if (context.reserveLookup !== undefined) {
        if (!(await context.reserveLookup())) return undefined;
        const meanwhile = fromCache(apiKeyHash); // another request may have looked it up while this one waited
        if (meanwhile !== MISS) return meanwhile;
      }
    }
    const record = await lookUp(apiKeyHash);
    const entry = record === undefined ? undefined : entryOf(apiKeyHash, record);
    return entry === undefined ? undefined : judge(entry);
  }

  // Watching the store's changes: started now, tried again with backoff if it fails.
  let closed = false;
  let watchHandle: { close(): Promise<void> } | undefined;
  let retryTimer: ReturnType<typeof setTimeout> | undefined;
  let watchState: ApiKeyWatchState = store.watch === undefined ? 'unwatched' : 'connecting';
  /** Set by a break reported while `watch()` was under way: its success then does not mean watching. */
  let brokeWhileStarting = false;
  const backend = store.backend ?? 'custom';
  function setWatchState(state: ApiKeyWatchState, error?: Error): void {
    if (state === watchState) return;
    const previousState = watchState;
    watchState = state;
    if (apiKeyWatchChannel.hasSubscribers) apiKeyWatchChannel.publish(error === undefined ? { backend, state, previousState } : { backend, state, previousState, error });
  }
  const listener: ApiKeyRecordWatcher = {
    onChange: (digests) => forget(digests),
    onDisconnect: (error) => {
      if (closed) return;
      brokeWhileStarting = true;
      setWatchState('disconnected', error instanceof Error ? error : new Error(String(error)));
    },
    onReconnect: () => {
      // Changes made during the break were not delivered.
      forgetAll();
      if (!closed) setWatchState('watching');
    },
  };
  const startWatching = async (): Promise<void> => {
    brokeWhileStarting = false;
    const handle = await store.watch!(listener);
    if (closed) await handle.close();
    else watchHandle = handle;
  };
  const watched = () => {
    if (!closed && !brokeWhileStarting) setWatchState('watching');
  };
  const notWatched = (error: unknown) => {
    if (!closed) setWatchState('disconnected', error instanceof Error ? error : new Error(String(error)));
  };
  const retryWatching = (delayMs: number) => {
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      if (closed) return;
      startWatching().then(
        () => {
          // Changes made while not watching were missed.
          forgetAll();
          watched();
        },
        () => retryWatching(Math.min(delayMs * 2, WATCH_RETRY_MAX_MS)),
      );
    }, delayMs);
    retryTimer.unref?.();
  };
  const watching: Promise<void> =
    store.watch === undefined
      ? Promise.resolve()
      : Promise.resolve()
          .then(startWatching)
          .then(watched, (error: unknown) => {
            notWatched(error);
            retryWatching(WATCH_RETRY_FIRST_MS);
            throw storeFailure(error);
          });
  watching.catch(() => undefined); // awaiting ready() is optional: no unhandled rejection

  /** The record of `keyId`, or not_found. */
  async function recordOf(keyId: string): Promise<ApiKeyRecord> {
    const record = await store.findByKeyId(keyId).catch((error: unknown) => Promise.reject(storeFailure(error)));
    if (record === undefined) throw notFound(keyId);
    return record;
  }
  const revokedError = (record: ApiKeyRecord) =>
    new PetstoreError('gone', `The API key ${record.keyId} was revoked at ${new Date(record.revokedAtMs as number).toISOString()}; issue a new key.`);
  const digestsOf = (record: ApiKeyRecord) => (record.previousDigest === undefined ? [record.digest] : [record.digest, record.previousDigest]);
  /** Applies a change through the store; forgets what it touched at once, without waiting for the watch. */
  async function change(before: ApiKeyRecord, apply: ApiKeyRecordChange): Promise<ApiKeyRecord> {
    let after: ApiKeyRecord | undefined;
    try {
      after = await store.update(before.keyId, apply);
    } catch (error) {
      throw storeFailure(error);
    } finally {
      forget(digestsOf(before));
    }
    if (after === undefined) throw notFound(before.keyId);
    forget(digestsOf(after));
    return after;
  }

  async function issueKey(input: IssueApiKeyOptions): Promise<IssuedApiKey> {
    const checked = assertOptions(IssueApiKeySchema, input, 'managedApiKeys.issue');
    const nowMs = clock.now();
    const expiresAtMs = checked.expiresInMs === undefined ? checked.expiresAtMs : nowMs + checked.expiresInMs;
    if (expiresAtMs !== undefined && expiresAtMs <= nowMs) {
      throw new TypeError(`managedApiKeys.issue: expiresAtMs must be in the future (got ${expiresAtMs}, now ${nowMs})`);
    }
    const key = generateManagedKey(prefix);
    const record: ApiKeyRecord = {
      keyId: generateKeyId(),
      accountId: checked.accountId,
      plan: checked.plan,
      createdAtMs: nowMs,
      updatedAtMs: nowMs,
      digest: hashApiKey(key),
    };
    if (checked.limits !== undefined) record.limits = { requestsPerMinute: checked.limits.requestsPerMinute, requestsPerDay: checked.limits.requestsPerDay };
    if (checked.name !== undefined) record.name = checked.name;
    if (expiresAtMs !== undefined) record.expiresAtMs = expiresAtMs;
    try {
      await store.create(record);
    } catch (error) {
      throw storeFailure(error);
    }
    forget([record.digest]);
    return { key, keyId: record.keyId, record: infoOf(record, nowMs) };
  }

  return {
    prefix,
    backend,
    get watchState() {
      return watchState;
    },
    acceptsKey: (apiKey) => isWellFormedManagedKey(apiKey, prefix),
    findPrincipal,
    refusalReason(apiKeyHash) {
      if (apiKeyHash.byteLength !== API_KEY_HASH_BYTES) return undefined;
      const cached = known.get(lookupKey(apiKeyHash));
      return cached !== undefined && apiKeyHashesEqual(cached.digest, apiKeyHash) ? refusalOf(cached) : undefined;
    },
    async findByKeyId(keyId) {
      if (typeof keyId !== 'string') return undefined;
      const record = await store.findByKeyId(keyId).catch((error: unknown) => Promise.reject(storeFailure(error)));
      return record === undefined ? undefined : principalOf(record);
    },
    issue: issueKey,
    async get(keyId) {
      assertOptions(KeyIdSchema, { keyId }, 'managedApiKeys.get');
      const record = await store.findByKeyId(keyId).catch((error: unknown) => Promise.reject(storeFailure(error)));
      return record === undefined ? undefined : infoOf(record, clock.now());
    },
    async list(listOptions = {}) {
      const checked = assertOptions(ListApiKeysSchema, listOptions, 'managedApiKeys.list');
      const page = await store.list(checked).catch((error: unknown) => Promise.reject(storeFailure(error)));
      const nowMs = clock.now();
      const keys = page.records.map((record) => infoOf(record, nowMs));
      return page.next === undefined ? { keys } : { keys, next: page.next };
    },
    async update(keyId, changes) {
      assertOptions(KeyIdSchema, { keyId }, 'managedApiKeys.update');
      const checked = assertOptions(UpdateApiKeySchema, changes, 'managedApiKeys.update');
      const before = await recordOf(keyId);
      if (before.revokedAtMs !== undefined) throw revokedError(before);
      const after = await change(before, { kind: 'update', nowMs: clock.now(), ...checked });
      if (after.revokedAtMs !== undefined) throw revokedError(after); // revoked meanwhile: the store changed nothing
      return infoOf(after, clock.now());
    },
    async rotate(keyId, rotateOptions = {}) {
      assertOptions(KeyIdSchema, { keyId }, 'managedApiKeys.rotate');
      const checked = assertOptions(RotateApiKeySchema, rotateOptions, 'managedApiKeys.rotate');
      const before = await recordOf(keyId);
      if (before.revokedAtMs !== undefined) throw revokedError(before);
      const nowMs = clock.now();
      if (before.expiresAtMs !== undefined && before.expiresAtMs <= nowMs) {
        throw new PetstoreError('gone', `The API key ${keyId} expired at ${new Date(before.expiresAtMs).toISOString()}; issue a new key.`);
      }
      const key = generateManagedKey(prefix);
      const digest = hashApiKey(key);
      const after = await change(before, { kind: 'rotate', nowMs, digest, previousValidUntilMs: nowMs + (checked.graceMs ?? DEFAULT_ROTATION_GRACE_MS) });
      if (after.revokedAtMs !== undefined) throw revokedError(after); // revoked meanwhile: the new key was not stored
      return { key, keyId, record: infoOf(after, clock.now()) };
    },
    async revoke(keyId) {
      assertOptions(KeyIdSchema, { keyId }, 'managedApiKeys.revoke');
      const before = await recordOf(keyId);
      const after = await change(before, { kind: 'revoke', nowMs: clock.now() });
      return infoOf(after, clock.now());
    },
    ready: () => watching,
    async close() {
      closed = true;
      setWatchState('unwatched');
      if (retryTimer !== undefined) clearTimeout(retryTimer);
      await watching.catch(() => undefined);
      const handle = watchHandle;
      watchHandle = undefined;
      await handle?.close();
    },
    async purge(purgeOptions) {
      const olderThanMs = (purgeOptions as { olderThanMs?: unknown } | undefined)?.olderThanMs;
      if (typeof olderThanMs !== 'number' || !Number.isSafeInteger(olderThanMs) || olderThanMs < 0) {
        throw new TypeError(`managedApiKeys.purge: olderThanMs must be a whole number of ms >= 0, got ${String(olderThanMs)}`);
      }
      if (store.purge === undefined) throw new TypeError('managedApiKeys.purge: the record store has no purge()');
      const beforeMs = clock.now() - olderThanMs;
      const removed = await store.purge({ beforeMs }).catch((error: unknown) => Promise.reject(storeFailure(error)));
      return { removed, beforeMs };
    },
  };
}
