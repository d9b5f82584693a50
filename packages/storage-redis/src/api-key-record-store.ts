import {
  API_KEY_HASH_BYTES,
  apiKeyHashesEqual,
  isPlanName,
  PetstoreError,
  type ApiKeyRecord,
  type ApiKeyRecordChange,
  type ApiKeyRecordStore,
  type ApiKeyRecordWatcher,
  type PlanLimits,
} from '@petstore/core';
import type { Cluster, Redis } from 'ioredis';
import { hex } from '@petstore/internal';
import {
  CREATE_API_KEY_LUA,
  FIND_API_KEY_BY_DIGEST_LUA,
  LIST_API_KEYS_LUA,
  PURGE_API_KEYS_LUA,
  RECORD_FIELDS,
  REVOKE_API_KEY_LUA,
  ROTATE_API_KEY_LUA,
  UPDATE_API_KEY_LUA,
} from './api-key-scripts.js';
import { watchChannel } from './api-key-watch.js';
import {
  assertCallTimeoutMs,
  assertKeyPrefix,
  createDeadline,
  DEFAULT_CALL_TIMEOUT_MS,
  DEFAULT_KEY_PREFIX,
  storeFailure,
  tagKeysShareSlot,
} from './redis-call.js';

/** Default page size of `list`, and the largest page it serves. */
const DEFAULT_LIST_LIMIT = 100;
const MAX_LIST_LIMIT = 1000;

/** Names under which the store's scripts are defined on the client (`client.defineCommand`). */
const COMMANDS = {
  create: 'petstoreApiKeyCreate',
  update: 'petstoreApiKeyUpdate',
  rotate: 'petstoreApiKeyRotate',
  revoke: 'petstoreApiKeyRevoke',
  findByDigest: 'petstoreApiKeyFindByDigest',
  list: 'petstoreApiKeyList',
  purge: 'petstoreApiKeyPurge',
} as const;

/** KeyIds a purge batch (one script call) looks at: a batch holds Redis for about as long as a page of `list`. */
const PURGE_BATCH = 500;

/** Options of {@link redisApiKeyRecordStore}. */
export interface RedisApiKeyRecordStoreOptions {
  /**
   * A connected (or connecting) ioredis 5 client: a `Redis` (one server, or a Sentinel-managed primary) or a
   * `Cluster` (every key of the store carries the hash tag `{apikeys}`, so each script runs on one master). The
   * store defines seven script commands on it (`petstoreApiKey…`), opens a subscriber connection of its own per
   * `watch` (on a `Redis`, `client.duplicate()`; on a `Cluster`, a connection to one of its nodes), and never
   * closes `client`.
   */
  client: Redis | Cluster;
  /** Prefix of every key this store writes, and of its channel. Default `petstore:`. */
  keyPrefix?: string;
  /**
   * Deadline of one call in ms (each read and mutation, and `watch` until it listens); past it the call
   * throws `service_unavailable` (cause: a {@link RedisTimeoutError}). Default 1000
   * ({@link DEFAULT_CALL_TIMEOUT_MS}).
   */
  callTimeoutMs?: number;
  /**
   * Most live records held (neither revoked nor expired at the create); a create beyond it throws `storage_full`
   * and writes nothing. Revoked and expired records do not count; `purge` removes them. Default: no bound.
   */
  maxRecords?: number;
}

/** An {@link ApiKeyRecordStore} in Redis, with `watch` (Redis pub/sub) and `close`. */
export interface RedisApiKeyRecordStore extends ApiKeyRecordStore {
  purge(options: { beforeMs: number }): Promise<number>;
  watch(listener: ApiKeyRecordWatcher): Promise<{ close(): Promise<void> }>;
  /**
   * Stops every watch this store started (their subscriber connections), also one still starting; `watch()`
   * rejects from then on. Reads and mutations go on (they use `client`, which the store never closes).
   */
  close(): Promise<void>;
}

/**
 * The Redis keys and channel of an API-key record store with prefix `keyPrefix` (default `petstore:`), before
 * any client-level ioredis `keyPrefix`. Every key carries the Redis Cluster hash tag `{apikeys}` — or the
 * prefix's own tag when it holds one (e.g. `tenant:{eu}:`) — so they share one hash slot.
 */
export function apiKeyRedisKeys(keyPrefix: string = DEFAULT_KEY_PREFIX): {
  /** `${keyPrefix}{apikeys}:record:${keyId}`: a hash, one record (fields: see {@link redisApiKeyRecordStore}). */
  record(keyId: string): string;
  /** `${keyPrefix}{apikeys}:digest:${hex}`: a string, the keyId of the record whose current or previous digest this is. */
  digest(digest: Uint8Array): string;
  /** `${keyPrefix}{apikeys}:account:${accountId}`: a sorted set of the account's keyIds (score 0, in byte order). */
  account(accountId: string): string;
  /** `${keyPrefix}{apikeys}:all`: a sorted set of every keyId (score 0, in byte order). */
  all: string;
  /** `${keyPrefix}apikeys`: the pub/sub channel of changes (not a key; the client's ioredis `keyPrefix` goes first). */
  channel: string;
} {
  const base = `${keyPrefix}{apikeys}:`;
  return {
    record: (keyId) => `${base}record:${keyId}`,
    digest: (digest) => `${base}digest:${Buffer.from(digest.buffer, digest.byteOffset, digest.byteLength).toString('hex')}`,
    account: (accountId) => `${base}account:${accountId}`,
    all: `${base}all`,
    channel: `${keyPrefix}apikeys`,
  };
}

type Fields = Array<string | null>;
type MutationReply = Fields | number;
type ScriptCommand<Reply> = (all: string, key: string, ...args: string[]) => Promise<Reply>;

/**
 * Managed API-key records in Redis: the record store `managedApiKeys` (from `@petstore/core`) reads and
 * writes through. Key layout ({@link apiKeyRedisKeys}; after the client's own ioredis `keyPrefix`, if any):
 *
 * - `${keyPrefix}{apikeys}:record:<keyId>`: a hash, one record. Fields `accountId`, `plan`, `createdAtMs`,
 *   `updatedAtMs`, `digest` always; `requestsPerMinute` and `requestsPerDay` (the custom limits), `name`,
 *   `expiresAtMs`, `revokedAtMs`, `previousDigest` and `previousValidUntilMs` when set. Times are Unix epoch ms
 *   in decimal; digests are SHA-256 digests in lowercase hex (never a key: the store never sees one).
 * - `${keyPrefix}{apikeys}:digest:<hex>`: a string, the keyId of the record whose current digest or previous
 *   digest (during a rotation's grace period) this is.
 * - `${keyPrefix}{apikeys}:account:<accountId>` and `${keyPrefix}{apikeys}:all`: sorted sets of keyIds (all
 *   scores 0, so ordered by keyId in byte order, which for the ASCII key ids is JavaScript's order too), the
 *   indexes `list` pages through.
 *
 * Nothing expires: records are data (a revoked or expired record stays, to be listed and shown, until `purge`
 * removes it: in batches of 500 keyIds, one script each, publishing the removed records' digests). The
 * `{apikeys}` hash tag keeps every key in one Redis Cluster slot, so `client` may be an ioredis `Cluster`.
 *
 * Every call is one Redis command: `findByDigest`, `list` and each mutation one Lua script (`EVALSHA`, with
 * ioredis's `EVAL` fallback), `findByKeyId` one `HMGET`. Redis runs a script atomically, so a mutation checks
 * and changes the record and its index entries together: `create` refuses an existing keyId or digest (and
 * beyond `maxRecords`) before any write; `update` and `rotate` leave a revoked record as it is; `rotate` drops
 * the older previous digest (field and index entry) and indexes the new one; `revoke` sets `revokedAtMs`
 * once and drops the previous digest. Parallel mutations from any number of processes apply one after another,
 * none lost. `list` reads at most 1000 records per call.
 *
 * Notifications: every mutation that changes a record publishes, inside its script, the digests it touched
 * (current and previous, before and after; lowercase hex joined by commas) on the channel
 * `${keyPrefix}apikeys` (after the client's ioredis `keyPrefix`). On a Redis Cluster a `PUBLISH` reaches every
 * node. `watch(listener)` subscribes on a connection of its own and calls `listener.onChange(digests)` per
 * message. The connection is checked by a heartbeat: a `PING` every second, which must be answered within 2 s.
 * When the connection closes, a `PING` goes unanswered (a half-open connection: it is then dropped and a new one
 * made), or Redis refuses a later `SUBSCRIBE` (an ACL without the channel: asked again with backoff, up to every
 * 2 s), it calls `listener.onDisconnect(error)` at once, once per break; once subscribed again it calls
 * `listener.onReconnect()` (changes published meanwhile were lost: a cache drops everything). A break is so told
 * within 3 s. On a `Redis` client the connection is `client.duplicate()` (without ioredis's `autoResubscribe`:
 * the watch subscribes itself, so a refusal is never an unhandled rejection), reconnected by ioredis as the
 * client's `retryStrategy` says (should that give up, a new duplicate is made); on a `Cluster`, a connection to a
 * random node, replaced by one to another node when it breaks.
 *
 * Errors (every method):
 * - `PetstoreError('service_unavailable', …, { retryAfterSeconds: 5, cause })` (503 with `Retry-After`) when
 *   Redis is unreachable, does not answer within `callTimeoutMs`, or temporarily refuses (loading, failover,
 *   `CLUSTERDOWN`, …). A mutation that timed out may still be applied by Redis later.
 * - `PetstoreError('internal_error')` from `create` when the keyId, or a digest of the record, exists, and from
 *   `update` (`rotate`) when the new digest exists; nothing is written.
 * - `PetstoreError('storage_full')` from `create` when `maxRecords` are held; nothing is written.
 * - a plain Error (500) when Redis answers another error (e.g. `WRONGTYPE`: a key holds foreign data) or a
 *   stored record is not one of this store's.
 * - a TypeError when an argument is malformed (a digest not of 32 bytes, a time not a whole number of ms, an
 *   unknown plan, a `limit` outside 1–1000); nothing is sent.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/keys.md#storage
 * @throws TypeError when `callTimeoutMs` or `maxRecords` is not a whole number ≥ 1, `keyPrefix` is not a
 *   string, or `client` is a `Cluster` and the full prefix (the client's ioredis `keyPrefix`, then `keyPrefix`)
 *   starts its first hash tag with an empty `{}`, which would put the keys in different slots.
 */
export function redisApiKeyRecordStore(options: RedisApiKeyRecordStoreOptions): RedisApiKeyRecordStore {
  const { client, keyPrefix = DEFAULT_KEY_PREFIX, callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS, maxRecords } = options;
  assertKeyPrefix(keyPrefix);
  assertCallTimeoutMs(callTimeoutMs);
  if (maxRecords !== undefined && (!Number.isSafeInteger(maxRecords) || maxRecords < 1)) {
    throw new TypeError(`maxRecords must be a whole number >= 1, got ${String(maxRecords)}`);
  }
  const clientPrefix = client.options.keyPrefix ?? '';
  if (client.isCluster && !tagKeysShareSlot(`${clientPrefix}${keyPrefix}`)) {
    throw new TypeError(
      `keyPrefix ${JSON.stringify(keyPrefix)} (after the client's ioredis keyPrefix) starts an empty hash tag "{}": ` +
        'on a Redis Cluster the API-key keys would land in different slots',
    );
  }
  const keys = apiKeyRedisKeys(keyPrefix);
  // ioredis prefixes keys, not channels: the channel carries the client's prefix itself, so two stores share
  // a channel exactly when they share keys.
  const channel = `${clientPrefix}${keys.channel}`;
  const maxRecordsArg = maxRecords === undefined ? '' : String(maxRecords);

  client.defineCommand(COMMANDS.create, { numberOfKeys: 2, lua: CREATE_API_KEY_LUA });
  client.defineCommand(COMMANDS.update, { numberOfKeys: 2, lua: UPDATE_API_KEY_LUA });
  client.defineCommand(COMMANDS.rotate, { numberOfKeys: 2, lua: ROTATE_API_KEY_LUA });
  client.defineCommand(COMMANDS.revoke, { numberOfKeys: 2, lua: REVOKE_API_KEY_LUA });
  client.defineCommand(COMMANDS.findByDigest, { numberOfKeys: 2, lua: FIND_API_KEY_BY_DIGEST_LUA });
  client.defineCommand(COMMANDS.list, { numberOfKeys: 2, lua: LIST_API_KEYS_LUA });
  client.defineCommand(COMMANDS.purge, { numberOfKeys: 2, lua: PURGE_API_KEYS_LUA });
  const script = <Reply>(name: string) => {
    const command = (client as unknown as Record<string, ScriptCommand<Reply>>)[name] as ScriptCommand<Reply>;
    return (key: string, ...args: string[]) => command.call(client, keys.all, key, ...args);
  };
  const createScript = script<number>(COMMANDS.create);
  const updateScript = script<MutationReply>(COMMANDS.update);
  const rotateScript = script<MutationReply>(COMMANDS.rotate);
  const revokeScript = script<MutationReply>(COMMANDS.revoke);
  const findScript = script<[string, Fields] | []>(COMMANDS.findByDigest);
  const listScript = script<Array<string | Fields>>(COMMANDS.list);
  const purgeScript = script<[number, string]>(COMMANDS.purge);

  const withDeadline = createDeadline(callTimeoutMs);
  async function call<T>(what: string, run: () => Promise<T>): Promise<T> {
    try {
      return await withDeadline(run());
    } catch (error) {
      throw storeFailure(error, what, 'API-key record store');
    }
  }

  const watches = new Set<{ close(): Promise<void> }>();
  let closed = false; // by close(): no watch is started any more

  /** The record after a mutation script, or undefined when there was none; `2` is a digest conflict. */
  function mutated(keyId: string, reply: MutationReply): ApiKeyRecord | undefined {
    if (reply === 2) {
      throw new PetstoreError('internal_error', 'The new digest belongs to a stored API key already; nothing was changed.');
    }
    if (!Array.isArray(reply) || reply.length === 0) return undefined;
    return recordFrom(keyId, reply);
  }

  return {
    backend: 'redis',
    async create(record) {
      const fields = fieldsOf(record);
      const previous = record.previousDigest === undefined ? '' : hex(record.previousDigest);
      const status = await call('create', () =>
        createScript(keys.record(record.keyId), channel, record.keyId, maxRecordsArg, record.accountId, hex(record.digest), previous, ...fields),
      );
      if (status === 1) throw new PetstoreError('internal_error', `An API key with keyId ${record.keyId} exists; nothing was written.`);
      if (status === 2) throw new PetstoreError('internal_error', 'An API key with this digest exists; nothing was written.');
      if (status === 3) throw new PetstoreError('storage_full', `The API-key store is full (${maxRecords} records); nothing was written.`);
    },

    async findByDigest(digest) {
      assertDigest(digest, 'digest');
      const reply = await call('lookup', () => findScript(keys.digest(digest)));
      if (reply.length === 0) return undefined;
      const record = recordFrom(reply[0], reply[1]);
      // The index names the record; the record confirms it (an index entry is only ever left pointing at the
      // record that owns the digest, but a foreign write could break that).
      if (record === undefined) return undefined;
      const owns = apiKeyHashesEqual(record.digest, digest) || (record.previousDigest !== undefined && apiKeyHashesEqual(record.previousDigest, digest));
      return owns ? record : undefined;
    },

    async findByKeyId(keyId) {
      assertString(keyId, 'keyId');
      const fields = await call('lookup', () => client.hmget(keys.record(keyId), ...RECORD_FIELDS));
      return recordFrom(keyId, fields);
    },

    async list(listOptions = {}) {
      const { accountId, after, limit = DEFAULT_LIST_LIMIT } = listOptions;
      if (accountId !== undefined) assertString(accountId, 'accountId');
      if (after !== undefined) assertString(after, 'after');
      if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_LIST_LIMIT) {
        throw new TypeError(`limit must be a whole number from 1 to ${MAX_LIST_LIMIT}, got ${String(limit)}`);
      }
      const index = accountId === undefined ? keys.all : keys.account(accountId);
      // One more than the page: whether a next page exists, without another call.
      const reply = await call('list', () => listScript(index, after === undefined ? '-' : `(${after}`, String(limit + 1)));
      const records: ApiKeyRecord[] = [];
      for (let i = 0; i < reply.length && records.length < limit; i += 2) {
        const record = recordFrom(reply[i] as string, reply[i + 1] as Fields);
        if (record !== undefined) records.push(record);
      }
      const more = reply.length > 2 * limit;
      const last = records[records.length - 1];
      return more && last !== undefined ? { records, next: last.keyId } : { records };
    },

    async update(keyId, change) {
      assertString(keyId, 'keyId');
      assertTime(change.nowMs, 'nowMs');
      const record = keys.record(keyId);
      switch (change.kind) {
        case 'update': {
          if (change.plan !== undefined) assertPlan(change.plan);
          if (change.limits !== undefined && change.limits !== null) assertLimits(change.limits);
          if (change.name !== undefined && change.name !== null) assertName(change.name);
          const limits = change.limits === undefined ? [''] : change.limits === null ? ['clear'] : ['set', String(change.limits.requestsPerMinute), String(change.limits.requestsPerDay)];
          const name = change.name === undefined ? [''] : change.name === null ? ['clear'] : ['set', change.name];
          const args = [channel, keyId, String(change.nowMs), change.plan ?? '', ...pad(limits, 3), ...name];
          return mutated(keyId, await call('update', () => updateScript(record, ...args)));
        }
        case 'rotate': {
          assertDigest(change.digest, 'digest');
          assertTime(change.previousValidUntilMs, 'previousValidUntilMs');
          const args = [channel, keyId, String(change.nowMs), hex(change.digest), String(change.previousValidUntilMs)];
          return mutated(keyId, await call('rotation', () => rotateScript(record, ...args)));
        }
        case 'revoke':
          return mutated(keyId, await call('revocation', () => revokeScript(record, channel, keyId, String(change.nowMs))));
        default:
          throw new TypeError(`change.kind must be 'update', 'rotate' or 'revoke', got ${String((change as { kind?: unknown }).kind)}`);
      }
    },

    async purge(purgeOptions) {
      const beforeMs = purgeOptions?.beforeMs;
      assertTime(beforeMs, 'beforeMs');
      // Batches of keyIds in keyId order, each one script: a purge of many records never blocks Redis long.
      // A revoked or expired record never changes again: batches in keyId order see each one once.
      let removed = 0;
      let cursor = '-';
      for (;;) {
        const [count, last] = await call('purge', () => purgeScript(keys.all, channel, String(beforeMs), cursor, String(PURGE_BATCH)));
        removed += count;
        if (last === '') return removed;
        cursor = `(${last}`;
      }
    },

    async watch(listener) {
      if (closed) throw new Error('The API-key record store is closed: watch() after close()');
      const watch = await watchChannel(client, channel, callTimeoutMs, listener);
      if (closed) {
        // close() ran while this watch was starting: it ends here, like the others.
        await watch.close();
        throw new Error('The API-key record store was closed while watch() started');
      }
      const tracked = {
        async close() {
          watches.delete(tracked);
          await watch.close();
        },
      };
      watches.add(tracked);
      return tracked;
    },

    async close() {
      closed = true;
      await Promise.all([...watches].map((watch) => watch.close()));
    },
  };
}

/** `values` with empty strings appended up to `length` (the scripts read fixed argument positions). */
function pad(values: string[], length: number): string[] {
  return [...values, ...Array.from({ length: length - values.length }, () => '')];
}

/** The record hash's field/value pairs of a new record, after checking it. */
function fieldsOf(record: ApiKeyRecord): string[] {
  if (typeof record !== 'object' || record === null) throw new TypeError('record must be an object');
  assertString(record.keyId, 'keyId');
  assertString(record.accountId, 'accountId');
  assertPlan(record.plan);
  if (record.limits !== undefined) assertLimits(record.limits);
  if (record.name !== undefined) assertName(record.name);
  assertTime(record.createdAtMs, 'createdAtMs');
  assertTime(record.updatedAtMs, 'updatedAtMs');
  if (record.expiresAtMs !== undefined) assertTime(record.expiresAtMs, 'expiresAtMs');
  if (record.revokedAtMs !== undefined) assertTime(record.revokedAtMs, 'revokedAtMs');
  assertDigest(record.digest, 'digest');
  if ((record.previousDigest === undefined) !== (record.previousValidUntilMs === undefined)) {
    throw new TypeError('previousDigest and previousValidUntilMs must be given together');
  }
  if (record.previousDigest !== undefined) assertDigest(record.previousDigest, 'previousDigest');
  if (record.previousValidUntilMs !== undefined) assertTime(record.previousValidUntilMs, 'previousValidUntilMs');

  const fields = ['accountId', record.accountId, 'plan', record.plan, 'createdAtMs', String(record.createdAtMs), 'updatedAtMs', String(record.updatedAtMs), 'digest', hex(record.digest)];
  if (record.limits !== undefined) {
    fields.push('requestsPerMinute', String(record.limits.requestsPerMinute), 'requestsPerDay', String(record.limits.requestsPerDay));
  }
  if (record.name !== undefined) fields.push('name', record.name);
  if (record.expiresAtMs !== undefined) fields.push('expiresAtMs', String(record.expiresAtMs));
  if (record.revokedAtMs !== undefined) fields.push('revokedAtMs', String(record.revokedAtMs));
  if (record.previousDigest !== undefined) {
    fields.push('previousDigest', hex(record.previousDigest), 'previousValidUntilMs', String(record.previousValidUntilMs));
  }
  return fields;
}

/**
 * A record from its hash fields (in {@link RECORD_FIELDS} order), or undefined when the hash does not exist.
 * Built with fixed property names only: no stored value becomes a property name.
 */
function recordFrom(keyId: string, fields: Fields): ApiKeyRecord | undefined {
  const [accountId, plan, requestsPerMinute, requestsPerDay, name, createdAtMs, updatedAtMs, expiresAtMs, revokedAtMs, digest, previousDigest, previousValidUntilMs] =
    fields;
  if (accountId === null || accountId === undefined) return undefined;
  const broken = () => new Error(`The API-key record ${keyId} in Redis is not a record of this store`);
  if (plan == null || !isPlanName(plan) || digest == null || createdAtMs == null || updatedAtMs == null) throw broken();
  const time = (value: string) => {
    const number = Number(value);
    if (!Number.isSafeInteger(number)) throw broken();
    return number;
  };
  const digestOf = (value: string) => {
    if (!/^[0-9a-f]{64}$/.test(value)) throw broken();
    return new Uint8Array(Buffer.from(value, 'hex'));
  };
  const record: ApiKeyRecord = {
    keyId,
    accountId,
    plan,
    createdAtMs: time(createdAtMs),
    updatedAtMs: time(updatedAtMs),
    digest: digestOf(digest),
  };
  if (requestsPerMinute != null && requestsPerDay != null) {
    record.limits = { requestsPerMinute: time(requestsPerMinute), requestsPerDay: time(requestsPerDay) };
  }
  if (name != null) record.name = name;
  if (expiresAtMs != null) record.expiresAtMs = time(expiresAtMs);
  if (revokedAtMs != null) record.revokedAtMs = time(revokedAtMs);
  if (previousDigest != null && previousValidUntilMs != null) {
    record.previousDigest = digestOf(previousDigest);
    record.previousValidUntilMs = time(previousValidUntilMs);
  }
  return record;
}

function assertString(value: unknown, field: string): asserts value is string {
  if (typeof value !== 'string' || value.length === 0) throw new TypeError(`${field} must be a non-empty string, got ${typeof value === 'string' ? '""' : typeof value}`);
}

function assertTime(value: unknown, field: string): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
    throw new TypeError(`${field} must be a whole number of ms (Unix epoch), got ${String(value)}`);
  }
}

function assertDigest(value: unknown, field: string): asserts value is Uint8Array {
  if (!(value instanceof Uint8Array) || value.byteLength !== API_KEY_HASH_BYTES) {
    throw new TypeError(`${field} must be a SHA-256 digest (${API_KEY_HASH_BYTES} bytes)`);
  }
}

function assertPlan(value: unknown): void {
  if (typeof value !== 'string' || !isPlanName(value)) throw new TypeError(`plan must be a plan name, got ${String(value)}`);
}

function assertLimits(value: PlanLimits): void {
  if (typeof value !== 'object' || value === null) throw new TypeError('limits must be an object');
  for (const field of ['requestsPerMinute', 'requestsPerDay'] as const) {
    const count = value[field];
    if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) {
      throw new TypeError(`limits.${field} must be a whole number >= 0, got ${String(count)}`);
    }
  }
}

function assertName(value: unknown): void {
  if (typeof value !== 'string' || value.length === 0) throw new TypeError('name must be a non-empty string');
}
