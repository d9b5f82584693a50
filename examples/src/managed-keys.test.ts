/**
 * The README's "Managed API keys" path: two examples on one PostgreSQL (and the same on one Redis), keys issued,
 * rotated and revoked with the `petstore` command (the build of @petstore/cli, run as an operator runs it). A key
 * issued by the command works on both; after a rotation the new key works and the old one still does (grace
 * period); after a revocation the other instance answers 401 — told by PostgreSQL's NOTIFY (Redis's PUBLISH), not
 * by its cache's TTL running out.
 *
 * No wall-clock assertion: the wait for the 401 is a bounded number of requests, each sent when the answer to the
 * one before has arrived (and the first once the test's own listener has seen the revocation's notification).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { resolveTestPostgres } from '@petstore/storage-postgres/testing';
import { resolveTestRedis } from '@petstore/storage-redis/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startExample, stopExamples } from './spawn-example.js';

const [postgres, redis] = await Promise.all([resolveTestPostgres(), resolveTestRedis()]);
if ('skipReason' in postgres) console.warn(`[examples] managed keys on PostgreSQL skipped: ${postgres.skipReason}`);
if ('skipReason' in redis) console.warn(`[examples] managed keys on Redis skipped: ${redis.skipReason}`);
afterAll(async () => {
  await Promise.all([postgres, redis].map((server) => ('stop' in server ? server.stop() : undefined)));
});

/** Resolves once the backend has sent a notification of a change of managed keys; `close()` stops listening. */
interface ChangeListener {
  notified: Promise<void>;
  close(): Promise<void>;
}

/** PostgreSQL: LISTEN on the channel the record store notifies, as the servers do. */
async function listenPostgres(url: string): Promise<ChangeListener> {
  const [{ default: pg }, { postgresApiKeysChannel }] = await Promise.all([import('pg'), import('@petstore/storage-postgres')]);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(`LISTEN "${postgresApiKeysChannel()}"`);
  const notified = new Promise<void>((resolve) => client.once('notification', () => resolve()));
  return { notified, close: () => client.end() };
}

/** Redis: SUBSCRIBE to the channel the record store publishes on, as the servers do. */
async function listenRedis(url: string): Promise<ChangeListener> {
  const [{ Redis }, { apiKeyRedisKeys }] = await Promise.all([import('ioredis'), import('@petstore/storage-redis')]);
  const client = new Redis(url);
  await client.subscribe(apiKeyRedisKeys().channel);
  const notified = new Promise<void>((resolve) => client.once('message', () => resolve()));
  return { notified, close: async () => void (await client.quit()) };
}

const backends = [
  {
    backend: 'PostgreSQL',
    variable: 'PETSTORE_DATABASE_URL',
    url: 'url' in postgres ? postgres.url : undefined,
    skipReason: 'skipReason' in postgres ? postgres.skipReason : undefined,
    listen: listenPostgres,
  },
  {
    backend: 'Redis',
    variable: 'PETSTORE_REDIS_URL',
    url: 'url' in redis ? redis.url : undefined,
    skipReason: 'skipReason' in redis ? redis.skipReason : undefined,
    listen: listenRedis,
  },
];

const run = randomBytes(4).toString('hex');
const STATIC_KEY = `static-${run}`;
/** The `petstore` command of the workspace's @petstore/cli. */
const PETSTORE_BIN = join(dirname(createRequire(import.meta.url).resolve('@petstore/cli/package.json')), 'bin', 'petstore.js');

/** Runs `petstore <args> --json` with `env` (the examples' variable); resolves with its JSON object. */
function petstore(args: string[], env: Record<string, string>): Promise<Record<string, unknown>> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('PETSTORE_')));
  const child = spawn(process.execPath, [PETSTORE_BIN, ...args, '--json'], {
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0) resolve(JSON.parse(stdout) as Record<string, unknown>);
      else reject(new Error(`petstore ${args.join(' ')} exited ${code}: ${stderr}`));
    });
  });
}

async function status(url: string, key: string): Promise<number> {
  const response = await fetch(`${url}/v1/categories`, { headers: { authorization: `Bearer ${key}` } });
  await response.arrayBuffer();
  return response.status;
}

/**
 * Sends requests with `key`, each once the answer to the one before has arrived, until one is answered `wanted`;
 * resolves with the statuses seen. Fails after `attempts` requests: the guard of a wait that has failed.
 */
async function untilStatus(url: string, key: string, wanted: number, attempts = 200): Promise<number[]> {
  const seen: number[] = [];
  for (let i = 0; i < attempts; i++) {
    seen.push(await status(url, key));
    if (seen.at(-1) === wanted) return seen;
  }
  throw new Error(`no ${wanted} in ${attempts} requests: ${[...new Set(seen)].join(', ')}`);
}

describe.each(backends)('examples with managed keys on $variable', ({ backend, variable, url, skipReason, listen }) => {
  const env = { [variable]: url ?? '' };
  let first = '';
  let second = '';
  beforeAll(async () => {
    if (skipReason !== undefined) return;
    const started = await Promise.all([
      startExample('fastify-server.ts', { ...env, PETSTORE_API_KEYS: `${STATIC_KEY}:pro` }),
      startExample('express-server.ts', { ...env, PETSTORE_API_KEYS: `${STATIC_KEY}:pro` }),
    ]);
    for (const server of started) expect(server.output).toContain(`Managed API keys are read from ${backend}`);
    [first, second] = started.map((server) => server.url) as [string, string];
  });
  afterAll(stopExamples);

  it('accept a key issued by the command; after a rotation both keys for the grace; after a revocation 401 on the other instance', async (context) => {
    if (skipReason !== undefined) return context.skip(skipReason);
    // Limits far above what the test sends: a 429 would hide the 401 being waited for.
    const issued = await petstore(['keys', 'issue', '--account', `acme-${run}`, '--plan', 'enterprise', '--limits', '100000:1000000'], env);
    const oldKey = issued['key'] as string;
    const keyId = issued['keyId'] as string;
    expect([await status(first, oldKey), await status(second, oldKey)]).toEqual([200, 200]);

    const rotated = await petstore(['keys', 'rotate', keyId, '--grace', '1h'], env);
    const newKey = rotated['key'] as string;
    expect(rotated['keyId']).toBe(keyId);
    // The second instance had the old key cached: it is told of the rotation and accepts both keys.
    expect([await status(first, newKey), await status(second, newKey)]).toEqual([200, 200]);
    expect([await status(first, oldKey), await status(second, oldKey)]).toEqual([200, 200]);

    // The test listens as the servers do, so it knows when the backend has sent the revocation's notification.
    const listener = await listen(url as string);
    try {
      expect(await petstore(['keys', 'revoke', keyId], env)).toMatchObject({ keyId, status: 'revoked' });
      await listener.notified;
    } finally {
      await listener.close();
    }
    // Cached and accepted a moment ago; refused now, long before its cache entry's TTL (30 s) would run out.
    const statuses = await untilStatus(second, newKey, 401);
    expect(statuses.filter((code) => code !== 200 && code !== 401)).toEqual([]);
    expect(await status(second, oldKey)).toBe(401);
    expect([await status(first, newKey), await status(first, oldKey)]).toEqual([401, 401]);
    // The configured key works beside the managed ones.
    expect([await status(first, STATIC_KEY), await status(second, STATIC_KEY)]).toEqual([200, 200]);
  }, 60_000);
});
