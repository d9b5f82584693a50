/**
 * The PostgreSQL API-key record store as the core's conformance suite takes it (`ApiKeyRecordStoreHarness`): a store
 * on an empty migrated schema of its own (emptyMigratedSchema), a second instance on a pool of its own (`other`),
 * the LISTEN sessions of its watchers terminated on demand (`breakNotifications`), and its writes held at a table
 * lock (`holdWrites`).
 */
import type { ApiKeyRecordStoreHarness } from '@petstore/core/testing';
import { postgresApiKeyRecordStore } from '../src/api-key-record-store.js';
import { postgresApiKeysChannel } from '../src/names.js';
import { holdTableWrites, whenCallsBlocked } from './hold-writes.js';
import { emptyMigratedSchema, filePool, GUARD_CALL_TIMEOUT_MS } from './postgres.js';

/** Connections of the store's pool: the parallel cases need all their calls (up to 50) inside PostgreSQL at once. */
const STORE_CONNECTIONS = 55;

/**
 * A harness for one conformance case. The store's `callTimeoutMs` is the case's timeout (20 s): held calls wait
 * until all have opened their connections and arrived, which a busy machine may take longer than a second to do.
 */
export async function postgresApiKeyHarness(): Promise<ApiKeyRecordStoreHarness> {
  // The file's pools (see filePool): the store's, a small one for the hooks, and another instance's.
  const pool = filePool('key store', { max: STORE_CONNECTIONS });
  const control = filePool('key control', { max: 2 });
  const otherPool = filePool('other key store');
  const schema = await emptyMigratedSchema(pool, 'keys');
  const store = postgresApiKeyRecordStore({ pool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
  const other = postgresApiKeyRecordStore({ pool: otherPool, schema, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
  const listen = `LISTEN "${postgresApiKeysChannel({ schema })}"`;
  return {
    store,
    other: () => other,
    async breakNotifications() {
      // The sessions of the store's watchers (only they listen on this schema's channel), as a network failure would.
      const { rows } = await control.query<{ ended: boolean }>(
        'SELECT pg_terminate_backend(pid) AS ended FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid()',
        [listen],
      );
      if (rows.length === 0) throw new Error('no LISTEN session to terminate');
    },
    holdWrites: () => holdTableWrites(control, schema, 'petstore_api_keys'),
    whenBlocked: (count) => whenCallsBlocked(control, schema, count),
    async close() {
      // The pools are the file's, ended after it.
      await Promise.all([store.close(), other.close()]);
    },
  };
}
