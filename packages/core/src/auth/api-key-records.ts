/**
 * The record store of managed API keys: the contract every backend (memory, Redis, PostgreSQL, your own)
 * implements, and `managedApiKeys` reads and writes through. `runApiKeyRecordStoreConformance` in
 * `@petstore/core/testing` checks an implementation.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/keys.md#storage
 */
import type { PlanLimits, PlanName } from './principal.js';
import type { StoreBackend } from '../diagnostics.js';

/**
 * A managed key's record as the store keeps it. Only digests of keys are stored, never a key: each is the
 * SHA-256 digest of the key (32 bytes, as `hashApiKey` makes it). Every time is Unix epoch milliseconds.
 *
 * - `keyId`: the key's public identifier (`key_` and 22 base62 characters, random, not derived from the key);
 *   not a secret.
 * - `accountId`: the account the key belongs to; all keys of an account share its rate-limit quota.
 * - `plan`, `limits`: the account's plan and, optionally, custom limits for this key (required in practice
 *   for `enterprise`, as for static keys).
 * - `name`: the operator's label, 1–200 characters.
 * - `createdAtMs`, `updatedAtMs`: when the record was created and last changed (by an update, rotation or
 *   revocation).
 * - `expiresAtMs`: from this time on, the key is refused (401).
 * - `revokedAtMs`: from this time on, the key is refused (401). Set once: a second revocation keeps the first
 *   time.
 * - `digest`: the current key's digest.
 * - `previousDigest`, `previousValidUntilMs`: after a rotation, the replaced key's digest, accepted until
 *   `previousValidUntilMs` (the end of the grace period). Both present or both absent.
 */
export interface ApiKeyRecord {
  keyId: string;
  accountId: string;
  plan: PlanName;
  limits?: PlanLimits;
  name?: string;
  createdAtMs: number;
  updatedAtMs: number;
  expiresAtMs?: number;
  revokedAtMs?: number;
  digest: Uint8Array;
  previousDigest?: Uint8Array;
  previousValidUntilMs?: number;
}

/**
 * One change to one record, as plain data (so a Lua script or an SQL statement can apply it). `nowMs` is the
 * time of the change (Unix epoch ms): the record's `updatedAtMs` becomes it.
 *
 * - `update`: sets `plan`, `limits` and `name` where given; `null` clears `limits` or `name`; an absent field
 *   keeps its value.
 * - `rotate`: the current `digest` moves to `previousDigest` with `previousValidUntilMs`, and `digest` becomes
 *   the new one. A second rotation inside a grace period drops the older previous digest: only the key just
 *   replaced keeps working until its grace ends.
 * - `revoke`: sets `revokedAtMs` to `nowMs` unless already set (the first revocation's time is kept) and
 *   drops `previousDigest` and `previousValidUntilMs`.
 *
 * An `update` or a `rotate` of a revoked record changes nothing (see {@link ApiKeyRecordStore.update}).
 */
export type ApiKeyRecordChange =
  | { kind: 'update'; nowMs: number; plan?: PlanName; limits?: PlanLimits | null; name?: string | null }
  | { kind: 'rotate'; nowMs: number; digest: Uint8Array; previousValidUntilMs: number }
  | { kind: 'revoke'; nowMs: number };

/**
 * What a watcher of an {@link ApiKeyRecordStore} is told.
 *
 * - `onChange(digests)`: a record changed, on this instance or any other sharing the backend; `digests` are
 *   every digest the change touched (the current and previous ones, before and after it). Cached lookups of
 *   them are stale.
 * - `onDisconnect(error)`: the notification path broke, or can no longer be trusted (the connection closed, a
 *   heartbeat went unanswered, the backend refused the subscription): changes may be missed until
 *   `onReconnect()`. Called once per break, as soon as the store notices it (within seconds for the library's
 *   stores); `error` says why, without secrets.
 * - `onReconnect()`: the notification path came back after a break; changes made during the break were not
 *   delivered, so every cached lookup is stale. Called once the watch listens again: a change made after it
 *   is delivered.
 */
export interface ApiKeyRecordWatcher {
  onChange(digests: Uint8Array[]): void;
  onDisconnect(error: Error): void;
  onReconnect(): void;
}

/**
 * Where managed keys live. Every method is atomic: a concurrent call sees a record before or after a change,
 * never half of one, and no change is lost to another (two parallel rotations both land, one after the other).
 * Every mutation tells every watcher, of every instance sharing the backend, the digests it touched.
 *
 * The store keeps what it is given and judges nothing: `findByDigest` answers revoked and expired records too;
 * whether a key is accepted is decided at each use by `managedApiKeys`.
 *
 * Failures reject (a `PetstoreError` with code `service_unavailable` when the backend is unreachable or too
 * slow, as the other stores do).
 */
export interface ApiKeyRecordStore {
  /**
   * Optional: the storage system it runs on, in OpenTelemetry `db.system.name` terms (`redis`, `postgresql`;
   * `memory` in process memory). `managedApiKeys` reports it as its own `backend` on the `petstore:store`
   * diagnostics channel; `custom` when absent.
   */
  readonly backend?: StoreBackend;
  /**
   * Adds a record.
   * @throws PetstoreError with code `internal_error` (nothing written) when a record with this `keyId`, or
   *   whose `digest` or `previousDigest` equals this `digest`, exists: with random key ids and keys this only
   *   happens when records are imported twice.
   * @throws PetstoreError with code `storage_full` (nothing written) when the store is at its capacity. A bound
   *   counts live records only: those neither revoked nor expired at the new record's `createdAtMs` (the time of
   *   the create); revoked and expired ones take room until `purge` removes them.
   */
  create(record: ApiKeyRecord): Promise<void>;
  /**
   * The record whose `digest` or `previousDigest` equals `digest` (32 bytes), in any state (revoked, expired,
   * past its grace period: the caller judges), or `undefined`.
   */
  findByDigest(digest: Uint8Array): Promise<ApiKeyRecord | undefined>;
  /** The record with this `keyId`, or `undefined`. */
  findByKeyId(keyId: string): Promise<ApiKeyRecord | undefined>;
  /**
   * Records in `keyId` order (ascending, by UTF-16 code unit as JavaScript's `<` compares; key ids are ASCII),
   * optionally only those of one account, one page at a time: at most `limit` (a whole number 1–1000, default
   * 100) records whose `keyId` is greater than `after`. `next` is the `keyId` to pass as `after` for the next
   * page; absent on the last page.
   */
  list(options?: { accountId?: string; limit?: number; after?: string }): Promise<{ records: ApiKeyRecord[]; next?: string }>;
  /**
   * Applies `change` to the record with this `keyId` in one atomic step and answers the record after it, or
   * `undefined` when no record has this `keyId`. An `update` or `rotate` of a revoked record changes nothing
   * and answers the record as it is (its `revokedAtMs` tells the caller why).
   */
  update(keyId: string, change: ApiKeyRecordChange): Promise<ApiKeyRecord | undefined>;
  /**
   * Removes every record revoked or expired at or before `beforeMs` (Unix epoch ms): `revokedAtMs <= beforeMs`
   * or `expiresAtMs <= beforeMs`. Active records, and records revoked or expiring after `beforeMs`, stay. A
   * removed record is gone for every method (its keyId and digests find nothing and may be created again), and
   * every watcher is told its digests (current and previous), so caches drop it. Revoked and expired records
   * never change again, so a store may remove them in several atomic batches rather than one step.
   * Optional: without it, `managedApiKeys(…).purge` rejects.
   * @returns how many records were removed
   * @throws TypeError when `beforeMs` is not a whole number of ms; nothing is removed.
   */
  purge?(options: { beforeMs: number }): Promise<number>;
  /**
   * Starts delivering invalidations to `listener`; resolves once listening (a change committed after that
   * is delivered). `close()` of the answer stops it. Optional: without it, `managedApiKeys` relies on its
   * cache's TTL alone. Calls of the listener must not throw into the store: the listener does not throw.
   */
  watch?(listener: ApiKeyRecordWatcher): Promise<{ close(): Promise<void> }>;
  /** Releases what the store opened itself (never a client or pool it was given). */
  close?(): Promise<void>;
}
