/**
 * The category store conformance suite: what every {@link CategoryStore} must do, run with the store
 * author's own test runner. Assertions use `node:assert/strict`.
 */
import assert from 'node:assert/strict';
import { isPetstoreError } from '../errors.js';
import type { Category } from '../schemas.js';
import type { CategoryStore, IdempotentCreateRequest } from '../storage/category-store.js';
import { whileWritesHeld } from './hold-writes.js';
import { storeCases } from './store-cases.js';
import type { ConformanceTestApi } from './test-api.js';

/** A fresh store for one case, with optional hooks that make its concurrency cases deterministic. */
export interface CategoryStoreHarness {
  store: CategoryStore;
  /**
   * Holds the store's category writes until `release()` resolves them. While held, every create (plain or
   * idempotent) that reaches its write waits there; reads still run. The idempotent-burst case holds, sends all
   * 50 calls, waits until every one is blocked ({@link whenBlocked}), then releases: every call has then passed
   * whatever check it makes before writing, so a claim that is not atomic (look the key up, then create) creates
   * more than once on every run, not only when the timing happens to interleave. Without this hook the case runs
   * the calls as they come.
   *
   * PostgreSQL: a transaction on a connection of its own holding `LOCK TABLE <categories> IN SHARE MODE`
   * (inserts wait, selects do not), committed by `release()`. Redis needs none: each create is one Lua script,
   * and Redis runs no other command while a script runs, so no two claims can interleave. The memory store needs
   * none: it looks the key up, creates and records in one synchronous step, which no other call can enter.
   */
  holdWrites?(): Promise<{ release(): Promise<void> }>;
  /**
   * Resolves once at least `count` calls are blocked inside the store while {@link holdWrites} holds. A call is
   * blocked when it cannot go on before the hold is released: it waits on a held write, or on another call that
   * does (a second claim of one key waiting for the first). A call that has returned, or that runs, is not
   * blocked. PostgreSQL: `count` sessions waiting on a lock (`pg_stat_activity.wait_event_type = 'Lock'`).
   * Required with `holdWrites`: the case fails with a message naming both when only `holdWrites` is given.
   */
  whenBlocked?(count: number): Promise<void>;
  /**
   * Another app instance over the same data: a second store (a client or pool of its own, same prefix or tables),
   * as another process would have. Required with `capabilities.otherInstance`. Closed by `close`.
   */
  other?(): CategoryStore;
  close?(): Promise<void>;
}

/** Options of {@link runCategoryStoreConformance}. */
export interface CategoryStoreConformanceOptions {
  /** Name shown in the test report. Default `CategoryStore conformance`. */
  name?: string;
  /**
   * Creates a fresh, empty store for one case. `maxCategories` is passed by the capacity case: the store must
   * refuse creates beyond it with a `storage_full` PetstoreError.
   */
  createStore(options: { maxCategories?: number }): CategoryStoreHarness | Promise<CategoryStoreHarness>;
  /**
   * Switches for what a backend can do. `capacity` (default `true`): the store honours `maxCategories`.
   * `listVersion` (default `true`): the store has `listVersion()` (optional in {@link CategoryStore}); when `true`
   * and the store lacks it, the list-version cases fail. `otherInstance` (default `false`): the harness has
   * {@link CategoryStoreHarness.other}, and the case that a create through one instance changes the version the
   * other reads runs (a store shared between processes, Redis or PostgreSQL, must pass it).
   */
  capabilities?: { capacity?: boolean; listVersion?: boolean; otherInstance?: boolean };
  /** Per-case timeout in ms. Default 20,000. */
  timeoutMs?: number;
}

/** Registers the conformance cases. Each case gets a fresh store from `createStore`. */
export function runCategoryStoreConformance(test: ConformanceTestApi, options: CategoryStoreConformanceOptions): void {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const caseWith = storeCases(test, (storeOptions: { maxCategories?: number }) => options.createStore(storeOptions), timeoutMs);

  /** An idempotent create's request: a key and fingerprint made of `label` (64 hex characters each, as the library's). */
  const idempotent = (key: string, fingerprint = 'a', retentionMs = 60_000): IdempotentCreateRequest => ({
    key: hex64(key),
    fingerprint: hex64(fingerprint),
    retentionMs,
  });

  test.describe(options.name ?? 'CategoryStore conformance', () => {
    caseWith('starts empty', async (store) => {
      assert.deepEqual(await store.list(), []);
    });

    caseWith('gives parallel creates unique, increasing, safe-integer ids, and lists them all in id order', async (store) => {
      const created = await Promise.all(Array.from({ length: 250 }, (_, i) => store.create({ name: `category ${i}` })));
      const ids = created.map((category) => category.id);
      assert.equal(new Set(ids).size, 250, 'ids are unique');
      for (const id of ids) assert.ok(Number.isSafeInteger(id) && id >= 1, `id ${id} is a safe integer >= 1`);
      const listed = await store.list();
      assert.equal(listed.length, 250);
      const listedIds = listed.map((category) => category.id);
      assert.deepEqual(listedIds, [...listedIds].sort((a, b) => a - b), 'listed in ascending id order');
      assert.deepEqual(new Set(listedIds), new Set(ids));
      for (const category of created) {
        assert.deepEqual(listed.find((entry) => entry.id === category.id), category, 'listed as created');
      }
      const later = await store.create({ name: 'later' });
      assert.ok(later.id > Math.max(...ids), 'a later create gets a larger id');
    });

    caseWith('answers pages: at most limit, ids above after, in ascending id order', async (store) => {
      const created: Category[] = [];
      for (let i = 0; i < 7; i++) created.push(await store.create({ name: `category ${i}` }));
      const ids = created.map((category) => category.id);
      const idsOf = (categories: readonly Category[]) => categories.map((category) => category.id);
      assert.deepEqual(idsOf(await store.list({ limit: 3 })), ids.slice(0, 3), 'the first page');
      assert.deepEqual(idsOf(await store.list({ limit: 3, after: ids[2] })), ids.slice(3, 6), 'the page after the first');
      assert.deepEqual(idsOf(await store.list({ limit: 3, after: ids[5] })), ids.slice(6), 'the last page, shorter');
      assert.deepEqual(await store.list({ limit: 3, after: ids[6] }), [], 'nothing after the last id');
      assert.deepEqual(await store.list({ limit: 1001, after: 0 }), created, 'a page larger than the list answers it all, as created');
      assert.deepEqual(idsOf(await store.list({ after: ids[4] })), ids.slice(5), 'after alone: every id above it');
      assert.deepEqual(idsOf(await store.list({ limit: 2, after: (ids[3] as number) - 1 })), ids.slice(3, 5), 'after need not be an id of the list');
      assert.deepEqual(await store.list({ limit: 5, after: Number.MAX_SAFE_INTEGER }), [], 'after the largest id there is');
      assert.deepEqual(await store.list({}), created, 'an empty page object is the whole list');
    });

    caseWith(
      'changes the list version when, and only when, a category is created',
      async (store) => {
        const readVersion = store.listVersion?.bind(store);
        assert.ok(readVersion !== undefined, 'the store has listVersion() (or capabilities.listVersion is false)');
        const isToken = (version: unknown) => typeof version === 'string' && version.length >= 1 && version.length <= 128;
        const empty = await readVersion();
        assert.ok(isToken(empty), 'a string of 1 to 128 characters');
        assert.equal(await readVersion(), empty, 'unchanged by reading it');
        await store.list();
        await store.list({ limit: 1 });
        assert.equal(await readVersion(), empty, 'unchanged by listing');
        const dogs = await store.create({ name: 'Dogs' });
        const afterCreate = await readVersion();
        assert.ok(isToken(afterCreate));
        assert.notEqual(afterCreate, empty, 'a create changes it');
        assert.deepEqual(await store.list(), [dogs], 'the version read after a create lists that category');
        const created = await store.createIdempotent({ name: 'Cats' }, idempotent('version'));
        assert.equal(created.outcome, 'created');
        const afterIdempotent = await readVersion();
        assert.ok(![empty, afterCreate].includes(afterIdempotent), 'an idempotent create changes it, to a token not seen before');
        assert.equal((await store.createIdempotent({ name: 'Cats' }, idempotent('version'))).outcome, 'replayed');
        assert.equal((await store.createIdempotent({ name: 'Birds' }, idempotent('version', 'b'))).outcome, 'mismatch');
        assert.equal(await readVersion(), afterIdempotent, 'a replay and a mismatch create nothing and leave it');
        const parallel = await Promise.all(Array.from({ length: 10 }, (_, i) => store.create({ name: `parallel ${i}` })));
        const afterParallel = await readVersion();
        assert.ok(![empty, afterCreate, afterIdempotent].includes(afterParallel), 'parallel creates change it');
        const listed = (await store.list()).map((category) => category.id);
        for (const category of parallel) assert.ok(listed.includes(category.id), 'every category created before the version is listed');
      },
      {},
      options.capabilities?.listVersion ?? true,
    );

    caseWith(
      'shares the list version between instances: a create through one changes what the other reads',
      async (store, harness) => {
        assert.ok(harness.other !== undefined, 'capabilities.otherInstance is set, so createStore gives other()');
        const other = harness.other();
        assert.ok(store.listVersion !== undefined && other.listVersion !== undefined, 'both instances have listVersion()');
        await store.create({ name: 'here' });
        const before = await store.listVersion();
        assert.equal(await other.listVersion(), before, 'both read the same version');
        await other.create({ name: 'elsewhere' });
        const after = await store.listVersion();
        assert.notEqual(after, before, 'a create through the other instance changes the version this one reads');
        assert.deepEqual((await store.list()).map((category) => category.name), ['here', 'elsewhere']);
        await store.create({ name: 'here again' });
        assert.notEqual(await other.listVersion(), after, 'and the other way round');
      },
      {},
      (options.capabilities?.listVersion ?? true) && (options.capabilities?.otherInstance ?? false),
    );

    caseWith(
      'leaves the list version when a create fails (full store)',
      async (store) => {
        const readVersion = store.listVersion?.bind(store);
        assert.ok(readVersion !== undefined, 'the store has listVersion()');
        await store.create({ name: 'a' });
        const full = await readVersion();
        await assert.rejects(store.create({ name: 'b' }), (error: unknown) => isPetstoreError(error) && error.code === 'storage_full');
        await assert.rejects(store.createIdempotent({ name: 'c' }, idempotent('full-version')), (error: unknown) => isPetstoreError(error) && error.code === 'storage_full');
        assert.equal(await readVersion(), full);
      },
      { maxCategories: 1 },
      (options.capabilities?.capacity ?? true) && (options.capabilities?.listVersion ?? true),
    );

    caseWith('returns description only when it was given', async (store) => {
      const bare = await store.create({ name: 'Dogs' });
      const described = await store.create({ name: 'Cats', description: 'Feline breeds' });
      const empty = await store.create({ name: 'Birds', description: '' });
      assert.deepEqual(Object.keys(bare).sort(), ['id', 'name']);
      assert.deepEqual({ ...described, id: 0 }, { id: 0, name: 'Cats', description: 'Feline breeds' });
      assert.equal(empty.description, '', 'an empty description is kept');
      const listed = await store.list();
      assert.deepEqual(listed, [bare, described, empty] satisfies Category[]);
      assert.equal('description' in (listed[0] as Category), false, 'no description key, not even undefined');
    });

    caseWith('keeps names and descriptions exactly, including unicode', async (store) => {
      const name = 'Chats 🐈 — “Félins”';
      const description = 'line one\nline two\t"quoted" \\ backslash';
      const created = await store.create({ name, description });
      assert.deepEqual((await store.list())[0], { id: created.id, name, description });
    });

    caseWith(
      'writes nothing when a create fails (full store), and goes on working',
      async (store) => {
        await store.create({ name: 'a' });
        await store.create({ name: 'b' });
        const failures = await Promise.allSettled(Array.from({ length: 5 }, () => store.create({ name: 'overflow' })));
        for (const failure of failures) {
          assert.equal(failure.status, 'rejected');
          const reason = (failure as PromiseRejectedResult).reason as unknown;
          assert.ok(isPetstoreError(reason) && reason.code === 'storage_full', 'refused with storage_full');
        }
        assert.deepEqual((await store.list()).map((category) => category.name), ['a', 'b']);
      },
      { maxCategories: 2 },
      options.capabilities?.capacity ?? true,
    );

    caseWith('creates once per idempotency key: a repeat with the same fingerprint replays, another fingerprint is a mismatch', async (store) => {
      const first = await store.createIdempotent({ name: 'Dogs', description: 'Canine' }, idempotent('k1'));
      assert.equal(first.outcome, 'created');
      const created = (first as { category: Category }).category;
      assert.deepEqual({ ...created, id: 0 }, { id: 0, name: 'Dogs', description: 'Canine' });
      const again = await store.createIdempotent({ name: 'Dogs', description: 'Canine' }, idempotent('k1'));
      assert.deepEqual(again, { outcome: 'replayed', category: created });
      const reused = await store.createIdempotent({ name: 'Cats' }, idempotent('k1', 'b'));
      assert.deepEqual(reused, { outcome: 'mismatch' });
      const other = await store.createIdempotent({ name: 'Dogs', description: 'Canine' }, idempotent('k2'));
      assert.equal(other.outcome, 'created', 'another key (another caller) is another record');
      assert.deepEqual((await store.list()).map((category) => category.name), ['Dogs', 'Dogs']);
      const plain = await store.create({ name: 'Birds' });
      assert.ok(plain.id > (other as { category: Category }).category.id, 'plain and idempotent creates share one id sequence');
    });

    caseWith('creates exactly one category for 50 parallel idempotent creates with one key; all 50 answer it', async (store, harness) => {
      // With the writes held, all 50 are inside the store before any may write: a claim that checks and then
      // creates lets them all create, every run.
      const results = await whileWritesHeld(harness, 50, () =>
        Promise.all(Array.from({ length: 50 }, () => store.createIdempotent({ name: 'Once' }, idempotent('burst')))),
      );
      assert.equal(results.filter((result) => result.outcome === 'created').length, 1, 'one created');
      assert.equal(results.filter((result) => result.outcome === 'replayed').length, 49, 'the others replayed');
      const categories = results.map((result) => (result as { category: Category }).category);
      for (const category of categories) assert.deepEqual(category, categories[0], 'every answer is the one category');
      assert.deepEqual(await store.list(), [categories[0]]);
    });

    caseWith('forgets a record after its retention: the key creates again', async (store) => {
      // A record kept 1 ms, timed by the store's own clock (Redis and PostgreSQL time records themselves, so no
      // fake clock reaches them). The repeat waits for that clock to pass the record's end as for an event, not
      // for a set time: it is sent again, a millisecond apart, until the store answers it as new (a replay
      // meanwhile creates nothing); only a store that never forgets runs out of attempts.
      const first = await store.createIdempotent({ name: 'Short-lived' }, idempotent('brief', 'a', 1));
      assert.equal(first.outcome, 'created');
      let later = await store.createIdempotent({ name: 'Short-lived' }, idempotent('brief', 'a', 1));
      for (let attempt = 1; later.outcome === 'replayed' && attempt < 1000; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 1));
        later = await store.createIdempotent({ name: 'Short-lived' }, idempotent('brief', 'a', 1));
      }
      assert.equal(later.outcome, 'created', 'the record is forgotten once its retention has passed');
      assert.equal((await store.list()).length, 2);
    });

    caseWith(
      'records nothing when an idempotent create fails (full store)',
      async (store) => {
        await store.create({ name: 'a' });
        const full = (error: unknown) => isPetstoreError(error) && error.code === 'storage_full';
        await assert.rejects(store.createIdempotent({ name: 'b' }, idempotent('full')), full);
        // Had the failure been recorded, another body with the key would be a mismatch.
        await assert.rejects(store.createIdempotent({ name: 'c' }, idempotent('full', 'other')), full);
        assert.deepEqual((await store.list()).map((category) => category.name), ['a']);
      },
      { maxCategories: 1 },
      options.capabilities?.capacity ?? true,
    );
  });
}

/** 64 hex characters derived from `label`: the shape of the library's keys and fingerprints. */
function hex64(label: string): string {
  return Array.from({ length: 64 }, (_, i) => ((label.charCodeAt(i % label.length) + i) % 16).toString(16)).join('');
}
