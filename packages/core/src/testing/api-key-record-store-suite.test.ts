/**
 * The API-key record store conformance suite itself: it passes on a correct reference store (alone, and as two
 * instances over one backend whose notifications break), and fails the broken stores it is there to catch.
 */
import { describe, expect, it } from 'vitest';
import { outcomesOf } from '../../test-support/conformance-outcomes.js';
import { testApiKeyRecordBackend, testApiKeyRecordStore, type ApiKeyRecordStoreFaults } from '../../test-support/api-key-record-store.js';
import { runApiKeyRecordStoreConformance } from './api-key-record-store-suite.js';
import type { ConformanceTestApi } from './test-api.js';

runApiKeyRecordStoreConformance(
  { describe, it },
  {
    name: 'reference API-key record store, one instance',
    createStore: ({ maxRecords }) => ({ store: testApiKeyRecordStore({ maxRecords }) }),
    capabilities: { reconnect: false },
  },
);

runApiKeyRecordStoreConformance(
  { describe, it },
  {
    name: 'reference API-key record store, two instances over one backend',
    createStore: ({ maxRecords }) => {
      const backend = testApiKeyRecordBackend({ maxRecords });
      return { store: backend.instance(), other: () => backend.instance(), breakNotifications: () => backend.breakNotifications() };
    },
  },
);

const ROTATIONS_CASE = 'loses no rotation among 50 parallel ones: each replaced exactly one digest';
const REVOKE_WINS_CASE = 'lets a revocation win against parallel updates and rotations, and stay';
const REVOKED_UNCHANGED_CASE = 'changes nothing when a revoked record is updated or rotated, and answers it as it is';
const REVOKE_ONCE_CASE = 'revokes once: revokedAtMs is the first revocation time, the previous digest is dropped, the record is still found';
const ROTATE_CASE = 'rotates: the new digest becomes current, the old one previous until the grace end; both find the record';
const LIST_CASE = 'lists in keyId order, a page at a time, optionally of one account';
const WATCH_CASE = 'tells every watcher the digests each change touched, also of changes made by another instance';

/** The suite's outcomes on a store with `faults`; watch cases get `deadlineMs` before they count as failed. */
async function outcomesWith(faults: ApiKeyRecordStoreFaults, only?: string, deadlineMs?: number) {
  const register = (test: ConformanceTestApi) =>
    runApiKeyRecordStoreConformance(
      {
        describe: test.describe,
        it: (name, body, timeoutMs) =>
          test.it(
            name,
            deadlineMs === undefined
              ? body
              : () =>
                  Promise.race([
                    body(),
                    new Promise<void>((_resolve, reject) => setTimeout(() => reject(new Error('no notification arrived')), deadlineMs).unref()),
                  ]),
            timeoutMs,
          ),
      },
      { createStore: ({ maxRecords }) => ({ store: testApiKeyRecordStore({ faults, maxRecords }) }), capabilities: { reconnect: false } },
    );
  return outcomesOf(register, only);
}

/** The names of the failing cases. */
const failing = (outcomes: Map<string, string | undefined>) => [...outcomes].filter(([, failure]) => failure !== undefined).map(([name]) => name);

describe('the API-key record store suite catches broken stores', () => {
  it('fails a store whose changes read, then write (lost updates under 50 parallel rotations), on every run', async () => {
    for (let run = 0; run < 3; run++) {
      const outcomes = await outcomesWith({ readModifyWrite: true });
      expect(outcomes.get(ROTATIONS_CASE), `run ${run}`).toMatch(/each rotation answers the record with its own digest|none was lost/);
      expect(outcomes.get(REVOKE_WINS_CASE), `run ${run}`).toMatch(/revoked|previous digest/);
      expect(failing(outcomes).sort(), `run ${run}`).toEqual([REVOKE_WINS_CASE, ROTATIONS_CASE].sort());
    }
  });

  it('fails a store that changes revoked records', async () => {
    const outcomes = await outcomesWith({ changesRevoked: true });
    expect(outcomes.get(REVOKED_UNCHANGED_CASE)).toMatch(/answers it unchanged/);
    expect(outcomes.get(REVOKE_ONCE_CASE)).toMatch(/a second revocation changes nothing/);
    expect(outcomes.get(REVOKE_WINS_CASE)).toBeDefined();
  });

  it('fails a store whose second revocation moves the revocation time', async () => {
    const outcomes = await outcomesWith({ revokeMovesTime: true });
    expect(failing(outcomes)).toEqual([REVOKE_ONCE_CASE]);
    expect(outcomes.get(REVOKE_ONCE_CASE)).toMatch(/a second revocation changes nothing/);
  });

  it('fails a store that keeps finding a record by digests dropped by rotations', async () => {
    const outcomes = await outcomesWith({ keepsOlderDigests: true });
    expect(outcomes.get(ROTATE_CASE)).toMatch(/the oldest digest finds nothing any more/);
    expect(outcomes.get(REVOKE_ONCE_CASE)).toMatch(/the dropped previous digest finds nothing/);
  });

  it('fails a store whose list ignores after', async () => {
    const outcomes = await outcomesWith({ listIgnoresAfter: true });
    expect(failing(outcomes)).toEqual([LIST_CASE, 'lists 100 records per page unless told']);
  });

  it('fails a store that tells no watcher', async () => {
    const outcomes = await outcomesWith({ silent: true }, WATCH_CASE, 200);
    expect(outcomes.get(WATCH_CASE)).toBe('no notification arrived');
  });

  it('says which switch to turn off when the store cannot watch or the harness cannot break notifications', async () => {
    const outcomes = await outcomesOf((test) =>
      runApiKeyRecordStoreConformance(test, {
        createStore: () => {
          const { watch: _watch, ...store } = testApiKeyRecordStore();
          return { store };
        },
      }),
    );
    expect(outcomes.get(WATCH_CASE)).toMatch(/set capabilities.watch to false/);
    expect(outcomes.get('tells watchers to drop everything once notifications come back after a break, then delivers again')).toMatch(
      /set capabilities.reconnect to false/,
    );
  });
});
