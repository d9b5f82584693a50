/**
 * An in-test {@link ApiKeyRecordStore} over maps, with switches that break it the ways real stores break. For
 * this package's own tests only; not exported.
 */
import type { ApiKeyRecord, ApiKeyRecordChange, ApiKeyRecordStore, ApiKeyRecordWatcher } from '../src/auth/api-key-records.js';
import { PetstoreError } from '../src/errors.js';

/** Ways to break the store, for the suite's meta-tests. */
export interface ApiKeyRecordStoreFaults {
  /** A change reads the record, waits a tick (a network hop), then writes: parallel changes lose updates. */
  readModifyWrite?: boolean;
  /** Updates and rotations of a revoked record are applied (and can clear nothing, but change the record). */
  changesRevoked?: boolean;
  /** A second revocation moves `revokedAtMs`. */
  revokeMovesTime?: boolean;
  /** A rotation keeps every older previous digest in the index (the record stays findable by them). */
  keepsOlderDigests?: boolean;
  /** Mutations tell no watcher. */
  silent?: boolean;
  /** `list` ignores `after`. */
  listIgnoresAfter?: boolean;
}

/** A {@link ApiKeyRecordStore} that also counts its lookups. */
export interface TestApiKeyRecordStore extends ApiKeyRecordStore {
  /** Calls of `findByDigest` so far. */
  readonly digestLookups: number;
  watch(listener: ApiKeyRecordWatcher): Promise<{ close(): Promise<void> }>;
}

const hex = (digest: Uint8Array) => Buffer.from(digest).toString('hex');

/** The record after `change`, by the contract's rules. */
function apply(record: ApiKeyRecord, change: ApiKeyRecordChange, faults: ApiKeyRecordStoreFaults): ApiKeyRecord {
  if (record.revokedAtMs !== undefined && !faults.changesRevoked && !(change.kind === 'revoke' && faults.revokeMovesTime)) return record;
  switch (change.kind) {
    case 'revoke': {
      const { previousDigest: _digest, previousValidUntilMs: _until, ...rest } = record;
      return { ...rest, revokedAtMs: change.nowMs, updatedAtMs: change.nowMs };
    }
    case 'rotate':
      return { ...record, digest: change.digest, previousDigest: record.digest, previousValidUntilMs: change.previousValidUntilMs, updatedAtMs: change.nowMs };
    case 'update': {
      const next: ApiKeyRecord = { ...record, updatedAtMs: change.nowMs };
      if (change.plan !== undefined) next.plan = change.plan;
      if (change.limits === null) delete next.limits;
      else if (change.limits !== undefined) next.limits = { ...change.limits };
      if (change.name === null) delete next.name;
      else if (change.name !== undefined) next.name = change.name;
      return next;
    }
  }
}

/**
 * A backend that several store instances share (as servers share one Redis), with notifications that can be cut:
 * `breakNotifications()` drops every watch's subscription, then (a tick later) renews it and calls its
 * `onReconnect()`; changes made in between are not delivered.
 */
export interface TestApiKeyRecordBackend {
  instance(): TestApiKeyRecordStore;
  breakNotifications(): Promise<void>;
  /** Drops every watch's subscription and reports it (`onDisconnect(error)`); changes are not delivered until `reconnect()`. */
  disconnect(error: Error): void;
  /** Renews every dropped subscription and reports it (`onReconnect()`). */
  reconnect(): void;
}

/** Creates an empty store, optionally broken; `maxRecords` bounds it (default unbounded). */
export function testApiKeyRecordStore(options: { faults?: ApiKeyRecordStoreFaults; maxRecords?: number } = {}): TestApiKeyRecordStore {
  return testApiKeyRecordBackend(options).instance();
}

/** Creates an empty backend; see {@link TestApiKeyRecordBackend}. */
export function testApiKeyRecordBackend(options: { faults?: ApiKeyRecordStoreFaults; maxRecords?: number } = {}): TestApiKeyRecordBackend {
  const faults = options.faults ?? {};
  const records = new Map<string, ApiKeyRecord>();
  const byDigest = new Map<string, string>();
  /** Every watch, and whether its subscription is up. */
  const watchers = new Map<ApiKeyRecordWatcher, { connected: boolean }>();
  return {
    instance: () => storeOver(records, byDigest, watchers, faults, options.maxRecords),
    async breakNotifications() {
      for (const subscription of watchers.values()) subscription.connected = false;
      setImmediate(() => {
        for (const [watcher, subscription] of watchers) {
          subscription.connected = true;
          watcher.onReconnect();
        }
      });
    },
    disconnect(error) {
      for (const [watcher, subscription] of watchers) {
        if (!subscription.connected) continue;
        subscription.connected = false;
        watcher.onDisconnect(error);
      }
    },
    reconnect() {
      for (const [watcher, subscription] of watchers) {
        if (subscription.connected) continue;
        subscription.connected = true;
        watcher.onReconnect();
      }
    },
  };
}

function storeOver(
  records: Map<string, ApiKeyRecord>,
  byDigest: Map<string, string>,
  watchers: Map<ApiKeyRecordWatcher, { connected: boolean }>,
  faults: ApiKeyRecordStoreFaults,
  maxRecords: number | undefined,
): TestApiKeyRecordStore {
  let digestLookups = 0;
  const copy = (record: ApiKeyRecord): ApiKeyRecord => ({
    ...record,
    digest: new Uint8Array(record.digest),
    ...(record.previousDigest ? { previousDigest: new Uint8Array(record.previousDigest) } : {}),
    ...(record.limits ? { limits: { ...record.limits } } : {}),
  });
  const digestsOf = (record: ApiKeyRecord) => (record.previousDigest ? [record.digest, record.previousDigest] : [record.digest]);
  const tell = (digests: Uint8Array[]) => {
    if (faults.silent) return;
    for (const [watcher, subscription] of watchers) if (subscription.connected) watcher.onChange(digests.map((digest) => new Uint8Array(digest)));
  };
  const write = (before: ApiKeyRecord, after: ApiKeyRecord) => {
    if (!faults.keepsOlderDigests) for (const digest of digestsOf(before)) byDigest.delete(hex(digest));
    for (const digest of digestsOf(after)) byDigest.set(hex(digest), after.keyId);
    records.set(after.keyId, after);
    tell([...digestsOf(before), ...digestsOf(after)]);
  };
  return {
    get digestLookups() {
      return digestLookups;
    },
    async create(record) {
      if (records.has(record.keyId) || byDigest.has(hex(record.digest))) throw new PetstoreError('internal_error', 'An API key record with this keyId or digest exists.');
      // The bound counts live records: neither revoked nor expired at the create.
      const live = [...records.values()].filter((held) => held.revokedAtMs === undefined && (held.expiresAtMs === undefined || held.expiresAtMs > record.createdAtMs));
      if (maxRecords !== undefined && live.length >= maxRecords) throw new PetstoreError('storage_full', 'The API key store is full.');
      const stored = copy(record);
      records.set(stored.keyId, stored);
      for (const digest of digestsOf(stored)) byDigest.set(hex(digest), stored.keyId);
      tell(digestsOf(stored));
    },
    async findByDigest(digest) {
      digestLookups++;
      const keyId = byDigest.get(hex(digest));
      const record = keyId === undefined ? undefined : records.get(keyId);
      return record && copy(record);
    },
    async findByKeyId(keyId) {
      const record = records.get(keyId);
      return record && copy(record);
    },
    async list(listOptions = {}) {
      const limit = listOptions.limit ?? 100;
      const after = faults.listIgnoresAfter ? undefined : listOptions.after;
      const matching = [...records.values()]
        .filter((record) => (listOptions.accountId === undefined || record.accountId === listOptions.accountId) && (after === undefined || record.keyId > after))
        .sort((a, b) => (a.keyId < b.keyId ? -1 : 1));
      const page = matching.slice(0, limit).map(copy);
      return matching.length > limit ? { records: page, next: page.at(-1)?.keyId as string } : { records: page };
    },
    async update(keyId, change) {
      const before = records.get(keyId);
      if (before === undefined) return undefined;
      if (faults.readModifyWrite) await new Promise<void>((resolve) => setImmediate(resolve));
      const after = apply(before, change, faults);
      if (after !== before) write(before, after); // with readModifyWrite, `before` may be stale by now
      return copy(after);
    },
    async purge({ beforeMs }) {
      if (!Number.isSafeInteger(beforeMs)) throw new TypeError('beforeMs must be a whole number of ms');
      const removed = [...records.values()].filter(
        (record) => (record.revokedAtMs !== undefined && record.revokedAtMs <= beforeMs) || (record.expiresAtMs !== undefined && record.expiresAtMs <= beforeMs),
      );
      for (const record of removed) {
        records.delete(record.keyId);
        for (const digest of digestsOf(record)) if (byDigest.get(hex(digest)) === record.keyId) byDigest.delete(hex(digest));
      }
      if (removed.length > 0) tell(removed.flatMap(digestsOf));
      return removed.length;
    },
    async watch(listener) {
      watchers.set(listener, { connected: true });
      return { close: async () => void watchers.delete(listener) };
    },
  };
}
