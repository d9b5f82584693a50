/**
 * Configuration of the example servers, from the environment:
 *
 * - `PORT` (default 3000), `HOST` (default 127.0.0.1);
 * - `PETSTORE_API_KEYS`: comma-separated `key:plan` pairs, plan one of free, pro, business, enterprise;
 *   an enterprise key may carry its custom limits as `key:enterprise:<perMinute>:<perDay>`.
 *   Without it, a random demo key on the free plan is created and printed.
 * - `PETSTORE_DATABASE_URL`: when set (e.g. `postgres://user:pass@127.0.0.1:5432/petstore`), categories and
 *   managed API keys live in PostgreSQL, and so do rate limits unless `PETSTORE_REDIS_URL` is set too; the tables
 *   are created at start-up.
 * - `PETSTORE_REDIS_URL`: when set (e.g. `redis://127.0.0.1:6379`), rate limits live in Redis, and so do
 *   categories and managed API keys unless `PETSTORE_DATABASE_URL` is set too. Neither set: this process's memory,
 *   and no managed keys.
 * - Managed API keys (either URL set) are issued, rotated and revoked with the `petstore` command of
 *   @petstore/cli, given the same variables; `PETSTORE_API_KEYS` (or the demo key) keep working beside them.
 * - `PETSTORE_STORE_FAILURE` (or its older name `PETSTORE_REDIS_FAILURE`): while the rate-limit store (Redis or
 *   PostgreSQL) is unreachable, `closed` (default) answers 503 with `Retry-After`, `open` lets requests proceed,
 *   limited per process.
 * - `PETSTORE_CALL_TIMEOUT_MS` (default 500): how long a call to PostgreSQL or Redis may take before the request
 *   gets the failure policy's answer (the stores' `callTimeoutMs`).
 * - `PETSTORE_STANDARD_HEADERS=1`: also send the draft-standard `RateLimit` / `RateLimit-Policy` headers.
 * - `PETSTORE_OPERATION_COSTS`: units each operation charges to the rate limit, comma-separated `name=units`
 *   (e.g. `createCategory=5,listCategories=1`); names are the operationIds and `guard`; unnamed ones cost 1.
 * - `PETSTORE_RATE_LIMIT_ALGORITHM`: how the windows count (`rateLimit.algorithm`): `fixed` (default), `sliding` or
 *   `gcra`; per plan, `plan:algorithm` entries beside it, and `anonymous:algorithm` for callers without a key
 *   (e.g. `gcra,free:sliding`). The store must implement each one (memory: all three).
 * - `PETSTORE_PUBLIC_URL`, `PETSTORE_STAGING_URL`: the Production and Staging addresses the OpenAPI description
 *   lists as its servers (absolute URLs ending in `/v1`); neither set: the relative server `/v1`.
 * - `PETSTORE_METRICS_PORT`: when set, the API's metrics in the Prometheus format at `/metrics` on that port
 *   (0: a free one), apart from the API's port (see metrics.ts), on `PETSTORE_METRICS_HOST` (default 127.0.0.1,
 *   whatever `HOST` is: `HOST=0.0.0.0` does not put the metrics on the network).
 * - `HEADERS_TIMEOUT_MS` (default 10,000), `REQUEST_TIMEOUT_MS` (default 30,000): how long a client may take to
 *   send its request head, and its whole request (Node's `server.headersTimeout` and `server.requestTimeout`);
 *   a connection that takes longer gets 408 and is closed.
 */
import { randomBytes } from 'node:crypto';
import type { ServerOptions } from 'node:http';
import { PLAN_NAMES, RATE_LIMIT_ALGORITHMS, isPlanName, type CostName, type PlanName, type RateLimitAlgorithm, type StaticApiKey } from '@petstore/core';
import { redactUrl } from '@petstore/internal';

/** The names `PETSTORE_OPERATION_COSTS` takes: the operationIds, and `guard` (host routes behind the guard). */
export const OPERATION_COST_NAMES = [
  'listCategories',
  'createCategory',
  'getOpenApiDocument',
  'getPetById',
  'listStoreOrders',
  'guard',
] as const satisfies readonly CostName[];

/**
 * Default of `HEADERS_TIMEOUT_MS`, in ms. A request head is at most 16 KiB (Node's limit) and arrives in well
 * under a second even on a poor mobile link; 10 s leaves room for a lossy one. (Node's own default is 60 s.)
 */
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;
/**
 * Default of `REQUEST_TIMEOUT_MS`, in ms: the whole request, head and body. The largest body the API accepts is
 * 1 MiB, which takes 30 s at 35 KB/s (a poor 3G link). (Node's own default is 300 s; Fastify's, none.)
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/**
 * Default of `PETSTORE_CALL_TIMEOUT_MS`, in ms: the `callTimeoutMs` of the PostgreSQL and Redis stores. Half the
 * stores' own default (1,000 ms): a store call on a healthy network answers in a few ms, and a request should
 * get the failure policy's answer (503 with `Retry-After`, or fail-open) soon rather than wait on a store that
 * has stopped answering.
 */
export const DEFAULT_CALL_TIMEOUT_MS = 500;

/** Default of `PETSTORE_METRICS_HOST`: loopback, so the metrics are not on the network unless asked. */
export const DEFAULT_METRICS_HOST = '127.0.0.1';

export interface ExampleConfig {
  port: number;
  host: string;
  apiKeys: StaticApiKey[];
  /** The generated demo key, when `PETSTORE_API_KEYS` was not set. */
  demoKey: string | undefined;
  /** PostgreSQL URL for categories (and rate limits without Redis), or `undefined`. */
  databaseUrl: string | undefined;
  /** Redis URL for rate limits (and categories without PostgreSQL), or `undefined`. */
  redisUrl: string | undefined;
  /** Policy while the rate-limit store is unreachable. */
  storeFailure: 'fail-closed' | 'fail-open';
  /** `callTimeoutMs` of every PostgreSQL and Redis store: most ms a store call may take. */
  callTimeoutMs: number;
  /** Send the draft-standard RateLimit headers too. */
  standardHeaders: boolean;
  /** Units per operation (`rateLimit.cost` of `createPetstore`) from `PETSTORE_OPERATION_COSTS`; `undefined` when unset. */
  operationCosts: Partial<Record<CostName, number>> | undefined;
  /**
   * `PETSTORE_RATE_LIMIT_ALGORITHM`: the algorithm of every window (`rateLimit.algorithm`), of each plan named and
   * of callers without a key; `undefined` when unset (every window fixed).
   */
  rateLimitAlgorithms: RateLimitAlgorithms | undefined;
  /** Node's `server.headersTimeout`: most ms a client may take to send its request head. */
  headersTimeoutMs: number;
  /** Node's `server.requestTimeout`: most ms a client may take to send its whole request (head and body). */
  requestTimeoutMs: number;
  /**
   * The servers of the OpenAPI description (`openapi.servers` of `createPetstore`): the Production and Staging
   * addresses, each ending in `/v1`; `undefined` when neither is set (the description's relative `/v1`).
   */
  openapiServers: { production?: string; staging?: string } | undefined;
  /** `PETSTORE_METRICS_PORT`: the port of the Prometheus endpoint (0: a free one); `undefined` when unset. */
  metricsPort: number | undefined;
  /** `PETSTORE_METRICS_HOST`: the address the Prometheus endpoint listens on. Default 127.0.0.1 (loopback only). */
  metricsHost: string;
}

/** What `PETSTORE_RATE_LIMIT_ALGORITHM` sets: the default algorithm, and those of the plans and callers it names. */
export interface RateLimitAlgorithms {
  /** `rateLimit.algorithm`: every plan not named; `undefined`: `fixed`. */
  algorithm: RateLimitAlgorithm | undefined;
  /** `rateLimit.plans.<plan>.algorithm` of each plan named. */
  plans: Partial<Record<PlanName, RateLimitAlgorithm>>;
  /** `rateLimit.anonymous.algorithm`, when named. */
  anonymous: RateLimitAlgorithm | undefined;
}

/**
 * Reads the configuration. Error messages name the variable (and the position of a bad API key entry, never
 * the key itself).
 * @throws Error on a bad `PORT`, `PETSTORE_API_KEYS`, `PETSTORE_STORE_FAILURE`, `PETSTORE_CALL_TIMEOUT_MS`, `HEADERS_TIMEOUT_MS`,
 *   `REQUEST_TIMEOUT_MS`, `PETSTORE_PUBLIC_URL`, `PETSTORE_STAGING_URL`, `PETSTORE_OPERATION_COSTS`,
 *   `PETSTORE_RATE_LIMIT_ALGORITHM` or `PETSTORE_METRICS_PORT`.
 */
export function readConfig(env: NodeJS.ProcessEnv = process.env): ExampleConfig {
  const port = env['PORT'] === undefined || env['PORT'] === '' ? 3000 : Number(env['PORT']);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new Error('PORT must be a port number (0-65535)');
  const host = env['HOST'] || '127.0.0.1';
  const databaseUrl = env['PETSTORE_DATABASE_URL']?.trim() || undefined;
  const redisUrl = env['PETSTORE_REDIS_URL']?.trim() || undefined;
  const failureVariable = env['PETSTORE_STORE_FAILURE'] !== undefined ? 'PETSTORE_STORE_FAILURE' : 'PETSTORE_REDIS_FAILURE';
  const failure = env[failureVariable]?.trim() || 'closed';
  if (failure !== 'closed' && failure !== 'open') throw new Error(`${failureVariable} must be "closed" or "open"`);
  const callTimeoutMs = positiveMs(env, 'PETSTORE_CALL_TIMEOUT_MS', DEFAULT_CALL_TIMEOUT_MS);
  const headersTimeoutMs = positiveMs(env, 'HEADERS_TIMEOUT_MS', DEFAULT_HEADERS_TIMEOUT_MS);
  const requestTimeoutMs = positiveMs(env, 'REQUEST_TIMEOUT_MS', DEFAULT_REQUEST_TIMEOUT_MS);
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new Error(`HEADERS_TIMEOUT_MS (${headersTimeoutMs}) must not exceed REQUEST_TIMEOUT_MS (${requestTimeoutMs}): the head is part of the request`);
  }
  const production = apiAddress(env, 'PETSTORE_PUBLIC_URL');
  const staging = apiAddress(env, 'PETSTORE_STAGING_URL');
  const common = {
    port,
    host,
    databaseUrl,
    redisUrl,
    storeFailure: failure === 'open' ? ('fail-open' as const) : ('fail-closed' as const),
    callTimeoutMs,
    standardHeaders: env['PETSTORE_STANDARD_HEADERS'] === '1',
    operationCosts: env['PETSTORE_OPERATION_COSTS']?.trim() ? parseOperationCosts(env['PETSTORE_OPERATION_COSTS']) : undefined,
    rateLimitAlgorithms: env['PETSTORE_RATE_LIMIT_ALGORITHM']?.trim() ? parseRateLimitAlgorithms(env['PETSTORE_RATE_LIMIT_ALGORITHM']) : undefined,
    headersTimeoutMs,
    requestTimeoutMs,
    metricsPort: readMetricsPort(env),
    // Not HOST: an API opened to the network must not open its metrics too.
    metricsHost: env['PETSTORE_METRICS_HOST']?.trim() || DEFAULT_METRICS_HOST,
    openapiServers:
      production === undefined && staging === undefined
        ? undefined
        : { ...(production !== undefined ? { production } : {}), ...(staging !== undefined ? { staging } : {}) },
  };
  const keysText = env['PETSTORE_API_KEYS']?.trim();
  if (!keysText) {
    const demoKey = `demo_${randomBytes(18).toString('base64url')}`;
    return { ...common, apiKeys: [{ key: demoKey, plan: 'free', accountId: 'demo' }], demoKey };
  }
  return { ...common, apiKeys: parseApiKeys(keysText), demoKey: undefined };
}

/**
 * `PETSTORE_METRICS_PORT` as a port number, or `undefined` when unset or empty.
 * @throws Error naming the variable for anything but a port number (0-65535)
 */
function readMetricsPort(env: NodeJS.ProcessEnv): number | undefined {
  const text = env['PETSTORE_METRICS_PORT']?.trim();
  if (!text) return undefined;
  const port = Number(text);
  if (!/^\d+$/.test(text) || port > 65_535) throw new Error('PETSTORE_METRICS_PORT must be a port number (0-65535)');
  return port;
}

/**
 * A whole number of milliseconds > 0 from `env[name]`, or `fallback` when it is unset or empty.
 * @throws Error naming the variable when it is anything else
 */
export function positiveMs(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const text = env[name]?.trim();
  if (!text) return fallback;
  const ms = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(ms) || ms <= 0) throw new Error(`${name} must be a positive whole number of milliseconds, not "${text}"`);
  return ms;
}

/**
 * An API address from `env[name]`: absolute, its path ending in `/v1` (the API contract's servers), or
 * `undefined` when it is unset or empty.
 * @throws Error naming the variable when it is anything else
 */
function apiAddress(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const text = env[name]?.trim();
  if (!text) return undefined;
  if (!URL.canParse(text) || !/\/v1\/?$/.test(new URL(text).pathname) || !/^https?:$/.test(new URL(text).protocol)) {
    throw new Error(`${name} must be an absolute http(s) URL ending in /v1, such as https://api.example.com/v1, not "${text}"`);
  }
  return text;
}

/**
 * The Node server options of an example server: `headersTimeout` and `requestTimeout` from the configuration,
 * and `connectionsCheckingInterval`, how often Node looks for connections past those timeouts (30 s by default,
 * which would let one outlive its timeout by up to 30 s): every second, or at each headers timeout when that is
 * shorter. A connection found past its timeout is answered 408 and closed.
 */
export function serverTimeouts(config: Pick<ExampleConfig, 'headersTimeoutMs' | 'requestTimeoutMs'>): ServerOptions {
  return {
    headersTimeout: config.headersTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    connectionsCheckingInterval: Math.min(1_000, config.headersTimeoutMs),
  };
}

/**
 * Parses `PETSTORE_API_KEYS`.
 * @throws Error naming the entry's position when an entry is malformed.
 */
export function parseApiKeys(text: string): StaticApiKey[] {
  const entries = text.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  return entries.map((entry, index) => {
    const where = `PETSTORE_API_KEYS entry ${index + 1}`;
    const [key, plan, perMinute, perDay, ...rest] = entry.split(':');
    if (!key || plan === undefined || rest.length > 0) throw new Error(`${where}: expected key:plan`);
    if (!isPlanName(plan)) throw new Error(`${where}: plan must be one of free, pro, business, enterprise`);
    if (perMinute === undefined && perDay === undefined) return { key, plan };
    const limits = { requestsPerMinute: Number(perMinute), requestsPerDay: Number(perDay) };
    if (plan !== 'enterprise' || !Number.isSafeInteger(limits.requestsPerMinute) || !Number.isSafeInteger(limits.requestsPerDay)) {
      throw new Error(`${where}: custom limits are written key:enterprise:<perMinute>:<perDay>`);
    }
    return { key, plan, limits };
  });
}

/**
 * Parses `PETSTORE_OPERATION_COSTS`: comma-separated `name=units`, each name once, units a whole number ≥ 1.
 * Whether a cost fits every plan is checked by `createPetstore` (the server then stops with its message).
 * @throws Error naming the variable and the entry's position when an entry is malformed.
 */
export function parseOperationCosts(text: string): Partial<Record<CostName, number>> {
  const costs: Partial<Record<CostName, number>> = {};
  const entries = text.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  for (const [index, entry] of entries.entries()) {
    const where = `PETSTORE_OPERATION_COSTS entry ${index + 1} ("${entry.slice(0, 60)}")`;
    const match = /^([A-Za-z]+)\s*=\s*(\d+)$/.exec(entry);
    if (match === null) throw new Error(`${where}: expected name=units, such as createCategory=5`);
    const [, name, units] = match as unknown as [string, string, string];
    if (!(OPERATION_COST_NAMES as readonly string[]).includes(name)) {
      throw new Error(`${where}: ${name} is not one of ${OPERATION_COST_NAMES.join(', ')}`);
    }
    if (Object.hasOwn(costs, name)) throw new Error(`${where}: ${name} is given twice`);
    const cost = Number(units);
    if (!Number.isSafeInteger(cost) || cost < 1) throw new Error(`${where}: the units must be a whole number >= 1`);
    costs[name as CostName] = cost;
  }
  return costs;
}

/**
 * Parses `PETSTORE_RATE_LIMIT_ALGORITHM`: comma-separated entries, at most one bare algorithm (`fixed`, `sliding`,
 * `gcra`: every plan's), and `plan:algorithm` entries (plans `free`, `pro`, `business`, `enterprise`, and
 * `anonymous` for callers without a key), each plan once. One variable, as `PETSTORE_API_KEYS` pairs keys with
 * plans: the per-plan choices sit beside the default they override.
 * @throws Error naming the variable and the entry's position when an entry is malformed.
 */
export function parseRateLimitAlgorithms(text: string): RateLimitAlgorithms {
  const result: RateLimitAlgorithms = { algorithm: undefined, plans: {}, anonymous: undefined };
  const algorithms = RATE_LIMIT_ALGORITHMS.join(', ');
  const entries = text.split(',').map((entry) => entry.trim()).filter((entry) => entry !== '');
  for (const [index, entry] of entries.entries()) {
    const where = `PETSTORE_RATE_LIMIT_ALGORITHM entry ${index + 1} ("${entry.slice(0, 60)}")`;
    const [first, second, ...rest] = entry.split(':').map((part) => part.trim());
    const [who, algorithm] = second === undefined ? [undefined, first as string] : [first as string, second];
    if (rest.length > 0 || who === '') throw new Error(`${where}: expected an algorithm (${algorithms}) or plan:algorithm, such as free:sliding`);
    if (!(RATE_LIMIT_ALGORITHMS as readonly string[]).includes(algorithm)) throw new Error(`${where}: ${algorithm || '(empty)'} is not one of ${algorithms}`);
    const chosen = algorithm as RateLimitAlgorithm;
    if (who === undefined) {
      if (result.algorithm !== undefined) throw new Error(`${where}: the algorithm of every plan is given twice`);
      result.algorithm = chosen;
    } else if (who === 'anonymous') {
      if (result.anonymous !== undefined) throw new Error(`${where}: anonymous is given twice`);
      result.anonymous = chosen;
    } else if (isPlanName(who)) {
      if (Object.hasOwn(result.plans, who)) throw new Error(`${where}: ${who} is given twice`);
      result.plans[who] = chosen;
    } else {
      throw new Error(`${where}: ${who} is not one of ${[...PLAN_NAMES, 'anonymous'].join(', ')}`);
    }
  }
  return result;
}

/** `PETSTORE_RATE_LIMIT_ALGORITHM` as the start-up line tells it: `gcra; free: sliding; anonymous: fixed`. */
export function describeRateLimitAlgorithms(algorithms: RateLimitAlgorithms): string {
  return [
    algorithms.algorithm ?? 'fixed',
    ...Object.entries(algorithms.plans).map(([plan, algorithm]) => `${plan}: ${algorithm}`),
    ...(algorithms.anonymous !== undefined ? [`anonymous: ${algorithms.anonymous}`] : []),
  ].join('; ');
}

/**
 * What a server prints once listening: where; where its metrics are (`metricsUrl`, with PETSTORE_METRICS_PORT); on
 * PostgreSQL or Redis, how to issue a managed key; and for a demo key a ready-to-paste curl line.
 */
export function startupBanner(config: ExampleConfig, url: string, framework: string, metricsUrl?: string): string {
  const storage = describeStorage(config);
  const lines = [`petstore categories API (${framework}, ${storage}) listening on ${url}/v1`, `API reference (open it in a browser): ${url}/v1/docs`];
  if (metricsUrl !== undefined) lines.push(`Prometheus metrics (PETSTORE_METRICS_PORT, PETSTORE_METRICS_HOST) at ${metricsUrl}`);
  if (config.rateLimitAlgorithms !== undefined) {
    lines.push(`Rate-limit algorithm (PETSTORE_RATE_LIMIT_ALGORITHM): ${describeRateLimitAlgorithms(config.rateLimitAlgorithms)}`);
  }
  const managedIn = config.databaseUrl !== undefined ? 'PostgreSQL' : config.redisUrl !== undefined ? 'Redis' : undefined;
  if (managedIn !== undefined) {
    const variable = managedIn === 'PostgreSQL' ? 'PETSTORE_DATABASE_URL' : 'PETSTORE_REDIS_URL';
    lines.push(
      `Managed API keys are read from ${managedIn}: issue one with the same ${variable} set, e.g.`,
      `  npx petstore keys issue --account acme --plan free`,
    );
    if (config.databaseUrl !== undefined && config.redisUrl !== undefined) {
      lines.push(`Rate limits are kept in Redis: petstore limits show|reset needs PETSTORE_REDIS_URL set too.`);
    }
  }
  if (config.demoKey !== undefined) {
    lines.push(
      `PETSTORE_API_KEYS is not set, so a demo key on the free plan was created for this run (a new one, with full`,
      `quotas, at every start). Paste the next line into your shell as it is; the README's curl lines use $KEY:`,
      `KEY=${config.demoKey}`,
      `Try it:`,
      `  curl -i -H "Authorization: Bearer $KEY" ${url}/v1/categories`,
      `  curl -i -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -d '{"name":"Dogs","description":"Canine breeds"}' ${url}/v1/categories`,
    );
  } else {
    lines.push(`${config.apiKeys.length} API key(s) loaded from PETSTORE_API_KEYS.`);
  }
  if ((config.redisUrl !== undefined || config.databaseUrl !== undefined) && config.demoKey !== undefined) {
    lines.push('Several instances share quotas only for shared keys: issue managed keys, or set the same PETSTORE_API_KEYS on each.');
  }
  return lines.join('\n');
}

/** Where categories and rate limits live, for the start-up line; URLs without their secrets. */
export function describeStorage(config: Pick<ExampleConfig, 'databaseUrl' | 'redisUrl'>): string {
  const { databaseUrl, redisUrl } = config;
  if (databaseUrl !== undefined && redisUrl !== undefined) {
    return `PostgreSQL storage for categories (${redactUrl(databaseUrl)}), Redis storage for rate limits (${redactUrl(redisUrl)})`;
  }
  if (databaseUrl !== undefined) return `PostgreSQL storage (${redactUrl(databaseUrl)})`;
  if (redisUrl !== undefined) return `Redis storage (${redactUrl(redisUrl)})`;
  return 'memory storage';
}

export { redactUrl } from '@petstore/internal';
