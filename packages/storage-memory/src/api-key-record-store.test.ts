import { hashApiKey, isPetstoreError, managedApiKeys, type ApiKeyRecord } from '@petstore/core';
import { fakeClock } from '@petstore/core/testing';
import { describe, expect, it } from 'vitest';
import { DEFAULT_MAX_API_KEY_RECORDS, memoryApiKeyRecordStore } from './api-key-record-store.js';

const T0 = Date.UTC(2026, 0, 1);
const record = (keyId: string, fields: Partial<ApiKeyRecord> = {}): ApiKeyRecord => ({
  keyId,
  accountId: 'acct_1',
  plan: 'pro',
  createdAtMs: T0,
  updatedAtMs: T0,
  ...fields,
  // Hashed only when not given: the capacity case gives 100,000 digests of its own.
  digest: fields.digest ?? hashApiKey(`secret of ${keyId}`),
});

describe('memoryApiKeyRecordStore', () => {
  it('refuses a maxRecords that is not a whole number >= 1, naming it', () => {
    for (const maxRecords of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => memoryApiKeyRecordStore({ maxRecords }), String(maxRecords)).toThrow(
        new TypeError(`memoryApiKeyRecordStore: maxRecords must be a whole number >= 1, got ${String(maxRecords)}`),
      );
    }
    expect(DEFAULT_MAX_API_KEY_RECORDS).toBe(100_000);
  });

  it('holds up to 100,000 records by default and refuses the next with storage_full', async () => {
    const store = memoryApiKeyRecordStore();
    for (let i = 0; i < DEFAULT_MAX_API_KEY_RECORDS; i++) {
      const digest = Buffer.alloc(32, 7);
      digest.writeUInt32BE(i);
      await store.create(record(`key_${String(i).padStart(22, '0')}`, { digest }));
    }
    expect(store.size).toBe(DEFAULT_MAX_API_KEY_RECORDS);
    await expect(store.create(record('key_one_too_many'))).rejects.toSatisfy((error) => isPetstoreError(error) && error.code === 'storage_full');
    // A page from the middle of 100,000 sorted records.
    const page = await store.list({ after: `key_${String(49_999).padStart(22, '0')}`, limit: 2 });
    expect(page.records.map((entry) => entry.keyId)).toEqual([`key_${String(50_000).padStart(22, '0')}`, `key_${String(50_001).padStart(22, '0')}`]);
  }, 60_000); // 100,000 creates: past the default 5 s on a busy machine

  it('keeps its records to itself: changing an answer or the record given to create changes nothing stored', async () => {
    const store = memoryApiKeyRecordStore();
    const given = record('key_a', { limits: { requestsPerMinute: 1, requestsPerDay: 2 } });
    const digest = Buffer.from(given.digest);
    await store.create(given);
    given.digest.fill(0);
    (given.limits as { requestsPerMinute: number }).requestsPerMinute = 99;
    const found = (await store.findByKeyId('key_a')) as ApiKeyRecord;
    expect(Buffer.from(found.digest).equals(digest)).toBe(true);
    expect(found.limits).toEqual({ requestsPerMinute: 1, requestsPerDay: 2 });
    found.digest.fill(1);
    found.plan = 'free';
    const again = (await store.findByDigest(digest)) as ApiKeyRecord;
    expect(Buffer.from(again.digest).equals(digest)).toBe(true);
    expect(again.plan).toBe('pro');
  });

  it('tells its watchers before a change resolves, and goes on when one of them throws', async () => {
    const store = memoryApiKeyRecordStore();
    const told: string[][] = [];
    await store.watch({
      onChange: () => {
        throw new Error('a broken watcher');
      },
      onDisconnect: () => undefined, onReconnect: () => undefined,
    });
    await store.watch({ onChange: (digests) => told.push(digests.map((digest) => Buffer.from(digest).toString('hex'))), onDisconnect: () => undefined, onReconnect: () => undefined });
    const created = record('key_b');
    await store.create(created);
    expect(told).toEqual([[Buffer.from(created.digest).toString('hex')]]);
    const revoked = await store.update('key_b', { kind: 'revoke', nowMs: T0 + 1 });
    expect(revoked?.revokedAtMs).toBe(T0 + 1);
    expect(told).toHaveLength(2);
  });
});

describe('memoryApiKeyRecordStore under managedApiKeys: maxRecords counts live keys, purge frees the rest', () => {
  const DAY_MS = 24 * 3_600_000;

  it('maxRecords 2: after two revokes a third key is issued; purge removes revoked and expired keys past the retention', async () => {
    const clock = fakeClock(T0);
    const store = memoryApiKeyRecordStore({ maxRecords: 2 });
    const keys = managedApiKeys({ store, clock });
    const first = await keys.issue({ accountId: 'acct_1', plan: 'free' });
    const second = await keys.issue({ accountId: 'acct_1', plan: 'free', expiresInMs: DAY_MS });
    await expect(keys.issue({ accountId: 'acct_1', plan: 'free' })).rejects.toMatchObject({ code: 'storage_full' });
    await keys.revoke(first.keyId);
    await keys.revoke(second.keyId);
    const third = await keys.issue({ accountId: 'acct_1', plan: 'free', expiresInMs: DAY_MS });
    expect(store.size).toBe(3);

    clock.advance(2 * DAY_MS); // the third key expired a day ago; the first two were revoked two days ago
    expect(await keys.purge({ olderThanMs: 2 * DAY_MS + 1 })).toEqual({ removed: 0, beforeMs: T0 - 1 });
    expect(await keys.purge({ olderThanMs: 2 * DAY_MS })).toEqual({ removed: 2, beforeMs: T0 });
    expect(await keys.get(first.keyId)).toBeUndefined();
    expect((await keys.list()).keys.map((key) => key.keyId)).toEqual([third.keyId]);
    expect(await keys.purge({ olderThanMs: 0 })).toEqual({ removed: 1, beforeMs: T0 + 2 * DAY_MS });
    expect(store.size).toBe(0);
    expect(await keys.findPrincipal(hashApiKey(first.key))).toBeUndefined();
    await expect(keys.purge({ olderThanMs: -1 })).rejects.toThrow(TypeError);
    await keys.close();
  });
});
