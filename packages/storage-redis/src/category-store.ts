import {
  PetstoreError,
  type Category,
  type CategoryPage,
  type CategoryStore,
  type IdempotentCreateRequest,
  type IdempotentCreateResult,
  type NewCategory,
} from '@petstore/core';
import { createTurnBatches } from '@petstore/internal';
import type { Cluster, Redis } from 'ioredis';
import { assertCallTimeoutMs, assertKeyPrefix, createDeadline, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_KEY_PREFIX, storeFailure, tagKeysShareSlot } from './redis-call.js';

/** Name under which the create script is defined on the client (`client.defineCommand`). */
export const CREATE_CATEGORY_COMMAND = 'petstoreCategoryCreate';

/** Name under which the idempotent create script is defined on the client (`client.defineCommand`). */
const CREATE_CATEGORY_IDEMPOTENT_COMMAND = 'petstoreCategoryCreateIdempotent';

/**
 * What both create scripts do to create: KEYS[1] = records hash, KEYS[2] = last-id counter, the last key = the
 * epoch; ARGV[1] = the record's JSON, ARGV[2] = maxCategories ('' for none). Answers { 1, count } when full,
 * { 2, lastId } when the next id would pass Number.MAX_SAFE_INTEGER (both before any write), else leaves the new
 * id in `id`. The epoch (Redis's TIME) is written anew whenever the counter starts again at 1 (a new store, or
 * one whose keys were lost: FLUSHALL, a restart without persistence), so a list version is never reused for
 * another list.
 */
const CREATE_STEP_LUA = `
if ARGV[2] ~= '' then
  local count = redis.call('HLEN', KEYS[1])
  if count >= tonumber(ARGV[2]) then return { 1, count } end
end
local lastId = redis.call('GET', KEYS[2])
if lastId and tonumber(lastId) >= 9007199254740991 then return { 2, lastId } end
local id = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], id, ARGV[1])
if id == 1 or redis.call('EXISTS', KEYS[#KEYS]) == 0 then
  local now = redis.call('TIME')
  redis.call('SET', KEYS[#KEYS], now[1] .. '.' .. now[2])
end
`;

/**
 * The create script: {@link CREATE_STEP_LUA}, then { 0, id }. Nothing is written unless it answers 0.
 */
const CREATE_LUA = `${CREATE_STEP_LUA}return { 0, id }
`;

/**
 * The idempotent create script. KEYS[1], KEYS[2], ARGV[1], ARGV[2] as in {@link CREATE_STEP_LUA}; KEYS[3] = the
 * idempotency record, KEYS[4] = the epoch, ARGV[3] = the request's fingerprint as a JSON string (quoted), ARGV[4] = the record's
 * retention in ms (a whole number ≥ 1, checked by the caller: a `SET` refused after the `INCR` would leave a
 * category without its record). Answers { 3, record } when the record key holds a record (Redis drops it once its
 * `PX` passes), and writes nothing; else creates as the create script does and, in the same script run, writes
 * the record `{"fingerprint":…,"id":…,"category":{"name":…,"description":…}}` with `SET … PX`, and answers
 * { 0, id }. Nothing is written unless it answers 0. The id is formatted with `%d` (exact up to 2^53; Lua's
 * `tostring` would round it to 14 digits). A record key of another type fails the `GET`, before any write.
 */
const CREATE_IDEMPOTENT_LUA = `
local recorded = redis.call('GET', KEYS[3])
if recorded then return { 3, recorded } end
${CREATE_STEP_LUA}redis.call('SET', KEYS[3], '{"fingerprint":' .. ARGV[3] .. ',"id":' .. string.format('%d', id) .. ',"category":' .. ARGV[1] .. '}', 'PX', ARGV[4])
return { 0, id }
`;

/** Name under which the page script is defined on the client (`client.defineCommand`). */
const LIST_PAGE_COMMAND = 'petstoreCategoryListPage';

/**
 * The page script: KEYS[1] = records hash, KEYS[2] = last-id counter; ARGV[1] = after (ids above it), ARGV[2] = the
 * most records to answer ('' for no bound). Walks the ids from after + 1 up to the last id handed out (ids are
 * handed out one by one, so every id up to it has its record unless one was deleted by hand) with `HGET`, and
 * answers { id, json, id, json, … } in id order: a page costs its size, not the hash's.
 */
const LIST_PAGE_LUA = `
local lastId = tonumber(redis.call('GET', KEYS[2]) or '0')
local limit = tonumber(ARGV[2])
local page = {}
local found = 0
local id = tonumber(ARGV[1]) + 1
while id <= lastId and (limit == nil or found < limit) do
  local json = redis.call('HGET', KEYS[1], string.format('%d', id))
  if json then
    page[#page + 1] = string.format('%d', id)
    page[#page + 1] = json
    found = found + 1
  end
  id = id + 1
end
return page
`;

/** A {@link CategoryStore} in Redis: every call is a promise. */
export interface RedisCategoryStore extends CategoryStore {
  list(page?: CategoryPage): Promise<Category[]>;
  /**
   * `"0"` before the first create; then the last id handed out and the store's epoch (`"3@1764331200.123456"`, one
   * `MGET` of the `lastId` and `epoch` keys). The create scripts `INCR` the counter in the same script run that writes
   * the record, so the version changes exactly when a category is created, on every instance sharing the keys at
   * once; the epoch changes when the counter starts again (the keys were lost), so no version names two lists. The
   * calls of one event-loop turn share one `MGET`, sent at the end of the turn: each caller gets the version of a
   * read that started after its call.
   */
  listVersion(): Promise<string>;
  create(newCategory: NewCategory): Promise<Category>;
  createIdempotent(newCategory: NewCategory, request: IdempotentCreateRequest): Promise<IdempotentCreateResult>;
}

/** Options of {@link redisCategoryStore}. */
export interface RedisCategoryStoreOptions {
  /**
   * A connected (or connecting) ioredis 5 client: a `Redis` (one server, or a Sentinel-managed primary) or a
   * `Cluster` (Redis Cluster: every key carries the hash tag `{categories}`, so they share one slot and each
   * script runs on one master). The store defines three script commands on it (`petstoreCategoryCreate`,
   * `petstoreCategoryCreateIdempotent` and `petstoreCategoryListPage`) and never closes it.
   */
  client: Redis | Cluster;
  /** Prefix of every key this store writes. Default `petstore:`. */
  keyPrefix?: string;
  /**
   * Deadline of one `list`, `listVersion`, `create` or `createIdempotent` in ms (for `listVersion`: from the end of
   * the turn it was called in, when its read is sent); past it the call throws `service_unavailable` (cause: a
   * {@link RedisTimeoutError}). Default 1000 ({@link DEFAULT_CALL_TIMEOUT_MS}).
   */
  callTimeoutMs?: number;
  /** Most categories held; a create beyond it throws `storage_full` (507) and writes nothing. Default: no bound. */
  maxCategories?: number;
}

/**
 * The Redis keys of a category store with prefix `keyPrefix` (default `petstore:`), before any client-level
 * ioredis `keyPrefix`: `records` = `${keyPrefix}{categories}` (hash: id → record JSON), `lastId` =
 * `${keyPrefix}{categories}:last-id` (the last id handed out), and `idempotency(key)` =
 * `${keyPrefix}{categories}:idempotency:${key}` (the record of one idempotent create, expiring after the
 * request's `retentionMs`). See {@link redisCategoryStore}.
 *
 * Every key carries a Redis Cluster hash tag, so they always share one hash slot: `{categories}`, or the
 * prefix's own tag when `keyPrefix` holds one (e.g. `tenant:{eu}:` puts every key in the slot of `eu`).
 * The one prefix that defeats this has an empty tag first (`{}` as its first `{`…`}` pair, e.g. `a{}:`):
 * Redis then hashes each whole key, and {@link redisCategoryStore} refuses it on a `Cluster` client.
 */
export function categoryRedisKeys(keyPrefix: string = DEFAULT_KEY_PREFIX): {
  /** `${keyPrefix}{categories}`: a hash, id in decimal → the category's JSON `{"name":…,"description":…}`. */
  records: string;
  /** `${keyPrefix}{categories}:last-id`: the last id handed out (a string counter). */
  lastId: string;
  /**
   * `${keyPrefix}{categories}:epoch`: Redis's `TIME` (`seconds.microseconds`) when the counter last started at 1,
   * part of the list version.
   */
  epoch: string;
  /**
   * The key of the idempotency record of `key` (an `IdempotentCreateRequest.key`, 64 hex characters):
   * `${keyPrefix}{categories}:idempotency:${key}`, a string with a TTL of the request's `retentionMs`.
   */
  idempotency(key: string): string;
} {
  const records = `${keyPrefix}{categories}`;
  const idempotencyPrefix = `${records}:idempotency:`;
  return { records, lastId: `${records}:last-id`, epoch: `${records}:epoch`, idempotency: (key: string) => `${idempotencyPrefix}${key}` };
}

type ListPageCommand = (records: string, lastId: string, after: string, limit: string) => Promise<string[]>;
type CreateReply = [status: 0 | 1 | 2, value: number | string];
type CreateCommand = (records: string, lastId: string, epoch: string, json: string, maxCategories: string) => Promise<CreateReply>;
type CreateIdempotentReply = CreateReply | [status: 3, record: string];
type CreateIdempotentCommand = (
  records: string,
  lastId: string,
  idempotencyRecord: string,
  epoch: string,
  json: string,
  maxCategories: string,
  fingerprintJson: string,
  retentionMs: string,
) => Promise<CreateIdempotentReply>;

/**
 * A category store in Redis. Key layout (after the client's own ioredis `keyPrefix`, if any), see
 * {@link categoryRedisKeys}:
 *
 * - `${keyPrefix}{categories}`: a hash, field = id in decimal, value = JSON `{"name":…,"description":…}`
 *   (no `description` key when the category has none);
 * - `${keyPrefix}{categories}:last-id`: the last id handed out (a string counter, `INCR`ed);
 * - `${keyPrefix}{categories}:epoch`: Redis's `TIME` when the counter last started at 1;
 * - `${keyPrefix}{categories}:idempotency:${request.key}`: the record of one `createIdempotent`, a string
 *   `{"fingerprint":…,"id":…,"category":{"name":…,"description":…}}` with a TTL (`PX`) of the request's
 *   `retentionMs`: Redis deletes it then, and the key creates again.
 *
 * The `{categories}` hash tag keeps every key in one Redis Cluster hash slot, so `client` may be an ioredis
 * `Cluster`: each create script runs on that slot's master. (Every store whose prefix has no tag of its own
 * lands in the same slot; give each store a prefix with its own tag, e.g. `shop:{eu}:`, to spread them.)
 * A `MOVED` or `ASK` redirection is followed by ioredis and the call succeeds.
 *
 * Categories and the counter never expire: they are data. `create` is one Lua script (EVALSHA): it refuses
 * when `maxCategories` are held, else `INCR`s the counter and writes the record — id and record atomically, so
 * parallel creates from any number of processes get distinct ids 1, 2, 3, … `createIdempotent` is one other Lua
 * script: it reads the key's record and, when there is one, answers it (`replayed` when its fingerprint is the
 * request's, else `mismatch`) and writes nothing; else it creates exactly as `create` does (same counter, same
 * limits) and writes the record with its TTL in the same script run. Redis runs a script atomically, so the
 * category and its record are written together or not at all, and parallel calls with one key create one
 * category (the others answer `replayed`). `list()` is one `HGETALL`, sorted by id (ascending); a page
 * (`list({ limit, after })`) is one Lua script that `HGET`s the ids above `after` in order up to `limit` records (the
 * ids are dense: every id up to the counter has its record, unless deleted by hand). `listVersion()` reads the counter
 * and the epoch: it changes with every create, in the create's own script run. The `listVersion()` calls of one turn of
 * the event loop share one `MGET`, sent at the end of the turn (`setImmediate`, as the rate-limit store's consumes), so
 * the lists a busy server answers share their version reads, and every caller still gets a version read after its call,
 * so a category created anywhere before the call is in the list (no cache that could be stale); a call made once that
 * read was sent waits for the next one. Under fake timers that fake `setImmediate`, advance them for a read to be sent.
 *
 * Errors (every method):
 * - `PetstoreError('service_unavailable', …, { retryAfterSeconds: 5, cause })` (503 with `Retry-After`) when
 *   Redis is unreachable, does not answer within `callTimeoutMs`, or temporarily refuses (loading, failover;
 *   on a cluster also `CLUSTERDOWN`, `TRYAGAIN`, or a slot without a master). A create that timed out may
 *   still be written by Redis later (an idempotent one with its record: a retry with its key is then replayed).
 * - `PetstoreError('storage_full')` (507) from `create` and `createIdempotent` when `maxCategories` are held, or
 *   when the next id would pass `Number.MAX_SAFE_INTEGER` (2^53 − 1, the largest id that survives JSON in every
 *   client); nothing is written, no record either.
 * - a plain Error (500) when Redis answers with another error (e.g. `WRONGTYPE`: a key holds foreign data; a
 *   foreign idempotency record key fails only the calls with that key) or a stored record is not valid JSON.
 * - a TypeError (500) from `createIdempotent` when `request.retentionMs` is not a whole number ≥ 1; nothing is
 *   sent.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#store-failures
 * @throws TypeError when `maxCategories` or `callTimeoutMs` is not a whole number ≥ 1, or `keyPrefix` is not a
 *   string, or `client` is a `Cluster` and the full prefix (the client's ioredis `keyPrefix`, then
 *   `keyPrefix`) starts its first hash tag with an empty `{}`, which would put the keys in different slots.
 */
export function redisCategoryStore(options: RedisCategoryStoreOptions): RedisCategoryStore {
  const { client, keyPrefix = DEFAULT_KEY_PREFIX, callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS, maxCategories } = options;
  assertKeyPrefix(keyPrefix);
  assertCallTimeoutMs(callTimeoutMs);
  if (maxCategories !== undefined && (!Number.isSafeInteger(maxCategories) || maxCategories < 1)) {
    throw new TypeError(`maxCategories must be a whole number >= 1, got ${String(maxCategories)}`);
  }
  if (client.isCluster && !tagKeysShareSlot(`${client.options.keyPrefix ?? ''}${keyPrefix}`)) {
    throw new TypeError(
      `keyPrefix ${JSON.stringify(keyPrefix)} (after the client's ioredis keyPrefix) starts an empty hash tag "{}": ` +
        'on a Redis Cluster the category keys would land in different slots',
    );
  }
  const keys = categoryRedisKeys(keyPrefix);
  const maxCategoriesArg = maxCategories === undefined ? '' : String(maxCategories);
  client.defineCommand(CREATE_CATEGORY_COMMAND, { numberOfKeys: 3, lua: CREATE_LUA });
  client.defineCommand(CREATE_CATEGORY_IDEMPOTENT_COMMAND, { numberOfKeys: 4, lua: CREATE_IDEMPOTENT_LUA });
  client.defineCommand(LIST_PAGE_COMMAND, { numberOfKeys: 2, lua: LIST_PAGE_LUA });
  const commands = client as unknown as Record<string, CreateCommand & CreateIdempotentCommand & ListPageCommand>;
  const listPageCommand = commands[LIST_PAGE_COMMAND] as ListPageCommand;
  const createCommand = commands[CREATE_CATEGORY_COMMAND] as CreateCommand;
  const createIdempotentCommand = commands[CREATE_CATEGORY_IDEMPOTENT_COMMAND] as CreateIdempotentCommand;

  const withDeadline = createDeadline(callTimeoutMs);
  async function call<T>(what: string, run: () => Promise<T>): Promise<T> {
    try {
      return await withDeadline(run());
    } catch (error) {
      throw storeFailure(error, what, 'category store');
    }
  }

  /** The `listVersion()` calls of this turn, answered by one `MGET` sent at its end (no bound: they share its reply). */
  const addVersionWaiter = createTurnBatches<{ resolve(version: string): void; reject(error: unknown): void }>(Number.POSITIVE_INFINITY, (waiters) => {
    call('list version', () => client.mget(keys.lastId, keys.epoch)).then(
      ([lastId, epoch]) => {
        const version = lastId === null ? '0' : `${lastId}@${epoch ?? ''}`;
        for (const waiter of waiters) waiter.resolve(version);
      },
      (error: unknown) => {
        for (const waiter of waiters) waiter.reject(error);
      },
    );
  });

  /** The stored part of a new category: no `description` key when it has none. */
  function recordOf(newCategory: NewCategory): Omit<Category, 'id'> {
    return {
      name: newCategory.name,
      ...(newCategory.description !== undefined ? { description: newCategory.description } : {}),
    };
  }

  /** The category a create script answered with status 0, or its `storage_full` refusal (1, 2). */
  function created(status: 0 | 1 | 2, value: number | string, record: Omit<Category, 'id'>): Category {
    if (status === 1) {
      throw new PetstoreError('storage_full', `The category store is full (${maxCategories} categories); nothing was created.`);
    }
    if (status === 2) {
      throw new PetstoreError('storage_full', 'The category store has used every safe integer id; nothing was created.');
    }
    return { id: Number(value), ...record };
  }

  return {
    backend: 'redis',
    async list(page?: CategoryPage) {
      if (page === undefined || (page.limit === undefined && (page.after ?? 0) === 0)) {
        const records = await call('list', () => client.hgetall(keys.records));
        return Object.entries(records)
          .map(([id, json]) => categoryFromRecord(Number(id), json))
          .sort((a, b) => a.id - b.id);
      }
      const flat = await call('list', () =>
        listPageCommand.call(client, keys.records, keys.lastId, String(page.after ?? 0), page.limit === undefined ? '' : String(page.limit)),
      );
      const categories: Category[] = [];
      for (let index = 0; index < flat.length; index += 2) {
        categories.push(categoryFromRecord(Number(flat[index]), flat[index + 1] as string));
      }
      return categories;
    },
    listVersion() {
      return new Promise<string>((resolve, reject) => {
        addVersionWaiter({ resolve, reject });
      });
    },
    async create(newCategory: NewCategory) {
      const record = recordOf(newCategory);
      const [status, value] = await call('create', () =>
        createCommand.call(client, keys.records, keys.lastId, keys.epoch, JSON.stringify(record), maxCategoriesArg),
      );
      return created(status, value, record);
    },
    async createIdempotent(newCategory: NewCategory, request: IdempotentCreateRequest): Promise<IdempotentCreateResult> {
      // Checked before the call: a PX that Redis refuses after the INCR would leave a category without its record.
      if (!Number.isSafeInteger(request.retentionMs) || request.retentionMs < 1) {
        throw new TypeError(`retentionMs must be a whole number of milliseconds >= 1, got ${String(request.retentionMs)}`);
      }
      const record = recordOf(newCategory);
      const reply = await call('idempotent create', () =>
        createIdempotentCommand.call(
          client,
          keys.records,
          keys.lastId,
          keys.idempotency(request.key),
          keys.epoch,
          JSON.stringify(record),
          maxCategoriesArg,
          JSON.stringify(request.fingerprint),
          String(request.retentionMs),
        ),
      );
      if (reply[0] !== 3) return { outcome: 'created', category: created(reply[0], reply[1], record) };
      const recorded = idempotencyRecordFrom(reply[1]);
      return recorded.fingerprint === request.fingerprint ? { outcome: 'replayed', category: recorded.category } : { outcome: 'mismatch' };
    },
  };
}

/** A stored idempotency record (`{"fingerprint":…,"id":…,"category":{…}}`), checked. */
function idempotencyRecordFrom(json: string): { fingerprint: string; category: Category } {
  const parsed = JSON.parse(json) as { fingerprint?: unknown; id?: unknown; category?: unknown };
  if (typeof parsed.fingerprint !== 'string' || typeof parsed.id !== 'number' || typeof parsed.category !== 'object' || parsed.category === null) {
    throw new Error('An idempotency record in Redis is not a record of this store');
  }
  return { fingerprint: parsed.fingerprint, category: categoryFromParsed(parsed.id, parsed.category as { name?: unknown; description?: unknown }) };
}

function categoryFromRecord(id: number, json: string): Category {
  return categoryFromParsed(id, JSON.parse(json) as { name?: unknown; description?: unknown });
}

function categoryFromParsed(id: number, parsed: { name?: unknown; description?: unknown }): Category {
  if (!Number.isSafeInteger(id) || id < 1 || typeof parsed.name !== 'string') {
    throw new Error(`The category record ${id} in Redis is not a category`);
  }
  return typeof parsed.description === 'string'
    ? { id, name: parsed.name, description: parsed.description }
    : { id, name: parsed.name };
}
