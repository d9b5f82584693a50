import { PetstoreError, type Category, type CategoryStore, type NewCategory } from '@petstore/core';
import type { Cluster, Redis } from 'ioredis';
import { assertKeyPrefix, assertTimeoutMs, DEFAULT_KEY_PREFIX, DEFAULT_TIMEOUT_MS, storeFailure, createDeadline } from './redis-call.js';

/** Name under which the create script is defined on the client (`client.defineCommand`). */
export const CREATE_CATEGORY_COMMAND = 'petstoreCategoryCreate';

/**
 * The create script. KEYS[1] = records hash, KEYS[2] = last-id counter; ARGV[1] = the record's JSON,
 * ARGV[2] = maxCategories ('' for none). Returns { 0, id } when written, { 1, count } when full,
 * { 2, lastId } when the next id would pass Number.MAX_SAFE_INTEGER. Nothing is written unless it answers 0.
 */
const CREATE_LUA = `
if ARGV[2] ~= '' then
  local count = redis.call('HLEN', KEYS[1])
  if count >= tonumber(ARGV[2]) then return { 1, count } end
end
local lastId = redis.call('GET', KEYS[2])
if lastId and tonumber(lastId) >= 9007199254740991 then return { 2, lastId } end
local id = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], id, ARGV[1])
return { 0, id }
`;

/** A {@link CategoryStore} in Redis: every call is a promise. */
export interface RedisCategoryStore extends CategoryStore {
  list(): Promise<Category[]>;
  create(newCategory: NewCategory): Promise<Category>;
}

/** Options of {@link redisCategoryStore}. */
export interface RedisCategoryStoreOptions {
  /**
   * A connected (or connecting) ioredis 5 client: a `Redis` (one server, or a Sentinel-managed primary) or a
   * `Cluster` (Redis Cluster: both keys carry the hash tag `{categories}`, so they share one slot and the
   * create script runs on one master). The store defines one script command on it (`petstoreCategoryCreate`)
   * and never closes it.
   */
  client: Redis | Cluster;
  /** Prefix of every key this store writes. Default `petstore:`. */
  keyPrefix?: string;
  /** Deadline of one `list` or `create` in ms; past it the call throws `service_unavailable`. Default 1000. */
  timeoutMs?: number;
  /** Most categories held; a create beyond it throws `storage_full` (507) and writes nothing. Default: no bound. */
  maxCategories?: number;
}

/**
 * The two Redis keys of a category store with prefix `keyPrefix` (default `petstore:`), before any
 * client-level ioredis `keyPrefix`: `records` = `${keyPrefix}{categories}` (hash: id → record JSON) and
 * `lastId` = `${keyPrefix}{categories}:last-id` (the last id handed out). See {@link redisCategoryStore}.
 *
 * Both keys carry a Redis Cluster hash tag, so they always share one hash slot: `{categories}`, or the
 * prefix's own tag when `keyPrefix` holds one (e.g. `tenant:{eu}:` puts both keys in the slot of `eu`).
 * The one prefix that defeats this has an empty tag first (`{}` as its first `{`…`}` pair, e.g. `a{}:`):
 * Redis then hashes each whole key, and {@link redisCategoryStore} refuses it on a `Cluster` client.
 */
export function categoryRedisKeys(keyPrefix: string = DEFAULT_KEY_PREFIX): { records: string; lastId: string } {
  return { records: `${keyPrefix}{categories}`, lastId: `${keyPrefix}{categories}:last-id` };
}

/**
 * True when the keys of {@link categoryRedisKeys} under this full prefix (client-level ioredis prefix +
 * store prefix) fall in one hash slot. Redis hashes only what is between the key's first `{` and the first
 * `}` after it, unless that is empty; both keys share everything up to the `}` of `{categories}`, so they
 * differ in slot only when the first `{` of the prefix is directly followed by `}`.
 */
function categoryKeysShareSlot(fullPrefix: string): boolean {
  const open = fullPrefix.indexOf('{');
  return open === -1 || fullPrefix[open + 1] !== '}';
}

type CreateReply = [status: 0 | 1 | 2, value: number | string];
type CreateCommand = (records: string, lastId: string, json: string, maxCategories: string) => Promise<CreateReply>;

/**
 * A category store in Redis. Key layout (after the client's own ioredis `keyPrefix`, if any), see
 * {@link categoryRedisKeys}:
 *
 * - `${keyPrefix}{categories}`: a hash, field = id in decimal, value = JSON `{"name":…,"description":…}`
 *   (no `description` key when the category has none);
 * - `${keyPrefix}{categories}:last-id`: the last id handed out (a string counter, `INCR`ed).
 *
 * The `{categories}` hash tag keeps both keys in one Redis Cluster hash slot, so `client` may be an ioredis
 * `Cluster`: the create script runs on that slot's master. (Every store whose prefix has no tag of its own
 * lands in the same slot; give each store a prefix with its own tag, e.g. `shop:{eu}:`, to spread them.)
 * A `MOVED` or `ASK` redirection is followed by ioredis and the call succeeds.
 *
 * Neither key expires: categories are data. `create` is one Lua script (EVALSHA): it refuses when
 * `maxCategories` are held, else `INCR`s the counter and writes the record — id and record atomically, so
 * parallel creates from any number of processes get distinct ids 1, 2, 3, … `list` is one `HGETALL`, sorted by
 * id (ascending).
 *
 * Errors (both methods):
 * - `PetstoreError('service_unavailable', …, { retryAfterSeconds: 5, cause })` (503 with `Retry-After`) when
 *   Redis is unreachable, does not answer within `timeoutMs`, or temporarily refuses (loading, failover;
 *   on a cluster also `CLUSTERDOWN`, `TRYAGAIN`, or a slot without a master). A create that timed out may
 *   still be written by Redis later.
 * - `PetstoreError('storage_full')` (507) from `create` when `maxCategories` are held, or when the next id
 *   would pass `Number.MAX_SAFE_INTEGER` (2^53 − 1, the largest id that survives JSON in every client);
 *   nothing is written.
 * - a plain Error (500) when Redis answers with another error (e.g. `WRONGTYPE`: the keys hold foreign
 *   data) or a stored record is not valid JSON.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#store-failures
 * @throws TypeError when `maxCategories` or `timeoutMs` is not a whole number ≥ 1, or `keyPrefix` is not a
 *   string, or `client` is a `Cluster` and the full prefix (the client's ioredis `keyPrefix`, then
 *   `keyPrefix`) starts its first hash tag with an empty `{}`, which would put the two keys in different slots.
 */
export function redisCategoryStore(options: RedisCategoryStoreOptions): RedisCategoryStore {
  const { client, keyPrefix = DEFAULT_KEY_PREFIX, timeoutMs = DEFAULT_TIMEOUT_MS, maxCategories } = options;
  assertKeyPrefix(keyPrefix);
  assertTimeoutMs(timeoutMs);
  if (maxCategories !== undefined && (!Number.isSafeInteger(maxCategories) || maxCategories < 1)) {
    throw new TypeError(`maxCategories must be a whole number >= 1, got ${String(maxCategories)}`);
  }
  if (client.isCluster && !categoryKeysShareSlot(`${client.options.keyPrefix ?? ''}${keyPrefix}`)) {
    throw new TypeError(
      `keyPrefix ${JSON.stringify(keyPrefix)} (after the client's ioredis keyPrefix) starts an empty hash tag "{}": ` +
        'on a Redis Cluster the two category keys would land in different slots',
    );
  }
  const keys = categoryRedisKeys(keyPrefix);
  client.defineCommand(CREATE_CATEGORY_COMMAND, { numberOfKeys: 2, lua: CREATE_LUA });
  const createCommand = (client as unknown as Record<string, CreateCommand>)[CREATE_CATEGORY_COMMAND] as CreateCommand;

  const withDeadline = createDeadline(timeoutMs);
  async function call<T>(what: string, run: () => Promise<T>): Promise<T> {
    try {
      return await withDeadline(run());
    } catch (error) {
      throw storeFailure(error, what, 'category store');
    }
  }

  return {
    async list() {
      const records = await call('list', () => client.hgetall(keys.records));
      return Object.entries(records)
        .map(([id, json]) => categoryFromRecord(Number(id), json))
        .sort((a, b) => a.id - b.id);
    },
    async create(newCategory: NewCategory) {
      const record: Omit<Category, 'id'> = {
        name: newCategory.name,
        ...(newCategory.description !== undefined ? { description: newCategory.description } : {}),
      };
      const [status, value] = await call('create', () =>
        createCommand.call(client, keys.records, keys.lastId, JSON.stringify(record), maxCategories === undefined ? '' : String(maxCategories)),
      );
      if (status === 1) {
        throw new PetstoreError('storage_full', `The category store is full (${maxCategories} categories); nothing was created.`);
      }
      if (status === 2) {
        throw new PetstoreError('storage_full', 'The category store has used every safe integer id; nothing was created.');
      }
      return { id: Number(value), ...record };
    },
  };
}

function categoryFromRecord(id: number, json: string): Category {
  const parsed = JSON.parse(json) as { name: unknown; description?: unknown };
  if (!Number.isSafeInteger(id) || id < 1 || typeof parsed.name !== 'string') {
    throw new Error(`The category record ${id} in Redis is not a category`);
  }
  return typeof parsed.description === 'string'
    ? { id, name: parsed.name, description: parsed.description }
    : { id, name: parsed.name };
}
