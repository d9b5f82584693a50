import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import {
  DEFAULT_ANONYMOUS_LIMITS,
  DEFAULT_PLAN_LIMITS,
  PETSTORE_API_KEY_WATCH_CHANNEL,
  PLAN_NAMES,
  createPetstore,
  managedApiKeys,
  staticApiKeys,
  type ApiKeyRecordStore,
  type CategoryStore,
  type ManagedApiKeys,
  type Petstore,
  type PetstoreApiKeyWatchMessage,
  type PetstoreRateLimitOptions,
  type RateLimitStore,
  type StoreFailurePolicy,
} from '@petstore/core';
import { recordDeployment, type PetstoreDeployment } from '@petstore/cli';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { redactUrl, type ExampleConfig } from './config.js';
import { exampleHandlers } from './host-operations.js';
import { redisPersistenceWarning } from './redis-persistence.js';
import { describeError, redactSecrets } from '@petstore/internal';

/** What both storage setups share: the host's operations, their stability and deprecation. */
const hostOptions = {
  handlers: exampleHandlers,
  // The API reference page at /v1/docs (Swagger UI, from the swagger-ui-dist package).
  docs: true,
  stability: { listStoreOrders: 'beta' },
  // Deprecated, its sunset announced (Deprecation, Sunset and Link headers). afterSunset 'serve' keeps it answering
  // after that date, so the example never changes behaviour on a date; the default, 'gone', answers 410 from then on.
  deprecations: {
    getPetById: {
      deprecatedAtMs: Date.UTC(2026, 0, 1),
      sunsetAtMs: Date.UTC(2030, 0, 1),
      documentationUrl: 'https://petstore.example/docs/deprecations#get-pet-by-id',
      sunsetUrl: 'https://petstore.example/docs/deprecations#get-pet-by-id-sunset',
      afterSunset: 'serve',
    },
  },
} satisfies Partial<Parameters<typeof createPetstore>[0]>;

/** The API of an example server, and how to release what it holds. */
export interface ExamplePetstore {
  petstore: Petstore;
  close(): Promise<void>;
}

/**
 * The API on memory storage, or on PostgreSQL and/or Redis when their URLs are set.
 *
 * Memory: anonymous callers get their own rate-limit store (the default), so a flood of client addresses cannot
 * evict the counters of real API keys.
 *
 * PostgreSQL (`config.databaseUrl`): one pg pool for both stores; categories live there, and rate limits too
 * unless Redis is configured. The tables are created (or brought up to date) by `migratePostgres` before the
 * server listens. The pool's `'error'` listener keeps a dropped idle connection from ending the process; the
 * pool opens new connections by itself.
 *
 * Redis (`config.redisUrl`): one ioredis client; rate limits live there, and categories too unless PostgreSQL is
 * configured. `enableOfflineQueue: false` makes commands fail at once while Redis is unreachable instead of
 * queueing (a queued create could run long after its request got a 503); ioredis reconnects by itself with
 * backoff. At start-up, a Redis that keeps no data across a restart (neither RDB snapshots nor an append-only
 * file) gets one warning line on stderr: a restart would reset every counter and ban.
 *
 * Reset times come from the rate-limit store's clock (Redis's or PostgreSQL's).
 *
 * Each store configured records at start-up where the server keeps each kind of data (`recordDeployment` of
 * @petstore/cli: the table `petstore_deployment`, the Redis key `petstore:deployment`), so that the `petstore`
 * command refuses, naming the missing variable, when it is given only some of the servers' variables.
 *
 * Managed API keys (PostgreSQL or Redis): the keys an operator issues, rotates and revokes with the `petstore`
 * command (@petstore/cli) live beside the categories — in PostgreSQL when it is configured, else in Redis — and
 * are asked first (`managedApiKeys`, with its cache, told of every change by LISTEN/NOTIFY or pub/sub); the
 * configured or demo keys (`staticApiKeys`) keep working beside them.
 *
 * The PostgreSQL and Redis packages (and their clients) are imported only when configured: a server on memory
 * storage starts without loading them.
 *
 * The OpenAPI description lists `config.openapiServers` (Production, Staging) when set.
 *
 * @throws Error naming the variable (`PETSTORE_DATABASE_URL`, `PETSTORE_REDIS_URL`) and the URL without its
 *   password when PostgreSQL or Redis cannot be reached (or the tables cannot be created) at start-up; nothing
 *   is left open then
 */
export async function examplePetstore(config: ExampleConfig): Promise<ExamplePetstore> {
  const common = { ...hostOptions, ...(config.openapiServers !== undefined ? { openapi: { servers: config.openapiServers } } : {}) };
  if (config.redisUrl === undefined && config.databaseUrl === undefined) {
    return {
      petstore: createNamingCosts({
        ...common,
        apiKeys: staticApiKeys(config.apiKeys),
        categories: memoryCategoryStore(),
        // Callers without a key get a second store like this one (its newStore()), so a flood of client
        // addresses cannot evict the counters of API keys.
        rateLimit: {
          store: memoryRateLimitStore({ maxKeys: 100_000 }),
          standardHeaders: config.standardHeaders,
          ...costsOf(config),
          ...algorithmsOf(config),
        },
      }),
      close: async () => undefined,
    };
  }
  const closers: Array<() => Promise<void>> = [];
  let managed: ManagedApiKeys | undefined;
  // The key manager first (it stops watching for changes), then the clients it used.
  const close = async () => {
    await managed?.close();
    await Promise.all(closers.map((closeOne) => closeOne()));
  };
  let categories: CategoryStore | undefined;
  let store: RateLimitStore | undefined;
  let keyRecords: ApiKeyRecordStore | undefined;
  // Where each kind of data lives, recorded beside the data for the `petstore` command (see below).
  const deployment: PetstoreDeployment = {
    apiKeys: config.databaseUrl !== undefined ? 'postgresql' : 'redis',
    categories: config.databaseUrl !== undefined ? 'postgresql' : 'redis',
    rateLimits: config.redisUrl !== undefined ? 'redis' : 'postgresql',
  };
  try {
    if (config.databaseUrl !== undefined) {
      const url = config.databaseUrl;
      const [{ default: pg }, { migratePostgres, postgresApiKeyRecordStore, postgresCategoryStore, postgresRateLimitStore }] = await Promise.all([
        import('pg'),
        import('@petstore/storage-postgres'),
      ]);
      // A connection attempt gives up after 10 s (as ioredis's connectTimeout), not the operating system's minutes.
      const pool = new pg.Pool({ connectionString: url, max: 10, connectionTimeoutMillis: 10_000 });
      pool.on('error', () => undefined); // a dropped idle connection; requests report failures through the policy
      closers.push(() => pool.end());
      await migratePostgres({ pool }).catch((error: unknown) => {
        throw new Error(`PETSTORE_DATABASE_URL: PostgreSQL at ${redactUrl(url)} failed at start-up: ${describeError(error, { causes: false })}`, { cause: error });
      });
      // So that `petstore` given only some of these variables refuses, naming the missing one, rather than read an
      // empty store (e.g. `petstore limits show` with PETSTORE_DATABASE_URL alone while the limits are in Redis).
      await recordDeployment(deployment, { pool }).catch((error: unknown) => {
        throw new Error(`PETSTORE_DATABASE_URL: PostgreSQL at ${redactUrl(url)} failed at start-up: cannot record where this server keeps its data: ${describeError(error, { causes: false })}`, { cause: error });
      });
      categories = postgresCategoryStore({ pool, callTimeoutMs: config.callTimeoutMs });
      store = postgresRateLimitStore({ pool, callTimeoutMs: config.callTimeoutMs });
      keyRecords = postgresApiKeyRecordStore({ pool, callTimeoutMs: config.callTimeoutMs });
    }
    if (config.redisUrl !== undefined) {
      const url = config.redisUrl;
      const [{ Redis }, { redisApiKeyRecordStore, redisCategoryStore, redisRateLimitStore }] = await Promise.all([
        import('ioredis'),
        import('@petstore/storage-redis'),
      ]);
      const client = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: true });
      // Reported per request through the failure policy; the last one also explains a failed start-up, where
      // connect() itself only rejects with "Connection is closed.".
      let lastError: unknown;
      client.on('error', (error: unknown) => {
        lastError = error;
      });
      closers.push(async () => {
        await client.quit().catch(() => client.disconnect());
      });
      await client.connect().catch((error: unknown) => {
        throw new Error(`PETSTORE_REDIS_URL: Redis at ${redactUrl(url)} failed at start-up: ${describeError(lastError ?? error, { causes: false })}`, { cause: error });
      });
      // One line on stderr, never a failure: a Redis whose CONFIG is refused says nothing here.
      const warning = await redisPersistenceWarning(client, redactUrl(url));
      if (warning !== undefined) console.warn(warning);
      await recordDeployment(deployment, { redis: client }).catch((error: unknown) => {
        throw new Error(`PETSTORE_REDIS_URL: Redis at ${redactUrl(url)} failed at start-up: cannot record where this server keeps its data: ${describeError(error, { causes: false })}`, { cause: error });
      });
      categories ??= redisCategoryStore({ client, callTimeoutMs: config.callTimeoutMs });
      store = redisRateLimitStore({ client, callTimeoutMs: config.callTimeoutMs });
      keyRecords ??= redisApiKeyRecordStore({ client, callTimeoutMs: config.callTimeoutMs });
    }
  } catch (error) {
    await close();
    throw error;
  }
  const storeName = config.redisUrl !== undefined ? 'Redis' : 'PostgreSQL';
  const onStoreFailure: StoreFailurePolicy =
    config.storeFailure === 'fail-open'
      ? { mode: 'fail-open', insuranceStore: memoryRateLimitStore({ maxKeys: 100_000 }) }
      : { mode: 'fail-closed', retryAfterSeconds: 5 };
  let lastReport = 0;
  let petstore: Petstore;
  try {
    // The library logs nothing itself: one line when the key-change watch is lost, one when it is back.
    const onWatchChange = (message: unknown) => {
      const { state, previousState, error } = message as PetstoreApiKeyWatchMessage;
      if (state === 'disconnected' && previousState === 'watching') {
        console.error(`[petstore] key-change watch lost (${error?.message ?? 'no reason given'}); checking keys at the store until it is back`);
      } else if (state === 'watching' && previousState === 'disconnected') {
        console.error('[petstore] key-change watch is back; cached keys are trusted again');
      }
    };
    subscribe(PETSTORE_API_KEY_WATCH_CHANNEL, onWatchChange);
    closers.push(async () => void unsubscribe(PETSTORE_API_KEY_WATCH_CHANNEL, onWatchChange));
    managed = managedApiKeys({ store: keyRecords as ApiKeyRecordStore });
    // Listening for the store's notifications before the server takes requests: a key revoked from then on is
    // refused by this instance as soon as the revocation commits. When the first watch fails (its connection slow
    // past PETSTORE_CALL_TIMEOUT_MS on a busy database, say) the server starts anyway: the manager checks every key at the
    // store until its retries (after 1 s, doubling) get the watch, so a revocation is still obeyed at once.
    await managed.ready().catch((error: unknown) => {
      // The store's own error (ready() wraps it in the API's 503 error, whose message is for HTTP clients).
      const reason = error instanceof Error && error.cause !== undefined ? error.cause : error;
      const message = redactSecrets(describeError(reason), [config.databaseUrl, config.redisUrl]);
      console.error(`[petstore] key-change watch not started (${message}); checking keys at the store until it starts`);
    });
    petstore = createNamingCosts({
      ...common,
      // Managed keys first: a key of their format is looked up there (a cached answer, mostly); any other key goes
      // on to the configured ones.
      apiKeys: [managed, staticApiKeys(config.apiKeys)],
      categories: categories as CategoryStore,
      rateLimit: {
        store: store as RateLimitStore,
        onStoreFailure,
        standardHeaders: config.standardHeaders,
        ...costsOf(config),
        ...algorithmsOf(config),
        onStoreError: (error) => {
          // At most one line every 10 s while the store is away.
          if (Date.now() - lastReport < 10_000) return;
          lastReport = Date.now();
          const message = redactSecrets((error as Error).message, [config.databaseUrl, config.redisUrl]);
          console.error(`[petstore] ${storeName} unavailable (${config.storeFailure}): ${message}`);
        },
      },
    });
  } catch (error) {
    await close();
    throw error;
  }
  return { petstore, close };
}

/** `rateLimit.cost` from `PETSTORE_OPERATION_COSTS`, when set. */
function costsOf(config: ExampleConfig): { cost?: NonNullable<ExampleConfig['operationCosts']> } {
  return config.operationCosts === undefined ? {} : { cost: config.operationCosts };
}

/**
 * `rateLimit.algorithm`, and the plans and anonymous policy (their default limits) with their own algorithm, from
 * `PETSTORE_RATE_LIMIT_ALGORITHM`, when set.
 */
function algorithmsOf(config: ExampleConfig): Pick<PetstoreRateLimitOptions, 'algorithm' | 'plans' | 'anonymous'> {
  const chosen = config.rateLimitAlgorithms;
  if (chosen === undefined) return {};
  const plans: NonNullable<PetstoreRateLimitOptions['plans']> = {};
  for (const plan of PLAN_NAMES) {
    const algorithm = chosen.plans[plan];
    if (algorithm !== undefined) plans[plan] = { ...DEFAULT_PLAN_LIMITS[plan], algorithm };
  }
  return {
    ...(chosen.algorithm !== undefined ? { algorithm: chosen.algorithm } : {}),
    ...(Object.keys(plans).length > 0 ? { plans } : {}),
    ...(chosen.anonymous !== undefined ? { anonymous: { ...DEFAULT_ANONYMOUS_LIMITS, algorithm: chosen.anonymous } } : {}),
  };
}

/**
 * `createPetstore`, whose refusal of a cost (one above a plan's limit: a request that could never be admitted)
 * or of an algorithm (one the rate-limit store does not implement) names the variable it came from.
 * @throws Error `PETSTORE_OPERATION_COSTS: createPetstore: rateLimit.cost.<name> is …` for such a cost,
 *   `PETSTORE_RATE_LIMIT_ALGORITHM: …` for such an algorithm; the TypeError of `createPetstore` otherwise
 */
function createNamingCosts(options: Parameters<typeof createPetstore>[0]): Petstore {
  try {
    return createPetstore(options);
  } catch (error) {
    if (error instanceof TypeError && error.message.includes('rateLimit.cost.')) {
      throw new Error(`PETSTORE_OPERATION_COSTS: ${error.message}`, { cause: error });
    }
    if (error instanceof TypeError && /does not implement the \w+ algorithm/.test(error.message)) {
      throw new Error(`PETSTORE_RATE_LIMIT_ALGORITHM: ${error.message}`, { cause: error });
    }
    throw error;
  }
}
