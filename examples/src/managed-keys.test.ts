/**
 * The README's "Managed API keys" path: two examples on one PostgreSQL (and the same on one Redis), keys issued,
 * rotated and revoked with the `petstore` command (@petstore/cli's `runCli`, what the command runs). A key
 * issued by the command works on both; after a rotation the new key works and the old one still does (grace
 * period); after a revocation the other instance answers 401 — told by PostgreSQL's NOTIFY (Redis's PUBLISH), not
 * by its cache's TTL running out.
 *
 * No wall-clock assertion: the wait for the 401 is a bounded number of requests, each sent when the answer to the
 * one before has arrived (and the first once the test's own listener has seen the revocation's notification).
 */
import { randomBytes } from 'node:crypto';
import { runCli } from '@petstore/cli';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { newDatabase } from '../test-support/database.js';
import { startExample, stopExamples } from './spawn-example.js';


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

const postgresUrl = inject('postgresUrl');
const backends = [
  {
    backend: 'PostgreSQL',
    variable: 'PETSTORE_DATABASE_URL',
    // A database of this file's own on the run's PostgreSQL (test-support/global-setup.ts).
    url: postgresUrl === null ? undefined : await newDatabase(postgresUrl, 'examples_managed_keys'),
    skipReason: inject('postgresSkipReason') ?? undefined,
    listen: listenPostgres,
  },
  {
    backend: 'Redis',
    variable: 'PETSTORE_REDIS_URL',
    url: inject('redisUrl') ?? undefined,
    skipReason: inject('redisSkipReason') ?? undefined,
    listen: listenRedis,
  },
];

const run = randomBytes(4).toString('hex');
const STATIC_KEY = `static-${run}`;

/**
 * Runs `petstore <args> --json` with `env` (the examples' variable) through `runCli`, what the built command runs
 * (packages/cli's usage tests start the built command itself; here a process per command would only add its
 * start-up); resolves with its JSON object.
 */
async function petstore(args: string[], env: Record<string, string>): Promise<Record<string, unknown>> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('PETSTORE_')));
  let stdout = '';
  let stderr = '';
  const code = await runCli([...args, '--json'], { env: { ...base, ...env }, stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) });
  if (code !== 0) throw new Error(`petstore ${args.join(' ')} exited ${code}: ${stderr}`);
  return JSON.parse(stdout) as Record<string, unknown>;
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
