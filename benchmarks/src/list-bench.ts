/**
 * List: `GET /v1/categories` with 100,000 categories in memory, Redis and PostgreSQL, in process through
 * `petstore.handle` (no HTTP framing: what the core and the store cost). Per store and request: the full list
 * served from the JSON kept per list version, the full list from a store without `listVersion` (read and serialised
 * every time — the cost of every full list before ETags), a page of 100 at a random place, and a 304 for the full
 * list and for a page. Reported per request: the app's CPU (this process's user + system time, the store client's
 * parsing included), the store's (redis-server's `INFO cpu`; the PostgreSQL server's processes from /proc) and the
 * body bytes. Requests are sent one at a time, `rounds` rounds visiting every store and request in turn; the median
 * round is reported.
 *
 * The categories are seeded directly, not through the API: the memory store by its own `create`, Redis with
 * pipelined `HSET`s of the store's key layout and its last-id counter, PostgreSQL with one `INSERT … SELECT FROM
 * generate_series`.
 */
import { randomBytes } from 'node:crypto';
import { createPetstore, staticApiKeys, type CategoryStore, type Petstore, type PetstoreRequest } from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { migratePostgres, postgresCategoryStore } from '@petstore/storage-postgres';
import { resolveTestPostgres } from '@petstore/storage-postgres/testing';
import { categoryRedisKeys, redisCategoryStore } from '@petstore/storage-redis';
import { resolveTestRedis } from '@petstore/storage-redis/testing';
import { Redis } from 'ioredis';
import pg from 'pg';
import { postgresCpu } from './backends-bench.js';
import { median } from './http-bench.js';
import { redisCpuMicros } from './scaleout-bench.js';
import { BENCH_KEY, HUGE_QUOTA } from './servers.js';

/** Categories seeded in every store. */
export const LIST_CATEGORIES = 100_000;

/** The stores, in the order of the report. */
export const LIST_STORES = ['memory', 'redis', 'postgres'] as const;
export type ListStore = (typeof LIST_STORES)[number];

/** The requests, in the order of the report. */
export const LIST_REQUESTS = ['full list, no listVersion', 'full list', 'page of 100', '304 full list', '304 page of 100'] as const;
export type ListRequest = (typeof LIST_REQUESTS)[number];

/** One cell: a store and a request. */
export interface ListRow {
  store: ListStore;
  request: ListRequest;
  /** The answer's status (every one of the cell's requests; a mixed cell is reported as such). */
  statuses: number[];
  /** Body bytes of one answer (UTF-8). */
  bodyBytes: number;
  /** App CPU per request, µs (median round). */
  appMicros: number;
  /** Store CPU per request, µs (median round); `undefined` for memory (inside the app) or when not measurable. */
  storeMicros: number | undefined;
}

export interface ListBenchResult {
  categories: number;
  rounds: number;
  requestsPerRound: Record<ListRequest, number>;
  rows: ListRow[];
  redisVersion: string;
  postgresVersion: string;
  /** Why PostgreSQL's CPU is missing, when it is. */
  postgresCpuUnmeasured: string | undefined;
  seconds: number;
}

/** A store without `listVersion`: the core reads and serialises the list for every request, as before ETags. */
function withoutListVersion(store: CategoryStore): CategoryStore {
  return {
    list: (page) => store.list(page),
    create: (newCategory) => store.create(newCategory),
    createIdempotent: (newCategory, request) => store.createIdempotent(newCategory, request),
  };
}

function petstoreOn(categories: CategoryStore): Petstore {
  return createPetstore({
    apiKeys: staticApiKeys([{ key: BENCH_KEY, plan: 'enterprise', limits: { requestsPerMinute: HUGE_QUOTA, requestsPerDay: HUGE_QUOTA } }]),
    categories,
    rateLimit: { store: memoryRateLimitStore() },
  });
}

const name = (i: number) => `category ${i}`;
const description = (i: number) => (i % 2 === 0 ? `description of category ${i}` : undefined);

export async function runListBenchmark(options: { quick: boolean }, log: (line: string) => void): Promise<ListBenchResult> {
  const startedAt = Date.now();
  const rounds = options.quick ? 1 : 5;
  const requestsPerRound: Record<ListRequest, number> = options.quick
    ? { 'full list, no listVersion': 2, 'full list': 20, 'page of 100': 50, '304 full list': 100, '304 page of 100': 100 }
    : { 'full list, no listVersion': 8, 'full list': 200, 'page of 100': 500, '304 full list': 1000, '304 page of 100': 1000 };
  const redisServer = await resolveTestRedis();
  if ('skipReason' in redisServer) throw new Error(`the list benchmark needs Redis: ${redisServer.skipReason}`);
  const postgresServer = await resolveTestPostgres();
  if ('skipReason' in postgresServer) {
    await redisServer.stop();
    throw new Error(`the list benchmark needs PostgreSQL: ${postgresServer.skipReason}`);
  }
  const redis = new Redis(redisServer.url);
  const pool = new pg.Pool({ connectionString: postgresServer.url, max: 4 });
  pool.on('error', () => undefined); // idle connections closed when the throwaway server stops
  const schema = `petstore_list_bench_${randomBytes(4).toString('hex')}`;
  const keyPrefix = `list-bench-${randomBytes(4).toString('hex')}:`;
  try {
    // Seeding.
    log(`list: seeding ${LIST_CATEGORIES.toLocaleString('en-US')} categories in memory, Redis and PostgreSQL`);
    const memory = memoryCategoryStore({ maxCategories: LIST_CATEGORIES });
    for (let i = 1; i <= LIST_CATEGORIES; i++) {
      const text = description(i);
      await memory.create(text === undefined ? { name: name(i) } : { name: name(i), description: text });
    }
    const keys = categoryRedisKeys(keyPrefix);
    for (let start = 1; start <= LIST_CATEGORIES; start += 10_000) {
      const fields: string[] = [];
      for (let i = start; i < start + 10_000 && i <= LIST_CATEGORIES; i++) {
        const text = description(i);
        fields.push(String(i), JSON.stringify(text === undefined ? { name: name(i) } : { name: name(i), description: text }));
      }
      await redis.hset(keys.records, ...fields);
    }
    await redis.set(keys.lastId, String(LIST_CATEGORIES));
    await migratePostgres({ pool, schema });
    await pool.query(
      `INSERT INTO "${schema}".petstore_categories (name, description)
       SELECT 'category ' || g, CASE WHEN g % 2 = 0 THEN 'description of category ' || g END FROM generate_series(1, $1::int) AS g`,
      [LIST_CATEGORIES],
    );
    await pool.query(`VACUUM ANALYZE "${schema}".petstore_categories`);

    const stores: Record<ListStore, CategoryStore> = {
      memory,
      redis: redisCategoryStore({ client: redis, keyPrefix, callTimeoutMs: 60_000 }),
      postgres: postgresCategoryStore({ pool, schema, callTimeoutMs: 60_000 }),
    };
    const petstores = Object.fromEntries(
      LIST_STORES.map((store) => [store, { versioned: petstoreOn(stores[store]), unversioned: petstoreOn(withoutListVersion(stores[store])) }]),
    ) as Record<ListStore, { versioned: Petstore; unversioned: Petstore }>;
    const pgCpu = await postgresCpu(pool, postgresServer.url);
    const storeCpu: Record<ListStore, () => Promise<number | undefined>> = {
      memory: async () => undefined,
      redis: () => redisCpuMicros(redis),
      postgres: async () => ('micros' in pgCpu ? pgCpu.micros() : undefined),
    };

    const authorization = `Bearer ${BENCH_KEY}`;
    const get = (path: string, ifNoneMatch?: string): PetstoreRequest => ({
      method: 'GET',
      path,
      headers: ifNoneMatch === undefined ? { authorization } : { authorization, 'if-none-match': ifNoneMatch },
      clientAddress: '127.0.0.1',
    });
    const randomPage = () => `/categories?limit=100&after=${Math.floor(Math.random() * (LIST_CATEGORIES - 100))}`;
    // The tags of the current list and of one page, read once per store (the list does not change during the run).
    const tags = {} as Record<ListStore, { full: string; page: string }>;
    for (const store of LIST_STORES) {
      const { versioned } = petstores[store];
      tags[store] = {
        full: (await versioned.handle(get('/categories'))).headers['etag'] as string,
        page: (await versioned.handle(get('/categories?limit=100&after=5000'))).headers['etag'] as string,
      };
    }
    const requestOf = (store: ListStore, request: ListRequest): { petstore: Petstore; next: () => PetstoreRequest } => {
      const { versioned, unversioned } = petstores[store];
      switch (request) {
        case 'full list, no listVersion':
          return { petstore: unversioned, next: () => get('/categories') };
        case 'full list':
          return { petstore: versioned, next: () => get('/categories') };
        case 'page of 100':
          return { petstore: versioned, next: () => get(randomPage()) };
        case '304 full list':
          return { petstore: versioned, next: () => get('/categories', tags[store].full) };
        case '304 page of 100':
          return { petstore: versioned, next: () => get('/categories?limit=100&after=5000', tags[store].page) };
      }
    };

    const samples = new Map<string, { app: number[]; store: number[]; statuses: Set<number>; bodyBytes: number }>();
    const cellKey = (store: ListStore, request: ListRequest) => `${store}|${request}`;
    // Warm-up: one round of a tenth.
    for (let round = -1; round < rounds; round++) {
      for (const store of LIST_STORES) {
        for (const request of LIST_REQUESTS) {
          const { petstore, next } = requestOf(store, request);
          const count = round < 0 ? Math.max(1, Math.ceil(requestsPerRound[request] / 10)) : requestsPerRound[request];
          const storeBefore = await storeCpu[store]();
          const appBefore = process.cpuUsage();
          const statuses = new Set<number>();
          let last: string | undefined;
          for (let i = 0; i < count; i++) {
            const answer = await petstore.handle(next());
            statuses.add(answer.status);
            last = answer.body;
          }
          const app = process.cpuUsage(appBefore);
          const storeAfter = await storeCpu[store]();
          // Counted after the CPU is read: encoding 6 MB of text to count its bytes is the bench's work, not the app's.
          const bodyBytes = last === undefined ? 0 : Buffer.byteLength(last);
          if (round < 0) continue;
          const cell = samples.get(cellKey(store, request)) ?? { app: [], store: [], statuses: new Set<number>(), bodyBytes };
          cell.app.push((app.user + app.system) / count);
          if (storeBefore !== undefined && storeAfter !== undefined) cell.store.push((storeAfter - storeBefore) / count);
          for (const status of statuses) cell.statuses.add(status);
          cell.bodyBytes = bodyBytes;
          samples.set(cellKey(store, request), cell);
        }
      }
      if (round >= 0) log(`list: round ${round + 1} of ${rounds}`);
    }
    const rows: ListRow[] = [];
    for (const store of LIST_STORES) {
      for (const request of LIST_REQUESTS) {
        const cell = samples.get(cellKey(store, request));
        if (cell === undefined) continue;
        rows.push({
          store,
          request,
          statuses: [...cell.statuses],
          bodyBytes: cell.bodyBytes,
          appMicros: median(cell.app),
          storeMicros: cell.store.length === 0 ? undefined : median(cell.store),
        });
      }
    }
    const redisVersion = /redis_version:([^\r\n]+)/.exec(await redis.info('server'))?.[1] ?? 'unknown';
    const postgresVersion = ((await pool.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0] as { v: string }).v;
    return {
      categories: LIST_CATEGORIES,
      rounds,
      requestsPerRound,
      rows,
      redisVersion,
      postgresVersion,
      postgresCpuUnmeasured: 'reason' in pgCpu ? pgCpu.reason : undefined,
      seconds: (Date.now() - startedAt) / 1000,
    };
  } finally {
    await redis.del(categoryRedisKeys(keyPrefix).records, categoryRedisKeys(keyPrefix).lastId).catch(() => undefined);
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    redis.disconnect();
    await pool.end();
    await Promise.all([redisServer.stop(), postgresServer.stop()]);
  }
}
