import { PetstoreError, type ApiKeyRecord, type ApiKeyRecordChange, type ApiKeyRecordStore, type ApiKeyRecordWatcher } from '@petstore/core';
import { hex } from '@petstore/internal';

/** Options of {@link memoryApiKeyRecordStore}. */
export interface MemoryApiKeyRecordStoreOptions {
  /**
   * Most live records held: those neither revoked nor expired at the new record's `createdAtMs`. A create
   * beyond it is refused with `storage_full` and writes nothing: a key record is data, so it is never evicted.
   * Revoked and expired records do not count; `purge` removes them. Default 100,000.
   */
  maxRecords?: number;
}

/** An {@link ApiKeyRecordStore} in process memory, with its number of records. */
export interface MemoryApiKeyRecordStore extends ApiKeyRecordStore {
  /** Records held, revoked and expired ones included (until `purge` removes them). */
  readonly size: number;
  purge(options: { beforeMs: number }): Promise<number>;
  watch(listener: ApiKeyRecordWatcher): Promise<{ close(): Promise<void> }>;
}

/** Default of {@link MemoryApiKeyRecordStoreOptions.maxRecords}. */
export const DEFAULT_MAX_API_KEY_RECORDS = 100_000;

/** Default and largest page of `list`. */
const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;

/** A copy the caller may change without touching the stored record: own digests and limits. */
function copyOf(record: ApiKeyRecord): ApiKeyRecord {
  const copy: ApiKeyRecord = { ...record, digest: new Uint8Array(record.digest) };
  if (record.limits !== undefined) copy.limits = { ...record.limits };
  if (record.previousDigest !== undefined) copy.previousDigest = new Uint8Array(record.previousDigest);
  return copy;
}

/** The digests a record is found by. */
const digestsOf = (record: ApiKeyRecord): Uint8Array[] => (record.previousDigest === undefined ? [record.digest] : [record.digest, record.previousDigest]);

/** Whether a record is neither revoked nor expired at `nowMs` (what counts towards `maxRecords`). */
const isLive = (record: ApiKeyRecord, nowMs: number): boolean =>
  record.revokedAtMs === undefined && (record.expiresAtMs === undefined || record.expiresAtMs > nowMs);

/** Removes `keyId` from the sorted `keyIds`, if there. */
function removeSorted(keyIds: string[], keyId: string): void {
  const index = firstAfter(keyIds, keyId) - 1;
  if (index >= 0 && keyIds[index] === keyId) keyIds.splice(index, 1);
}

/** The record after `change` (the contract's rules), or `record` itself when nothing changes. */
function applyChange(record: ApiKeyRecord, change: ApiKeyRecordChange): ApiKeyRecord {
  if (record.revokedAtMs !== undefined) return record;
  switch (change.kind) {
    case 'revoke': {
      const { previousDigest: _digest, previousValidUntilMs: _until, ...rest } = record;
      return { ...rest, revokedAtMs: change.nowMs, updatedAtMs: change.nowMs };
    }
    case 'rotate':
      return {
        ...record,
        digest: new Uint8Array(change.digest),
        previousDigest: record.digest,
        previousValidUntilMs: change.previousValidUntilMs,
        updatedAtMs: change.nowMs,
      };
    case 'update': {
      const next: ApiKeyRecord = { ...record, updatedAtMs: change.nowMs };
      if (change.plan !== undefined) next.plan = change.plan;
      if (change.limits === null) delete next.limits;
      else if (change.limits !== undefined) next.limits = { requestsPerMinute: change.limits.requestsPerMinute, requestsPerDay: change.limits.requestsPerDay };
      if (change.name === null) delete next.name;
      else if (change.name !== undefined) next.name = change.name;
      return next;
    }
  }
}

/** The index of the first entry of the sorted `keyIds` greater than `after` (binary search). */
function firstAfter(keyIds: readonly string[], after: string): number {
  let low = 0;
  let high = keyIds.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((keyIds[middle] as string) <= after) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** Inserts `keyId` into the sorted `keyIds`. */
function insertSorted(keyIds: string[], keyId: string): void {
  keyIds.splice(firstAfter(keyIds, keyId), 0, keyId);
}

/**
 * Managed API-key records in process memory, for one instance, development and tests (keys issued here are
 * gone when the process ends; several instances need `@petstore/storage-redis` or `@petstore/storage-postgres`).
 *
 * Every method finishes its change in one synchronous step before it answers, so each is atomic within the
 * process. Watchers are told of every change before the change's promise resolves: `managedApiKeys` over this
 * store forgets a revoked key before `revoke()` returns. Records and digests are copied in and out: a caller
 * that changes an answer changes nothing stored. Lists are kept sorted by `keyId` (globally and per account), so
 * a page costs a binary search and its own length.
 *
 * @throws TypeError when `maxRecords` is not a whole number ≥ 1.
 */
export function memoryApiKeyRecordStore(options: MemoryApiKeyRecordStoreOptions = {}): MemoryApiKeyRecordStore {
  const maxRecords = options.maxRecords ?? DEFAULT_MAX_API_KEY_RECORDS;
  if (!Number.isSafeInteger(maxRecords) || maxRecords < 1) {
    throw new TypeError(`memoryApiKeyRecordStore: maxRecords must be a whole number >= 1, got ${String(maxRecords)}`);
  }
  // Maps, not objects: an account or key id such as "__proto__" is a key like any other.
  const records = new Map<string, ApiKeyRecord>();
  const keyIdByDigest = new Map<string, string>();
  const sortedKeyIds: string[] = [];
  const sortedKeyIdsByAccount = new Map<string, string[]>();
  // One entry per watch (an object of its own), so the same listener can watch twice and close each alone.
  const watchers = new Set<{ listener: ApiKeyRecordWatcher }>();

  const tell = (digests: Uint8Array[]) => {
    for (const { listener } of watchers) {
      try {
        listener.onChange(digests.map((digest) => new Uint8Array(digest)));
      } catch {
        // A watcher must not throw (see ApiKeyRecordStore.watch); if one does, the change stands and the
        // other watchers are still told.
      }
    }
  };

  const countLive = (nowMs: number): number => {
    let live = 0;
    for (const record of records.values()) if (isLive(record, nowMs)) live++;
    return live;
  };

  return {
    backend: 'memory',
    get size() {
      return records.size;
    },
    async create(record) {
      if (records.has(record.keyId) || keyIdByDigest.has(hex(record.digest))) {
        throw new PetstoreError('internal_error', 'An API key record with this keyId or digest exists; nothing was written.');
      }
      // Counting live records costs a scan, so only when the store holds maxRecords in all.
      if (records.size >= maxRecords && countLive(record.createdAtMs) >= maxRecords) {
        throw new PetstoreError('storage_full', `The API key store holds its maximum of ${maxRecords} records; nothing was written.`);
      }
      const stored = copyOf(record);
      records.set(stored.keyId, stored);
      for (const digest of digestsOf(stored)) keyIdByDigest.set(hex(digest), stored.keyId);
      insertSorted(sortedKeyIds, stored.keyId);
      const ofAccount = sortedKeyIdsByAccount.get(stored.accountId) ?? [];
      insertSorted(ofAccount, stored.keyId);
      sortedKeyIdsByAccount.set(stored.accountId, ofAccount);
      tell(digestsOf(stored));
    },
    async findByDigest(digest) {
      const keyId = keyIdByDigest.get(hex(digest));
      const record = keyId === undefined ? undefined : records.get(keyId);
      return record === undefined ? undefined : copyOf(record);
    },
    async findByKeyId(keyId) {
      const record = records.get(keyId);
      return record === undefined ? undefined : copyOf(record);
    },
    async list(listOptions = {}) {
      const limit = Math.min(Math.max(1, Math.trunc(listOptions.limit ?? DEFAULT_PAGE)), MAX_PAGE);
      const keyIds = listOptions.accountId === undefined ? sortedKeyIds : (sortedKeyIdsByAccount.get(listOptions.accountId) ?? []);
      const start = listOptions.after === undefined ? 0 : firstAfter(keyIds, listOptions.after);
      const page = keyIds.slice(start, start + limit).map((keyId) => copyOf(records.get(keyId) as ApiKeyRecord));
      return start + limit < keyIds.length ? { records: page, next: page.at(-1)?.keyId as string } : { records: page };
    },
    async update(keyId, change) {
      const before = records.get(keyId);
      if (before === undefined) return undefined;
      const after = applyChange(before, change);
      if (after !== before) {
        for (const digest of digestsOf(before)) keyIdByDigest.delete(hex(digest));
        for (const digest of digestsOf(after)) keyIdByDigest.set(hex(digest), keyId);
        records.set(keyId, after);
        tell([...digestsOf(before), ...(after.digest === before.digest ? [] : [after.digest])]);
      }
      return copyOf(after);
    },
    async purge(purgeOptions) {
      const beforeMs = purgeOptions?.beforeMs;
      if (typeof beforeMs !== 'number' || !Number.isSafeInteger(beforeMs)) {
        throw new TypeError(`purge: beforeMs must be a whole number of ms (Unix epoch), got ${String(beforeMs)}`);
      }
      const removed: ApiKeyRecord[] = [];
      for (const record of records.values()) {
        const dead = (record.revokedAtMs !== undefined && record.revokedAtMs <= beforeMs) || (record.expiresAtMs !== undefined && record.expiresAtMs <= beforeMs);
        if (dead) removed.push(record);
      }
      for (const record of removed) {
        records.delete(record.keyId);
        for (const digest of digestsOf(record)) {
          if (keyIdByDigest.get(hex(digest)) === record.keyId) keyIdByDigest.delete(hex(digest));
        }
        removeSorted(sortedKeyIds, record.keyId);
        const ofAccount = sortedKeyIdsByAccount.get(record.accountId);
        if (ofAccount !== undefined) {
          removeSorted(ofAccount, record.keyId);
          if (ofAccount.length === 0) sortedKeyIdsByAccount.delete(record.accountId);
        }
      }
      if (removed.length > 0) tell(removed.flatMap(digestsOf));
      return removed.length;
    },
    async watch(listener) {
      const entry = { listener };
      watchers.add(entry);
      return { close: async () => void watchers.delete(entry) };
    },
  };
}
