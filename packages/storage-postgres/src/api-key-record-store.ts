/**
 * The record store of managed API keys in a PostgreSQL table: one statement per call, changes announced with
 * `pg_notify` in the statement that makes them, and a LISTEN connection per watcher.
 */
import { PetstoreError, type ApiKeyRecord, type ApiKeyRecordChange, type ApiKeyRecordStore, type ApiKeyRecordWatcher, type PlanName } from '@petstore/core';
import type { Client, ClientConfig, Notification, Pool, QueryResultRow } from 'pg';
import { apiKeysNames, type PostgresSchemaOptions } from './names.js';
import { assertPool, assertWhole, DEFAULT_CALL_TIMEOUT_MS, PostgresTimeoutError, runStatement, storeUnavailable } from './postgres-call.js';

/** The first wait before a broken LISTEN connection is opened again, in ms; doubled after each failed try. */
export const LISTEN_RECONNECT_INITIAL_DELAY_MS = 100;
/** The longest wait between two tries to open a broken LISTEN connection again, in ms. */
export const LISTEN_RECONNECT_MAX_DELAY_MS = 10_000;
/**
 * How often a LISTEN connection checks that it still works, in ms: it sends its `LISTEN` again (a no-op for the
 * server) under the store's `callTimeoutMs`, so a connection that died without a word (a dropped network path, a
 * failover) is noticed, told to the watcher (`onDisconnect`) and replaced within this time plus the deadline
 * (2 s with the default `callTimeoutMs`), rather than never.
 */
export const LISTEN_HEARTBEAT_INTERVAL_MS = 1000;

/** The most records one `list` answers; also the bound of its `limit`. */
const MAX_LIST_LIMIT = 1000;
/** `list`'s page size when `limit` is not given. */
const DEFAULT_LIST_LIMIT = 100;
/** Records one purge statement removes at most: each batch is one short transaction. */
const PURGE_BATCH = 500;
/** SQLSTATE unique_violation: a key id, digest or previous digest that exists. */
const UNIQUE_VIOLATION = '23505';
/** A digest in a notification: SHA-256, 64 lowercase hex characters (`encode(…, 'hex')`). */
const HEX_DIGEST = /^[0-9a-f]{64}$/;

/**
 * Options of {@link postgresApiKeyRecordStore}: the pool, the deadline, the LISTEN connection, and the names `schema`
 * and `apiKeysTable` (the same options, defaults and limits as `migratePostgres`'s; see {@link PostgresSchemaOptions}).
 */
export interface PostgresApiKeyRecordStoreOptions extends Pick<PostgresSchemaOptions, 'schema' | 'apiKeysTable'> {
  /**
   * A node-postgres (`pg`) `Pool` you create, configure and end (give it an `'error'` listener). Every call but
   * `watch` is one statement on it; the store never changes or ends it.
   */
  pool: Pool;
  /**
   * Deadline of one call in ms, the wait for a pooled connection included; for `watch`, of opening its connection
   * and running `LISTEN`, and of each heartbeat. Past it the call rejects with `service_unavailable` (cause: a
   * {@link PostgresTimeoutError}). Default 1000 ({@link DEFAULT_CALL_TIMEOUT_MS}).
   */
  callTimeoutMs?: number;
  /**
   * Makes the dedicated connection a `watch` listens on (a new, unconnected `pg.Client` each time it is called: once
   * per `watch`, and again after each break). Default: a client of the pool's own class with the pool's own
   * configuration (`new pool.Client(pool.options)`: same server, user, password, TLS, timeouts). Give one to listen
   * elsewhere than the pool connects, e.g. directly to the primary when the pool goes through PgBouncer in
   * transaction mode (where LISTEN does not work), or to set your own `application_name`.
   */
  listenClient?: () => Client;
}

/** A row as the statements select it: every number and digest as text, so a host's `pg.types` parsers cannot change it. */
interface RecordRow {
  key_id: string;
  account_id: string;
  plan: string;
  requests_per_minute: string | null;
  requests_per_day: string | null;
  name: string | null;
  created_at_ms: string;
  updated_at_ms: string;
  expires_at_ms: string | null;
  revoked_at_ms: string | null;
  digest: string;
  previous_digest: string | null;
  previous_valid_until_ms: string | null;
}

/** The store as {@link postgresApiKeyRecordStore} answers it: `watch` and `close` are always there. */
export interface PostgresApiKeyRecordStore extends ApiKeyRecordStore {
  purge(options: { beforeMs: number }): Promise<number>;
  watch(listener: ApiKeyRecordWatcher): Promise<{ close(): Promise<void> }>;
  close(): Promise<void>;
}

/**
 * The record store of managed API keys (`managedApiKeys` from `@petstore/core`) in the PostgreSQL table
 * `<schema>.<apiKeysTable>` that {@link migratePostgres} creates (layout: {@link postgresMigrations}, version 1 of the
 * API-key table). Keys themselves are never stored: each record holds the SHA-256 digest of its current key, and
 * after a rotation that of the key it replaced, until the grace period's end.
 *
 * - `create` is one `INSERT`; a record whose `keyId` exists, or whose `digest` is any record's digest or previous
 *   digest, is refused (PetstoreError `internal_error`, nothing written).
 * - `findByDigest` (through the unique index of `digest` and the unique partial index of `previous_digest`),
 *   `findByKeyId` (the primary key) and `list` (the primary key, or the index on `(account_id, key_id)`; key ids
 *   compared byte by byte) are one `SELECT` each.
 * - `update` is one `UPDATE … RETURNING` that locks the record's row first, so parallel changes of one record apply
 *   one after the other, each to the record the previous one left: none is lost. The conditions are in the
 *   statement: a revoked record is not changed (it is answered as it is), and `revoke` keeps the first revocation's
 *   time and drops the previous digest.
 * - `purge` is one `DELETE … RETURNING` per batch of 500 records revoked or expired by `beforeMs` (a table scan:
 *   an operator's occasional command), each notifying the removed records' digests.
 *
 * **Notifications.** Every statement that changes a record also calls `pg_notify(<channel>, <digests>)`: the
 * channel is {@link postgresApiKeysChannel} (`<schema>.<apiKeysTable>`, e.g. `public.petstore_api_keys`), the
 * payload the record's digests before and after the change (current and previous, hex, separated by `,`).
 * PostgreSQL delivers a notification when, and only if, its transaction commits — here, the statement's.
 *
 * **Watching.** `watch(listener)` opens a dedicated connection (see `listenClient`), runs `LISTEN` on the channel and
 * resolves; each notification then calls `listener.onChange(digests)` (a payload that is not a list of digests, such
 * as an operator's bare `NOTIFY "public.petstore_api_keys"`, calls `onReconnect()`: drop everything). When the
 * connection breaks (the server restarts, a failover, `pg_terminate_backend`, a heartbeat unanswered within
 * `callTimeoutMs`: see {@link LISTEN_HEARTBEAT_INTERVAL_MS}), notifications sent meanwhile are lost: the watcher
 * calls `listener.onDisconnect(error)` at once (once per break, however many tries reconnecting takes; `error` says
 * why, its `cause` is the original failure), then opens a new connection, retrying with exponential backoff and
 * jitter (from {@link LISTEN_RECONNECT_INITIAL_DELAY_MS} up to {@link LISTEN_RECONNECT_MAX_DELAY_MS}) until it listens
 * again, then calls `listener.onReconnect()`. `close()` of the answer ends the connection; the store's `close()` ends
 * every watcher's. A listener that throws is ignored.
 *
 * **Failures**, as the other PostgreSQL stores: a call rejects with a `PetstoreError('service_unavailable')`
 * (503, `Retry-After` of the core's `DEFAULT_STORE_FAILURE_RETRY_AFTER_SECONDS`; cause: the original failure or a
 * {@link PostgresTimeoutError}) when the database is unreachable, slow past `callTimeoutMs` or temporarily unable;
 * with a plain Error (500) when the table is missing (run {@link migratePostgres}) or the database refuses the
 * statement. `watch` rejects the same way when its first connection or `LISTEN` fails (nothing is left running). A
 * change that timed out may still be applied later; its notification is then sent too.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/keys.md#storage
 * @throws TypeError when `pool` is not a pool, `callTimeoutMs` is not a whole number ≥ 1, `listenClient` is not a
 *   function, or `schema` / `apiKeysTable` is not a plain name (letters, digits, `_`; a table up to 47 characters);
 *   the message names the option. `list` rejects with a TypeError, before sending anything, when `limit` is not a
 *   whole number 1–1000.
 */
export function postgresApiKeyRecordStore(options: PostgresApiKeyRecordStoreOptions): PostgresApiKeyRecordStore {
  const { pool, callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS, listenClient } = options;
  assertPool(pool);
  assertWhole(callTimeoutMs, 'callTimeoutMs', 1);
  if (listenClient !== undefined && typeof listenClient !== 'function') throw new TypeError('listenClient must be a function that answers a new pg.Client');
  const names = apiKeysNames(options);
  const table = names.apiKeys;
  const channel = sqlString(names.channel);
  const store = 'API-key store';

  const columns = (alias: string) =>
    `${alias}.key_id, ${alias}.account_id, ${alias}.plan, ${alias}.requests_per_minute::text AS requests_per_minute,
  ${alias}.requests_per_day::text AS requests_per_day, ${alias}.name, ${alias}.created_at_ms::text AS created_at_ms,
  ${alias}.updated_at_ms::text AS updated_at_ms, ${alias}.expires_at_ms::text AS expires_at_ms,
  ${alias}.revoked_at_ms::text AS revoked_at_ms, encode(${alias}.digest, 'hex') AS digest,
  encode(${alias}.previous_digest, 'hex') AS previous_digest, ${alias}.previous_valid_until_ms::text AS previous_valid_until_ms`;
  const resultColumns =
    'key_id, account_id, plan, requests_per_minute, requests_per_day, name, created_at_ms, updated_at_ms, expires_at_ms, revoked_at_ms, digest, previous_digest, previous_valid_until_ms';

  // The record's digests before (`o`) and after (`r`) a change: the payload of its notification.
  const notifyChanged = `pg_notify(${channel}, array_to_string(ARRAY[encode(o.digest, 'hex'), encode(o.previous_digest, 'hex'),
    encode(r.digest, 'hex'), encode(r.previous_digest, 'hex')], ','))`;
  const createSql = `WITH inserted AS (
  INSERT INTO ${table} AS r (key_id, account_id, plan, requests_per_minute, requests_per_day, name, created_at_ms, updated_at_ms,
    expires_at_ms, revoked_at_ms, digest, previous_digest, previous_valid_until_ms)
  SELECT $1::text, $2::text, $3::text, $4::bigint, $5::bigint, $6::text, $7::bigint, $8::bigint, $9::bigint, $10::bigint, $11::bytea,
    $12::bytea, $13::bigint
  WHERE NOT EXISTS (SELECT 1 FROM ${table} AS x WHERE x.previous_digest = $11::bytea)
  RETURNING pg_notify(${channel}, array_to_string(ARRAY[encode(r.digest, 'hex'), encode(r.previous_digest, 'hex')], ','))
)
SELECT count(*)::int AS created FROM inserted`;
  // The current digest first, should a digest ever be one record's and another's previous one.
  const findByDigestSql = `SELECT ${columns('r')} FROM ${table} AS r WHERE r.digest = $1::bytea OR r.previous_digest = $1::bytea
ORDER BY r.digest = $1::bytea DESC LIMIT 1`;
  const findByKeyIdSql = `SELECT ${columns('r')} FROM ${table} AS r WHERE r.key_id = $1::text`;
  // Four statements (with or without an account, with or without `after`), each using every parameter it is given.
  const listSql = (byAccount: boolean, after: boolean) => {
    const conditions = [byAccount ? 'r.account_id = $2::text' : '', after ? `r.key_id > $${byAccount ? 3 : 2}::text` : ''].filter((c) => c !== '');
    return `SELECT ${columns('r')} FROM ${table} AS r${conditions.length > 0 ? ` WHERE ${conditions.join(' AND ')}` : ''}
ORDER BY r.key_id LIMIT $1::int`;
  };
  const listSqls = [listSql(false, false), listSql(false, true), listSql(true, false), listSql(true, true)] as const;

  /**
   * One change as one statement: `o` locks the record's row (FOR UPDATE, so it is the latest committed version even
   * when another change of it committed after this statement began), `changed` applies `set` unless the record is
   * revoked and notifies, and the answer is the changed record, else the record as it is (none: no such keyId).
   */
  const changeSql = (set: string) => `WITH o AS (SELECT * FROM ${table} AS x WHERE x.key_id = $1::text FOR UPDATE),
changed AS (
  UPDATE ${table} AS r SET ${set}
  FROM o WHERE r.key_id = o.key_id AND o.revoked_at_ms IS NULL
  RETURNING ${columns('r')}, ${notifyChanged} AS notified
)
SELECT ${resultColumns} FROM changed
UNION ALL
SELECT ${columns('o')} FROM o WHERE NOT EXISTS (SELECT 1 FROM changed)`;
  const updateSql = changeSql(`plan = coalesce($2::text, r.plan),
    requests_per_minute = CASE WHEN $3::boolean THEN $4::bigint ELSE r.requests_per_minute END,
    requests_per_day = CASE WHEN $3::boolean THEN $5::bigint ELSE r.requests_per_day END,
    name = CASE WHEN $6::boolean THEN $7::text ELSE r.name END,
    updated_at_ms = $8::bigint`);
  const rotateSql = changeSql(`previous_digest = r.digest, previous_valid_until_ms = $3::bigint, digest = $2::bytea, updated_at_ms = $4::bigint`);
  const revokeSql = changeSql(`revoked_at_ms = $2::bigint, previous_digest = NULL, previous_valid_until_ms = NULL, updated_at_ms = $2::bigint`);
  // One batch of a purge: rows another statement holds are left to the next purge rather than waited for.
  const purgeSql = `WITH doomed AS (
  SELECT x.key_id FROM ${table} AS x WHERE x.revoked_at_ms <= $1::bigint OR x.expires_at_ms <= $1::bigint
  LIMIT ${PURGE_BATCH} FOR UPDATE SKIP LOCKED
), removed AS (
  DELETE FROM ${table} AS r USING doomed WHERE r.key_id = doomed.key_id
  RETURNING pg_notify(${channel}, array_to_string(ARRAY[encode(r.digest, 'hex'), encode(r.previous_digest, 'hex')], ','))
)
SELECT count(*)::int AS removed FROM removed`;

  /** Runs a statement that writes a digest: a unique violation is the contract's refusal of a duplicate. */
  async function writing<Row extends QueryResultRow>(sql: string, values: unknown[], what: string): Promise<Row[]> {
    try {
      return await runStatement<Row>(pool, store, callTimeoutMs, sql, values);
    } catch (error) {
      if ((error as { cause?: { code?: unknown } }).cause?.code === UNIQUE_VIOLATION) throw duplicate(what, error);
      throw error;
    }
  }

  const watchers = new Set<ListenConnection>();

  return {
    backend: 'postgresql',
    async create(record: ApiKeyRecord): Promise<void> {
      const rows = await writing<{ created: number }>(
        createSql,
        [
          record.keyId,
          record.accountId,
          record.plan,
          record.limits?.requestsPerMinute ?? null,
          record.limits?.requestsPerDay ?? null,
          record.name ?? null,
          record.createdAtMs,
          record.updatedAtMs,
          record.expiresAtMs ?? null,
          record.revokedAtMs ?? null,
          bytes(record.digest),
          record.previousDigest === undefined ? null : bytes(record.previousDigest),
          record.previousValidUntilMs ?? null,
        ],
        `a record with keyId ${JSON.stringify(record.keyId)} or its digest`,
      );
      if (rows[0]?.created !== 1) throw duplicate(`a record with keyId ${JSON.stringify(record.keyId)} or its digest`);
    },
    async findByDigest(digest: Uint8Array) {
      const rows = await runStatement<RecordRow>(pool, store, callTimeoutMs, findByDigestSql, [bytes(digest)]);
      return rows[0] === undefined ? undefined : recordFromRow(rows[0]);
    },
    async findByKeyId(keyId: string) {
      const rows = await runStatement<RecordRow>(pool, store, callTimeoutMs, findByKeyIdSql, [keyId]);
      return rows[0] === undefined ? undefined : recordFromRow(rows[0]);
    },
    async list(listOptions = {}) {
      const { accountId, after, limit = DEFAULT_LIST_LIMIT } = listOptions;
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
        throw new TypeError(`limit must be a whole number from 1 to ${MAX_LIST_LIMIT}, got ${String(limit)}`);
      }
      const sql = listSqls[(accountId === undefined ? 0 : 2) + (after === undefined ? 0 : 1)] as string;
      // One more than asked: whether there is a next page.
      const values: unknown[] = [limit + 1];
      if (accountId !== undefined) values.push(accountId);
      if (after !== undefined) values.push(after);
      const rows = await runStatement<RecordRow>(pool, store, callTimeoutMs, sql, values);
      const records = rows.slice(0, limit).map(recordFromRow);
      const last = records.at(-1);
      return rows.length > limit && last !== undefined ? { records, next: last.keyId } : { records };
    },
    async update(keyId: string, change: ApiKeyRecordChange) {
      let rows: RecordRow[];
      switch (change.kind) {
        case 'update':
          rows = await runStatement<RecordRow>(pool, store, callTimeoutMs, updateSql, [
            keyId,
            change.plan ?? null,
            change.limits !== undefined,
            change.limits?.requestsPerMinute ?? null,
            change.limits?.requestsPerDay ?? null,
            change.name !== undefined,
            change.name ?? null,
            change.nowMs,
          ]);
          break;
        case 'rotate':
          rows = await writing<RecordRow>(rotateSql, [keyId, bytes(change.digest), change.previousValidUntilMs, change.nowMs], 'the rotated key’s digest');
          break;
        case 'revoke':
          rows = await runStatement<RecordRow>(pool, store, callTimeoutMs, revokeSql, [keyId, change.nowMs]);
          break;
        default:
          throw new TypeError(`change.kind must be 'update', 'rotate' or 'revoke', got ${String((change as { kind?: unknown }).kind)}`);
      }
      return rows[0] === undefined ? undefined : recordFromRow(rows[0]);
    },
    async purge(purgeOptions: { beforeMs: number }) {
      const beforeMs = purgeOptions?.beforeMs;
      if (typeof beforeMs !== 'number' || !Number.isSafeInteger(beforeMs)) {
        throw new TypeError(`beforeMs must be a whole number of ms (Unix epoch), got ${String(beforeMs)}`);
      }
      // Batches, each one statement and transaction: a purge of many records never holds many row locks long.
      let removed = 0;
      for (;;) {
        const rows = await runStatement<{ removed: number }>(pool, store, callTimeoutMs, purgeSql, [beforeMs]);
        const count = rows[0]?.removed ?? 0;
        removed += count;
        if (count < PURGE_BATCH) return removed;
      }
    },
    async watch(listener: ApiKeyRecordWatcher) {
      const makeClient = listenClient ?? poolClientFactory(pool);
      const connection = new ListenConnection(makeClient, names.channel, listener, callTimeoutMs, store, () => watchers.delete(connection));
      await connection.start();
      watchers.add(connection);
      return { close: () => connection.close() };
    },
    async close() {
      await Promise.all([...watchers].map((connection) => connection.close()));
    },
  };
}

/** The contract's refusal of a duplicate key id or digest (a 500 if it ever reaches HTTP: it is the operator's). */
function duplicate(what: string, cause?: unknown): PetstoreError {
  return new PetstoreError('internal_error', `The API-key store already holds ${what}; nothing was written.`, cause === undefined ? undefined : { cause });
}

/** A digest as node-postgres sends a `bytea` parameter. */
function bytes(digest: Uint8Array): Buffer {
  return Buffer.from(digest.buffer, digest.byteOffset, digest.byteLength);
}

/** Hex text as a plain `Uint8Array` (not a Buffer: what the contract's type says). */
function fromHex(hex: string): Uint8Array {
  return new Uint8Array(Buffer.from(hex, 'hex'));
}

/** A PostgreSQL string literal of a name that holds letters, digits, `_` and `.` only (checked by the names). */
function sqlString(text: string): string {
  return `'${text}'`;
}

/** A row as the record it holds; absent values are absent keys. */
function recordFromRow(row: RecordRow): ApiKeyRecord {
  const record: ApiKeyRecord = {
    keyId: row.key_id,
    accountId: row.account_id,
    plan: row.plan as PlanName,
    createdAtMs: Number(row.created_at_ms),
    updatedAtMs: Number(row.updated_at_ms),
    digest: fromHex(row.digest),
  };
  if (row.requests_per_minute !== null && row.requests_per_day !== null) {
    record.limits = { requestsPerMinute: Number(row.requests_per_minute), requestsPerDay: Number(row.requests_per_day) };
  }
  if (row.name !== null) record.name = row.name;
  if (row.expires_at_ms !== null) record.expiresAtMs = Number(row.expires_at_ms);
  if (row.revoked_at_ms !== null) record.revokedAtMs = Number(row.revoked_at_ms);
  if (row.previous_digest !== null && row.previous_valid_until_ms !== null) {
    record.previousDigest = fromHex(row.previous_digest);
    record.previousValidUntilMs = Number(row.previous_valid_until_ms);
  }
  return record;
}

/** The default `listenClient`: a client of the pool's class and configuration, as the pool makes its own. */
function poolClientFactory(pool: Pool): () => Client {
  const { Client: ClientClass, options } = pool as unknown as { Client?: new (config: ClientConfig) => Client; options?: ClientConfig };
  if (typeof ClientClass !== 'function' || options === undefined) {
    throw new TypeError('watch needs the listenClient option when pool is not a pg.Pool (it has no Client class and options to copy)');
  }
  // The pool's own options object, not a copy: pg keeps the password in it as a non-enumerable property.
  return () => new ClientClass(options);
}

/** Rejects with a {@link PostgresTimeoutError} when `work` takes longer than `ms`. */
async function withDeadline<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new PostgresTimeoutError(ms)), ms);
    timer.unref();
  });
  try {
    return await Promise.race([work, expired]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * One watcher's LISTEN connection: opened by `start`, checked by a heartbeat, replaced after a break (told once by
 * `onDisconnect`; reopened with backoff, then `onReconnect`), ended by `close`.
 */
class ListenConnection {
  private client: Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private failedTries = 0;
  /** `onDisconnect` was told of the current break: not again until `onReconnect`. */
  private disconnected = false;
  /** The `open` in progress, if any: `close` waits for it. */
  private opening: Promise<void> | undefined;
  private readonly listenSql: string;

  constructor(
    private readonly makeClient: () => Client,
    private readonly channel: string,
    private readonly listener: ApiKeyRecordWatcher,
    private readonly callTimeoutMs: number,
    private readonly store: string,
    private readonly onClosed: () => void,
  ) {
    this.listenSql = `LISTEN "${channel}"`;
  }

  /** Opens the first connection. @throws PetstoreError `service_unavailable` when it fails (nothing left open). */
  async start(): Promise<void> {
    try {
      await this.track(this.open());
    } catch (error) {
      this.closed = true;
      throw storeUnavailable(this.store, error);
    }
    this.scheduleHeartbeat();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.onClosed();
    clearTimeout(this.timer);
    await this.opening?.catch(() => undefined);
    const client = this.client;
    this.client = undefined;
    // Under the deadline: a connection that died silently may never answer the goodbye.
    if (client !== undefined) await withDeadline(client.end(), this.callTimeoutMs).catch(() => undefined);
  }

  private async track(opening: Promise<void>): Promise<void> {
    this.opening = opening;
    try {
      await opening;
    } finally {
      if (this.opening === opening) this.opening = undefined;
    }
  }

  /** A new client, connected and listening; `this.client` once it is. */
  private async open(): Promise<void> {
    const client = this.makeClient();
    // Errors of a client in use end up in `broken`; an 'error' event without a listener would end the process.
    client.on('error', (error: Error) => this.broken(client, error));
    client.on('end', () => this.broken(client, new Error('the server closed the connection')));
    client.on('notification', (message: Notification) => {
      if (client === this.client && message.channel === this.channel) this.deliver(message.payload);
    });
    try {
      await withDeadline(
        (async () => {
          await client.connect();
          await client.query(this.listenSql);
        })(),
        this.callTimeoutMs,
      );
    } catch (error) {
      // Not awaited: a connection attempt that hangs (no answer at all) would hold the caller until TCP gives up.
      client.end().catch(() => undefined);
      throw error;
    }
    if (this.closed) {
      await withDeadline(client.end(), this.callTimeoutMs).catch(() => undefined);
      return;
    }
    this.client = client;
  }

  private deliver(payload: string | undefined): void {
    // The digests before and after a change overlap (an update's are the same): each is told once.
    const parts = payload === undefined || payload === '' ? [] : [...new Set(payload.split(','))];
    try {
      if (parts.length > 0 && parts.every((part) => HEX_DIGEST.test(part))) this.listener.onChange(parts.map(fromHex));
      else this.listener.onReconnect();
    } catch {
      // The contract says the listener does not throw; if it does, the connection keeps listening.
    }
  }

  /**
   * The connection in use broke (or ended): tell the watcher, let it go and open another. Later events of an old
   * client are ignored, so one break is told once.
   */
  private broken(client: Client, cause: unknown): void {
    if (this.closed || client !== this.client) return;
    this.client = undefined;
    clearTimeout(this.timer);
    client.end().catch(() => undefined);
    if (!this.disconnected) {
      this.disconnected = true;
      const reason = cause instanceof Error ? cause.message : String(cause);
      const error = new Error(`The ${this.store}'s LISTEN connection broke: ${reason}`, { cause });
      try {
        this.listener.onDisconnect(error);
      } catch {
        // As in deliver.
      }
    }
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    // Exponential backoff with jitter (half to all of the step), so that instances do not all return at once.
    const step = Math.min(LISTEN_RECONNECT_MAX_DELAY_MS, LISTEN_RECONNECT_INITIAL_DELAY_MS * 2 ** Math.min(this.failedTries, 20));
    this.timer = setTimeout(() => void this.reconnect(), step / 2 + Math.random() * (step / 2));
    this.timer.unref();
  }

  private async reconnect(): Promise<void> {
    if (this.closed) return;
    try {
      await this.track(this.open());
    } catch {
      this.failedTries++;
      if (!this.closed) this.scheduleReconnect();
      return;
    }
    if (this.closed) return;
    this.failedTries = 0;
    this.disconnected = false;
    this.scheduleHeartbeat();
    try {
      this.listener.onReconnect();
    } catch {
      // As in deliver.
    }
  }

  private scheduleHeartbeat(): void {
    this.timer = setTimeout(() => void this.heartbeat(), LISTEN_HEARTBEAT_INTERVAL_MS);
    this.timer.unref();
  }

  private async heartbeat(): Promise<void> {
    const client = this.client;
    if (this.closed || client === undefined) return;
    try {
      await withDeadline(client.query(this.listenSql), this.callTimeoutMs);
    } catch (error) {
      this.broken(client, error);
      return;
    }
    if (client === this.client) this.scheduleHeartbeat();
  }
}
