/**
 * Configuration of the example servers, from the environment:
 *
 * - `PORT` (default 3000), `HOST` (default 127.0.0.1);
 * - `PETSTORE_API_KEYS`: comma-separated `key:plan` pairs, plan one of free, pro, business, enterprise;
 *   an enterprise key may carry its custom limits as `key:enterprise:<perMinute>:<perDay>`.
 *   Without it, a random demo key on the free plan is created and printed.
 * - `PETSTORE_DATABASE_URL`: when set (e.g. `postgres://user:pass@127.0.0.1:5432/petstore`), categories live in
 *   PostgreSQL, and so do rate limits unless `PETSTORE_REDIS_URL` is set too; the tables are created at start-up.
 * - `PETSTORE_REDIS_URL`: when set (e.g. `redis://127.0.0.1:6379`), rate limits live in Redis, and so do
 *   categories unless `PETSTORE_DATABASE_URL` is set too. Neither set: this process's memory.
 * - `PETSTORE_STORE_FAILURE` (or its older name `PETSTORE_REDIS_FAILURE`): while the rate-limit store (Redis or
 *   PostgreSQL) is unreachable, `closed` (default) answers 503 with `Retry-After`, `open` lets requests proceed,
 *   limited per process.
 * - `PETSTORE_STANDARD_HEADERS=1`: also send the draft-standard `RateLimit` / `RateLimit-Policy` headers.
 */
import { randomBytes } from 'node:crypto';
import { isPlanName, type StaticApiKey } from '@petstore/core';

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
  /** Send the draft-standard RateLimit headers too. */
  standardHeaders: boolean;
}

/**
 * Reads the configuration. Error messages name the position of a bad entry, never the key itself.
 * @throws Error on a bad `PORT` or `PETSTORE_API_KEYS`.
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
  const common = {
    port,
    host,
    databaseUrl,
    redisUrl,
    storeFailure: failure === 'open' ? ('fail-open' as const) : ('fail-closed' as const),
    standardHeaders: env['PETSTORE_STANDARD_HEADERS'] === '1',
  };
  const keysText = env['PETSTORE_API_KEYS']?.trim();
  if (!keysText) {
    const demoKey = `demo_${randomBytes(18).toString('base64url')}`;
    return { ...common, apiKeys: [{ key: demoKey, plan: 'free', accountId: 'demo' }], demoKey };
  }
  return { ...common, apiKeys: parseApiKeys(keysText), demoKey: undefined };
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

/** What a server prints once listening: where, and for a demo key a ready-to-paste curl line. */
export function startupBanner(config: ExampleConfig, url: string, framework: string): string {
  const storage = describeStorage(config);
  const lines = [`petstore categories API (${framework}, ${storage}) listening on ${url}/v1`];
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
    lines.push('Several instances share quotas only for shared keys: set the same PETSTORE_API_KEYS on each.');
  }
  return lines.join('\n');
}

/** Where categories and rate limits live, for the start-up line; URLs without their passwords. */
export function describeStorage(config: Pick<ExampleConfig, 'databaseUrl' | 'redisUrl'>): string {
  const { databaseUrl, redisUrl } = config;
  if (databaseUrl !== undefined && redisUrl !== undefined) {
    return `PostgreSQL storage for categories (${redactUrl(databaseUrl)}), Redis storage for rate limits (${redactUrl(redisUrl)})`;
  }
  if (databaseUrl !== undefined) return `PostgreSQL storage (${redactUrl(databaseUrl)})`;
  if (redisUrl !== undefined) return `Redis storage (${redactUrl(redisUrl)})`;
  return 'memory storage';
}

/** A Redis or PostgreSQL URL without its password, for printing. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'an unparseable URL';
  }
}
