/**
 * The API-key record store conformance suite: what every {@link ApiKeyRecordStore} must do, run with the store
 * author's own test runner. Assertions use `node:assert/strict`.
 *
 * ```ts
 * import { describe, it } from 'vitest';
 * import { runApiKeyRecordStoreConformance } from '@petstore/core/testing';
 * runApiKeyRecordStoreConformance({ describe, it }, {
 *   createStore: ({ maxRecords }) => ({ store: myStore({ maxRecords }) }),
 *   capabilities: { reconnect: false },
 * });
 * ```
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { ApiKeyRecord, ApiKeyRecordChange, ApiKeyRecordStore, ApiKeyRecordWatcher } from '../auth/api-key-records.js';
import { generateKeyId } from '../auth/managed-key-format.js';
import { isPetstoreError } from '../errors.js';
import { whileWritesHeld } from './hold-writes.js';
import { storeCases } from './store-cases.js';
import type { ConformanceTestApi } from './test-api.js';

/** A fresh, empty store for one case, and what the suite needs around it. */
export interface ApiKeyRecordStoreHarness {
  /** The store under test. */
  store: ApiKeyRecordStore;
  /**
   * A second instance of the store on the same backend, with connections of its own, as another server of the
   * same deployment would have: the watch cases make changes through it and expect `store`'s watchers to hear
   * of them. Absent (the memory store: one process, one instance), the watch cases make every change through
   * `store`. The harness's `close()` closes what `other()` opened.
   */
  other?(): ApiKeyRecordStore | Promise<ApiKeyRecordStore>;
  /**
   * Cuts the notification path of every watch of `store` from the backend's side (Redis: `CLIENT KILL TYPE
   * pubsub`; PostgreSQL: `pg_terminate_backend` of the listening session), as a network failure would. The
   * store must reconnect by itself, then call each watcher's `onReconnect()` and deliver later changes again.
   * Needed for capability `reconnect`.
   */
  breakNotifications?(): Promise<void>;
  /**
   * Holds the store's writes until `release()` (as `CategoryStoreHarness.holdWrites` does): the parallel cases
   * hold, send every call, wait until all are blocked ({@link whenBlocked}), then release, so a change that reads
   * and then writes in two steps loses updates on every run. Optional; without it the calls run as they come
   * (an in-process store whose change is one synchronous step needs none).
   */
  holdWrites?(): Promise<{ release(): Promise<void> }>;
  /** Resolves once at least `count` calls are blocked by {@link holdWrites}. Required with `holdWrites`. */
  whenBlocked?(count: number): Promise<void>;
  /** Releases the store's resources (and those of `other()`) after the case. */
  close?(): Promise<void>;
}

/** Options of {@link runApiKeyRecordStoreConformance}. */
export interface ApiKeyRecordStoreConformanceOptions {
  /** Name shown in the test report. Default `ApiKeyRecordStore conformance`. */
  name?: string;
  /**
   * Creates a fresh, empty store for one case. `maxRecords` is passed by the capacity case: the store must
   * refuse creates beyond it with a `storage_full` PetstoreError.
   */
  createStore(options: { maxRecords?: number }): ApiKeyRecordStoreHarness | Promise<ApiKeyRecordStoreHarness>;
  /**
   * Switches for what a backend cannot do; each defaults to `true`, and a case whose hook is missing fails and
   * names the switch to turn off.
   * - `capacity`: the store honours `maxRecords` (counting live records only);
   * - `purge`: the store has `purge()`;
   * - `watch`: the store has `watch()`;
   * - `reconnect`: the harness has `breakNotifications()` (and the store `watch()`).
   */
  capabilities?: { capacity?: boolean; purge?: boolean; watch?: boolean; reconnect?: boolean };
  /** Per-case timeout in ms, for networked stores. Default 20,000. */
  timeoutMs?: number;
}

// 2026-01-01T00:00:00Z.
const T0 = Date.UTC(2026, 0, 1);
const HOUR_MS = 3_600_000;

/** A new random 32-byte digest. */
const newDigest = (): Uint8Array => new Uint8Array(randomBytes(32));
const hex = (digest: Uint8Array | undefined): string | undefined => (digest === undefined ? undefined : Buffer.from(digest).toString('hex'));

/** A record with fresh random `keyId` and `digest`, the required fields, and `fields` over them. */
function newRecord(fields: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return { keyId: generateKeyId(), accountId: 'acct_1', plan: 'pro', createdAtMs: T0, updatedAtMs: T0, digest: newDigest(), ...fields };
}

/**
 * A record as plain data to compare: digests as hex (a store may answer a Buffer, a Uint8Array or any other
 * view of the bytes), every other field as it is, absent fields absent.
 */
function comparable(record: ApiKeyRecord | undefined): Record<string, unknown> | undefined {
  if (record === undefined) return undefined;
  assert.ok(record.digest instanceof Uint8Array, 'digest is a Uint8Array');
  const copy: Record<string, unknown> = { ...record, digest: hex(record.digest) };
  if ('previousDigest' in record) {
    assert.ok(record.previousDigest instanceof Uint8Array, 'previousDigest is a Uint8Array');
    copy['previousDigest'] = hex(record.previousDigest);
  }
  return copy;
}

/** Asserts `actual` is `expected`, field by field and with the same fields (no extra `undefined` ones). */
function assertRecord(actual: ApiKeyRecord | undefined, expected: ApiKeyRecord | undefined, message: string): void {
  assert.deepEqual(comparable(actual), comparable(expected), message);
}

/** The record `change` makes of `record`, by the contract's rules: the oracle the cases compare with. */
function changed(record: ApiKeyRecord, change: ApiKeyRecordChange): ApiKeyRecord {
  if (record.revokedAtMs !== undefined) return record;
  if (change.kind === 'revoke') {
    const { previousDigest: _digest, previousValidUntilMs: _until, ...rest } = record;
    return { ...rest, revokedAtMs: change.nowMs, updatedAtMs: change.nowMs };
  }
  if (change.kind === 'rotate') {
    return { ...record, digest: change.digest, previousDigest: record.digest, previousValidUntilMs: change.previousValidUntilMs, updatedAtMs: change.nowMs };
  }
  const next: ApiKeyRecord = { ...record, updatedAtMs: change.nowMs };
  if (change.plan !== undefined) next.plan = change.plan;
  if (change.limits === null) delete next.limits;
  else if (change.limits !== undefined) next.limits = change.limits;
  if (change.name === null) delete next.name;
  else if (change.name !== undefined) next.name = change.name;
  return next;
}

/** A watcher that records what it is told and lets a case wait for it. */
function recordingWatcher() {
  const changes: string[][] = [];
  let reconnects = 0;
  let disconnects = 0;
  const waiting: Array<{ done: () => boolean; resolve: () => void }> = [];
  const settle = () => {
    for (const wait of [...waiting]) {
      if (wait.done()) {
        waiting.splice(waiting.indexOf(wait), 1);
        wait.resolve();
      }
    }
  };
  const until = (done: () => boolean) =>
    new Promise<void>((resolve) => {
      if (done()) resolve();
      else waiting.push({ done, resolve });
    });
  const heard = (digest: Uint8Array) => changes.some((digests) => digests.includes(hex(digest) as string));
  const listener: ApiKeyRecordWatcher = {
    onChange(digests) {
      changes.push(digests.map((digest) => hex(digest) as string));
      settle();
    },
    onDisconnect() {
      disconnects++;
      settle();
    },
    onReconnect() {
      reconnects++;
      settle();
    },
  };
  return {
    listener,
    changes,
    heard,
    reconnects: () => reconnects,
    disconnects: () => disconnects,
    /** Resolves with the first change told at index `since` or later that names `digest`. */
    untilChangeSince: async (since: number, digest: string): Promise<string[]> => {
      const find = () => changes.slice(since).find((digests) => digests.includes(digest));
      await until(() => find() !== undefined);
      return find() as string[];
    },
    /** Resolves once every one of `digests` was named by some change. */
    untilHeard: (...digests: Uint8Array[]) => until(() => digests.every(heard)),
    untilReconnected: (count = 1) => until(() => reconnects >= count),
  };
}

/** Registers the conformance cases. Each case gets a fresh store from `createStore`. */
export function runApiKeyRecordStoreConformance(test: ConformanceTestApi, options: ApiKeyRecordStoreConformanceOptions): void {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const capabilities = { capacity: true, purge: true, watch: true, reconnect: true, ...options.capabilities };
  const purgeOf = (store: ApiKeyRecordStore, beforeMs: number) => {
    if (store.purge === undefined) assert.fail('the store has no purge(options): set capabilities.purge to false');
    return store.purge({ beforeMs });
  };
  const caseWith = storeCases(test, (storeOptions: { maxRecords?: number }) => options.createStore(storeOptions), timeoutMs);
  const watchOf = (store: ApiKeyRecordStore, listener: ApiKeyRecordWatcher) => {
    if (store.watch === undefined) assert.fail('the store has no watch(listener): set capabilities.watch to false');
    return store.watch(listener);
  };

  test.describe(options.name ?? 'ApiKeyRecordStore conformance', () => {
    caseWith('starts empty', async (store) => {
      assert.deepEqual(await store.list(), { records: [] });
      assert.equal(await store.findByKeyId(generateKeyId()), undefined);
      assert.equal(await store.findByDigest(newDigest()), undefined);
      assert.equal(await store.update(generateKeyId(), { kind: 'revoke', nowMs: T0 }), undefined, 'update of an unknown keyId answers undefined');
    });

    caseWith('keeps records exactly: plan, limits, name, times and digests; absent fields stay absent', async (store) => {
      const full = newRecord({
        accountId: 'acct "quoted" \\ \'single\' — ünïcödé 🐈',
        plan: 'enterprise',
        limits: { requestsPerMinute: 5_000, requestsPerDay: 2_000_000 },
        name: `CI key "prod" 'eu' ; DROP TABLE keys; -- ${'é'.repeat(150)}`,
        createdAtMs: T0,
        updatedAtMs: T0 + 1,
        expiresAtMs: T0 + 30 * 24 * HOUR_MS,
      });
      const bare = newRecord({ plan: 'free' });
      const zeros = newRecord({ digest: new Uint8Array(32), limits: { requestsPerMinute: 0, requestsPerDay: 0 } });
      for (const record of [full, bare, zeros]) await store.create(record);
      for (const record of [full, bare, zeros]) {
        assertRecord(await store.findByKeyId(record.keyId), record, 'findByKeyId answers the record as created');
        assertRecord(await store.findByDigest(record.digest), record, 'findByDigest answers the record as created');
      }
      const found = (await store.findByKeyId(bare.keyId)) as ApiKeyRecord;
      for (const field of ['limits', 'name', 'expiresAtMs', 'revokedAtMs', 'previousDigest', 'previousValidUntilMs']) {
        assert.equal(field in found, false, `no ${field} field, not even undefined`);
      }
      const listed = await store.list();
      assert.equal(listed.records.length, 3);
      for (const record of [full, bare, zeros]) {
        assertRecord(listed.records.find((entry) => entry.keyId === record.keyId), record, 'list answers the record as created');
      }
    });

    caseWith('keeps account ids such as __proto__ and constructor as data, without polluting any prototype', async (store) => {
      const accounts = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty'];
      const records = accounts.map((accountId) => newRecord({ accountId }));
      for (const record of records) await store.create(record);
      for (const record of records) {
        assertRecord(await store.findByKeyId(record.keyId), record, `the record of account ${record.accountId}`);
        const page = await store.list({ accountId: record.accountId });
        assert.deepEqual(page.records.map((entry) => entry.keyId), [record.keyId], `account ${record.accountId} lists its one key`);
      }
      assert.deepEqual(await store.list({ accountId: 'valueOf' }), { records: [] }, 'an account without keys lists none');
      const probe: Record<string, unknown> = {};
      for (const field of ['plan', 'keyId', 'accountId', 'digest', 'limits']) assert.equal(probe[field], undefined, `Object.prototype has no ${field}`);
    });

    caseWith('refuses a second record with an existing keyId or digest (internal_error), writing nothing', async (store) => {
      const first = newRecord();
      await store.create(first);
      await store.update(first.keyId, { kind: 'rotate', nowMs: T0 + 1, digest: newDigest(), previousValidUntilMs: T0 + HOUR_MS });
      const after = (await store.findByKeyId(first.keyId)) as ApiKeyRecord;
      const conflict = (error: unknown) => isPetstoreError(error) && error.code === 'internal_error';
      const sameKeyId = newRecord({ keyId: first.keyId, accountId: 'acct_other' });
      const sameDigest = newRecord({ digest: after.digest, accountId: 'acct_other' });
      const samePrevious = newRecord({ digest: first.digest, accountId: 'acct_other' });
      await assert.rejects(store.create(sameKeyId), conflict, 'same keyId');
      await assert.rejects(store.create(sameDigest), conflict, 'same digest');
      await assert.rejects(store.create(samePrevious), conflict, 'digest equal to a previous digest');
      assertRecord(await store.findByKeyId(first.keyId), after, 'the first record is unchanged');
      assertRecord(await store.findByDigest(sameKeyId.digest), undefined, 'nothing of the refused record is findable');
      assert.equal(await store.findByKeyId(sameDigest.keyId), undefined, 'nothing of the refused record is findable');
      assert.equal(await store.findByKeyId(samePrevious.keyId), undefined, 'nothing of the refused record is findable');
      assert.deepEqual((await store.list({ accountId: 'acct_other' })).records, [], 'nothing listed for the refused records');
    });

    caseWith('lists in keyId order, a page at a time, optionally of one account', async (store) => {
      const records = Array.from({ length: 25 }, (_, i) => newRecord({ accountId: i % 3 === 0 ? 'acct_a' : 'acct_b' }));
      await Promise.all(records.map((record) => store.create(record)));
      const sorted = records.map((record) => record.keyId).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      const all = await store.list();
      assert.deepEqual(all.records.map((record) => record.keyId), sorted, 'every record, in keyId order');
      assert.equal('next' in all, false, 'no next on the last page');
      const pages: string[][] = [];
      let after: string | undefined;
      for (let page = 0; page < 10; page++) {
        const answer = await store.list({ limit: 10, ...(after === undefined ? {} : { after }) });
        pages.push(answer.records.map((record) => record.keyId));
        if (answer.next === undefined) break;
        assert.equal(answer.next, answer.records.at(-1)?.keyId, 'next is the last keyId of the page');
        after = answer.next;
      }
      assert.deepEqual(pages, [sorted.slice(0, 10), sorted.slice(10, 20), sorted.slice(20)], 'pages of 10, 10 and 5');
      const ofA = sorted.filter((keyId) => records.find((record) => record.keyId === keyId)?.accountId === 'acct_a');
      const firstOfA = await store.list({ accountId: 'acct_a', limit: 4 });
      assert.deepEqual(firstOfA.records.map((record) => record.keyId), ofA.slice(0, 4));
      const restOfA = await store.list({ accountId: 'acct_a', after: firstOfA.next as string });
      assert.deepEqual(restOfA.records.map((record) => record.keyId), ofA.slice(4));
      assert.equal('next' in restOfA, false);
      // `after` need not be a stored keyId: the page starts after it in keyId order.
      const between = `${sorted[4] as string}0`;
      assert.deepEqual((await store.list({ after: between, limit: 3 })).records.map((record) => record.keyId), sorted.slice(5, 8));
      assert.deepEqual((await store.list({ after: sorted.at(-1) as string })).records, [], 'nothing after the last keyId');
    });

    caseWith('lists 100 records per page unless told', async (store) => {
      const records = Array.from({ length: 130 }, () => newRecord());
      await Promise.all(records.map((record) => store.create(record)));
      const first = await store.list();
      assert.equal(first.records.length, 100);
      const second = await store.list({ after: first.next as string });
      assert.equal(second.records.length, 30);
      assert.equal('next' in second, false);
    });

    caseWith('updates plan, limits and name: absent keeps, null clears; updatedAtMs moves, createdAtMs stays', async (store) => {
      const record = newRecord({ name: 'first', limits: { requestsPerMinute: 10, requestsPerDay: 100 } });
      await store.create(record);
      const changes: ApiKeyRecordChange[] = [
        { kind: 'update', nowMs: T0 + 1, plan: 'business' },
        { kind: 'update', nowMs: T0 + 2, name: 'renamed "x" 🐕' },
        { kind: 'update', nowMs: T0 + 3, limits: { requestsPerMinute: 7, requestsPerDay: 70 } },
        { kind: 'update', nowMs: T0 + 4, limits: null },
        { kind: 'update', nowMs: T0 + 5, name: null, plan: 'enterprise', limits: { requestsPerMinute: 9_000, requestsPerDay: 9_000_000 } },
        { kind: 'update', nowMs: T0 + 6 },
      ];
      let expected = record;
      for (const change of changes) {
        expected = changed(expected, change);
        const answered = await store.update(record.keyId, change);
        assertRecord(answered, expected, `update answers the record after ${JSON.stringify(change)}`);
        assertRecord(await store.findByKeyId(record.keyId), expected, 'and keeps it');
      }
      assert.equal(expected.createdAtMs, T0);
      assert.equal(expected.name, undefined);
      assertRecord(await store.findByDigest(record.digest), expected, 'found by its digest after updates');
    });

    caseWith('rotates: the new digest becomes current, the old one previous until the grace end; both find the record', async (store) => {
      const record = newRecord();
      await store.create(record);
      const second = newDigest();
      const rotated = await store.update(record.keyId, { kind: 'rotate', nowMs: T0 + 10, digest: second, previousValidUntilMs: T0 + HOUR_MS });
      const expected = changed(record, { kind: 'rotate', nowMs: T0 + 10, digest: second, previousValidUntilMs: T0 + HOUR_MS });
      assertRecord(rotated, expected, 'rotate answers the record with the new digest and the old one as previous');
      assertRecord(await store.findByDigest(second), expected, 'found by the new digest');
      assertRecord(await store.findByDigest(record.digest), expected, 'found by the previous digest');
      // A second rotation inside the grace period: only the key just replaced stays previous.
      const third = newDigest();
      const again = await store.update(record.keyId, { kind: 'rotate', nowMs: T0 + 20, digest: third, previousValidUntilMs: T0 + 2 * HOUR_MS });
      const expectedAgain = changed(expected, { kind: 'rotate', nowMs: T0 + 20, digest: third, previousValidUntilMs: T0 + 2 * HOUR_MS });
      assertRecord(again, expectedAgain, 'the second rotation drops the older previous digest');
      assertRecord(await store.findByDigest(third), expectedAgain, 'found by the newest digest');
      assertRecord(await store.findByDigest(second), expectedAgain, 'found by the digest just replaced');
      assert.equal(await store.findByDigest(record.digest), undefined, 'the oldest digest finds nothing any more');
      // The dropped digest is free again, as any unknown digest.
      const reuse = newRecord({ digest: record.digest });
      await store.create(reuse);
      assertRecord(await store.findByDigest(record.digest), reuse, 'a dropped digest no longer belongs to the record');
    });

    caseWith('revokes once: revokedAtMs is the first revocation time, the previous digest is dropped, the record is still found', async (store) => {
      const record = newRecord();
      await store.create(record);
      const next = newDigest();
      await store.update(record.keyId, { kind: 'rotate', nowMs: T0 + 1, digest: next, previousValidUntilMs: T0 + HOUR_MS });
      const revoked = await store.update(record.keyId, { kind: 'revoke', nowMs: T0 + 2 });
      assert.equal(revoked?.revokedAtMs, T0 + 2);
      assert.equal(revoked?.updatedAtMs, T0 + 2);
      assert.equal(revoked !== undefined && 'previousDigest' in revoked, false, 'no previous digest after a revocation');
      assert.equal(revoked !== undefined && 'previousValidUntilMs' in revoked, false, 'no grace end after a revocation');
      assertRecord(await store.findByDigest(next), revoked, 'findByDigest finds the revoked record (the caller refuses it)');
      assert.equal(await store.findByDigest(record.digest), undefined, 'the dropped previous digest finds nothing');
      const again = await store.update(record.keyId, { kind: 'revoke', nowMs: T0 + 3 });
      assertRecord(again, revoked, 'a second revocation changes nothing');
      assertRecord(await store.findByKeyId(record.keyId), revoked, 'and keeps the first revocation');
    });

    caseWith('changes nothing when a revoked record is updated or rotated, and answers it as it is', async (store) => {
      const record = newRecord({ name: 'kept' });
      await store.create(record);
      const revoked = (await store.update(record.keyId, { kind: 'revoke', nowMs: T0 + 1 })) as ApiKeyRecord;
      const updated = await store.update(record.keyId, { kind: 'update', nowMs: T0 + 2, plan: 'business', name: null, limits: { requestsPerMinute: 1, requestsPerDay: 1 } });
      assertRecord(updated, revoked, 'an update of a revoked record answers it unchanged');
      const digest = newDigest();
      const rotated = await store.update(record.keyId, { kind: 'rotate', nowMs: T0 + 3, digest, previousValidUntilMs: T0 + HOUR_MS });
      assertRecord(rotated, revoked, 'a rotation of a revoked record answers it unchanged');
      assertRecord(await store.findByKeyId(record.keyId), revoked, 'the record is unchanged');
      assert.equal(await store.findByDigest(digest), undefined, 'the refused rotation left no digest behind');
    });

    caseWith('loses no rotation among 50 parallel ones: each replaced exactly one digest', async (store, harness) => {
      const record = newRecord();
      await store.create(record);
      const digests = Array.from({ length: 50 }, newDigest);
      const results = await whileWritesHeld(harness, 50, () =>
        Promise.all(
          digests.map((digest, i) => store.update(record.keyId, { kind: 'rotate', nowMs: T0 + 1 + i, digest, previousValidUntilMs: T0 + HOUR_MS })),
        ),
      );
      const all = new Set([record.digest, ...digests].map((digest) => hex(digest) as string));
      const previous = new Set<string>();
      results.forEach((result, i) => {
        assert.ok(result !== undefined, 'every rotation answers the record');
        assert.equal(hex(result.digest), hex(digests[i]), 'each rotation answers the record with its own digest current');
        const replaced = hex(result.previousDigest);
        assert.ok(replaced !== undefined && all.has(replaced) && replaced !== hex(result.digest), 'the previous digest is the original or another rotation\'s');
        previous.add(replaced);
      });
      assert.equal(previous.size, 50, 'no two rotations replaced the same digest: none was lost');
      const final = (await store.findByKeyId(record.keyId)) as ApiKeyRecord;
      const current = [...all].filter((digest) => !previous.has(digest));
      assert.deepEqual([hex(final.digest)], current, 'the current digest is the one no rotation replaced');
      assertRecord(await store.findByDigest(final.previousDigest as Uint8Array), final, 'the last replaced digest still finds the record');
    });

    caseWith('lets a revocation win against parallel updates and rotations, and stay', async (store, harness) => {
      const records = Array.from({ length: 10 }, () => newRecord());
      for (const record of records) await store.create(record);
      const rotations = records.map(() => newDigest());
      await whileWritesHeld(harness, 40, () =>
        Promise.all(
          records.flatMap((record, i) => [
            store.update(record.keyId, { kind: 'update', nowMs: T0 + 1, plan: 'business', name: 'before' }),
            store.update(record.keyId, { kind: 'revoke', nowMs: T0 + 2 }),
            store.update(record.keyId, { kind: 'update', nowMs: T0 + 3, plan: 'free', name: 'after' }),
            store.update(record.keyId, { kind: 'rotate', nowMs: T0 + 4, digest: rotations[i] as Uint8Array, previousValidUntilMs: T0 + HOUR_MS }),
          ]),
        ),
      );
      for (const record of records) {
        const final = (await store.findByKeyId(record.keyId)) as ApiKeyRecord;
        assert.equal(final.revokedAtMs, T0 + 2, 'revoked, at the time of the revocation');
        assert.equal('previousDigest' in final, false, 'no previous digest survives the revocation');
        assertRecord(await store.findByDigest(final.digest), final, 'its current digest finds the revoked record');
      }
    });

    caseWith(
      'refuses a create beyond maxRecords with storage_full, writing nothing',
      async (store) => {
        const kept = [newRecord(), newRecord()];
        for (const record of kept) await store.create(record);
        const refused = newRecord();
        await assert.rejects(store.create(refused), (error: unknown) => isPetstoreError(error) && error.code === 'storage_full');
        assert.equal(await store.findByKeyId(refused.keyId), undefined);
        assert.equal(await store.findByDigest(refused.digest), undefined);
        assert.equal((await store.list()).records.length, 2);
        assert.ok(await store.update(kept[0]?.keyId as string, { kind: 'revoke', nowMs: T0 + 1 }), 'a full store still changes its records');
      },
      { maxRecords: 2 },
      capabilities.capacity,
    );

    caseWith(
      'counts live records only towards maxRecords: revoked ones, and those expired at the create, leave room',
      async (store) => {
        const full = (error: unknown) => isPetstoreError(error) && error.code === 'storage_full';
        const expiring = newRecord({ expiresAtMs: T0 + 10 });
        const kept = newRecord();
        await store.create(expiring);
        await store.create(kept);
        await assert.rejects(store.create(newRecord({ createdAtMs: T0 + 9, updatedAtMs: T0 + 9 })), full, 'two live records at T0 + 9');
        const afterExpiry = newRecord({ createdAtMs: T0 + 10, updatedAtMs: T0 + 10 });
        await store.create(afterExpiry);
        await assert.rejects(store.create(newRecord({ createdAtMs: T0 + 11, updatedAtMs: T0 + 11 })), full, 'kept and afterExpiry are live');
        await store.update(kept.keyId, { kind: 'revoke', nowMs: T0 + 12 });
        const afterRevoke = newRecord({ createdAtMs: T0 + 13, updatedAtMs: T0 + 13 });
        await store.create(afterRevoke);
        assert.equal((await store.list()).records.length, 4, 'the revoked and the expired record are still held');
      },
      { maxRecords: 2 },
      capabilities.capacity,
    );

    caseWith(
      'purges the records revoked or expired at or before beforeMs, and only those; their keyIds and digests are free again',
      async (store) => {
        const revokedEarly = newRecord({ accountId: 'acct_purge' });
        const revokedLate = newRecord({ accountId: 'acct_purge' });
        const expiredEarly = newRecord({ accountId: 'acct_purge', expiresAtMs: T0 + 100 });
        const expiresLate = newRecord({ accountId: 'acct_purge', expiresAtMs: T0 + 101 });
        const active = newRecord({ accountId: 'acct_purge' });
        const otherAccount = newRecord({ accountId: 'acct_other', expiresAtMs: T0 + 50 });
        for (const record of [revokedEarly, revokedLate, expiredEarly, expiresLate, active, otherAccount]) await store.create(record);
        // The expired record in a rotation's grace period: both its digests go.
        const rotatedTo = newDigest();
        await store.update(expiredEarly.keyId, { kind: 'rotate', nowMs: T0 + 1, digest: rotatedTo, previousValidUntilMs: T0 + HOUR_MS });
        await store.update(revokedEarly.keyId, { kind: 'revoke', nowMs: T0 + 100 });
        await store.update(revokedLate.keyId, { kind: 'revoke', nowMs: T0 + 101 });
        assert.equal(await purgeOf(store, T0 + 99), 1, 'only the record of acct_other expired by T0 + 99');
        assert.equal(await purgeOf(store, T0 + 100), 2, 'revoked at T0 + 100 and expired at T0 + 100');
        assert.equal(await purgeOf(store, T0 + 100), 0, 'a second purge finds nothing');
        for (const gone of [revokedEarly, expiredEarly, otherAccount]) {
          assert.equal(await store.findByKeyId(gone.keyId), undefined, 'a purged keyId finds nothing');
        }
        for (const digest of [revokedEarly.digest, expiredEarly.digest, rotatedTo, otherAccount.digest]) {
          assert.equal(await store.findByDigest(digest), undefined, 'a purged digest finds nothing');
        }
        const left = [revokedLate, expiresLate, active].map((record) => record.keyId).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
        assert.deepEqual((await store.list()).records.map((record) => record.keyId), left, 'list has the others');
        assert.deepEqual((await store.list({ accountId: 'acct_purge' })).records.map((record) => record.keyId), left, "the account's list too");
        assert.deepEqual(await store.list({ accountId: 'acct_other' }), { records: [] }, 'an account whose keys were all purged lists none');
        assertRecord(await store.findByDigest(revokedLate.digest), (await store.findByKeyId(revokedLate.keyId)) as ApiKeyRecord, 'a kept revoked record');
        const again = newRecord({ keyId: revokedEarly.keyId, digest: rotatedTo });
        await store.create(again);
        assertRecord(await store.findByDigest(rotatedTo), again, 'a purged keyId and digest may be created again');
        await assert.rejects(async () => purgeOf(store, 1.5), TypeError, 'beforeMs not a whole number');
      },
      {},
      capabilities.purge,
    );

    caseWith(
      'tells every watcher the digests of the records a purge removed',
      async (store, harness) => {
        const watcher = recordingWatcher();
        const watch = await watchOf(store, watcher.listener);
        try {
          const writer = harness.other === undefined ? store : await harness.other();
          const record = newRecord({ expiresAtMs: T0 + 10 });
          await writer.create(record);
          const rotatedTo = newDigest();
          await writer.update(record.keyId, { kind: 'rotate', nowMs: T0 + 1, digest: rotatedTo, previousValidUntilMs: T0 + HOUR_MS });
          await watcher.untilHeard(rotatedTo);
          const before = watcher.changes.length;
          assert.equal(await purgeOf(writer, T0 + 10), 1);
          const purge = await watcher.untilChangeSince(before, hex(rotatedTo) as string);
          assert.ok(purge.includes(hex(record.digest) as string), 'the purge names the previous digest too');
        } finally {
          await watch.close();
        }
      },
      {},
      capabilities.purge && capabilities.watch,
    );

    caseWith(
      'tells every watcher the digests each change touched, also of changes made by another instance',
      async (store, harness) => {
        const watcher = recordingWatcher();
        const watch = await watchOf(store, watcher.listener);
        try {
          const writer = harness.other === undefined ? store : await harness.other();
          const record = newRecord();
          await writer.create(record);
          await watcher.untilHeard(record.digest);
          const second = newDigest();
          await writer.update(record.keyId, { kind: 'rotate', nowMs: T0 + 1, digest: second, previousValidUntilMs: T0 + HOUR_MS });
          await watcher.untilHeard(second);
          const rotation = watcher.changes.find((digests) => digests.includes(hex(second) as string)) as string[];
          assert.ok(rotation.includes(hex(record.digest) as string), 'a rotation names the replaced digest too');
          const third = newDigest();
          await writer.update(record.keyId, { kind: 'rotate', nowMs: T0 + 2, digest: third, previousValidUntilMs: T0 + HOUR_MS });
          await watcher.untilHeard(third);
          const secondRotation = watcher.changes.find((digests) => digests.includes(hex(third) as string)) as string[];
          assert.ok(secondRotation.includes(hex(record.digest) as string), 'a rotation names the previous digest it drops');
          assert.ok(secondRotation.includes(hex(second) as string), 'a rotation names the digest it replaces');
          const beforeUpdate = watcher.changes.length;
          await writer.update(record.keyId, { kind: 'update', nowMs: T0 + 3, plan: 'business' });
          await watcher.untilChangeSince(beforeUpdate, hex(third) as string);
          const beforeRevoke = watcher.changes.length;
          await writer.update(record.keyId, { kind: 'revoke', nowMs: T0 + 4 });
          const revocation = await watcher.untilChangeSince(beforeRevoke, hex(third) as string);
          assert.ok(revocation.includes(hex(second) as string), 'a revocation names the previous digest it drops');
          // Changes made through the watched instance itself are heard too.
          const own = newRecord();
          await store.create(own);
          await watcher.untilHeard(own.digest);
        } finally {
          await watch.close();
        }
      },
      {},
      capabilities.watch,
    );

    caseWith(
      'stops telling a watcher once its watch is closed, and goes on telling the others',
      async (store, harness) => {
        const closed = recordingWatcher();
        const open = recordingWatcher();
        const closedWatch = await watchOf(store, closed.listener);
        const openWatch = await watchOf(store, open.listener);
        try {
          const writer = harness.other === undefined ? store : await harness.other();
          const before = newRecord();
          await writer.create(before);
          await Promise.all([closed.untilHeard(before.digest), open.untilHeard(before.digest)]);
          await closedWatch.close();
          const after = newRecord();
          await writer.create(after);
          await open.untilHeard(after.digest);
          // A second change, heard by the open watcher after the first: by then the first has long passed any
          // delivery path the closed watcher may still have had.
          const later = newRecord();
          await writer.create(later);
          await open.untilHeard(later.digest);
          assert.equal(closed.heard(after.digest) || closed.heard(later.digest), false, 'the closed watcher heard nothing more');
        } finally {
          await openWatch.close();
        }
      },
      {},
      capabilities.watch,
    );

    caseWith(
      'tells watchers to drop everything once notifications come back after a break, then delivers again',
      async (store, harness) => {
        if (harness.breakNotifications === undefined) {
          assert.fail('the harness has no breakNotifications(): set capabilities.reconnect to false');
        }
        const watcher = recordingWatcher();
        const watch = await watchOf(store, watcher.listener);
        try {
          const writer = harness.other === undefined ? store : await harness.other();
          const before = newRecord();
          await writer.create(before);
          await watcher.untilHeard(before.digest);
          await harness.breakNotifications();
          await watcher.untilReconnected(1);
          // onReconnect comes once the watch listens again: a change made now is delivered.
          const after = newRecord();
          await writer.create(after);
          await watcher.untilHeard(after.digest);
        } finally {
          await watch.close();
        }
      },
      {},
      capabilities.reconnect && capabilities.watch,
    );
  });
}
