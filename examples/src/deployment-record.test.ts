/**
 * The example servers' start-up (`examplePetstore`, in process) with PostgreSQL and Redis records where it keeps
 * each kind of data, and the `petstore` command (`runCli`, what it runs) obeys it: an account that used its whole
 * quota through the server is never shown "full quotas" to an operator who set PETSTORE_DATABASE_URL alone (what
 * the start-up banner names for keys); the command names PETSTORE_REDIS_URL instead, and with both shows the usage.
 * A PostgreSQL database and a Redis database of this file's own: the record steers every command given them.
 */
import { randomBytes } from 'node:crypto';
import { runCli } from '@petstore/cli';
import { afterAll, expect, inject, it, vi } from 'vitest';
import { newDatabase } from '../test-support/database.js';
import { readConfig } from './config.js';
import { examplePetstore, type ExamplePetstore } from './petstore.js';

const postgresUrl = inject('postgresUrl');
const redisUrl = inject('redisUrl');
const skipReason = inject('postgresSkipReason') ?? inject('redisSkipReason');
const databaseUrl = postgresUrl === null ? '' : await newDatabase(postgresUrl, 'examples_deployment');
/** Redis database 15: no other file's server or command uses it. */
const ownRedisUrl = redisUrl === null ? '' : Object.assign(new URL(redisUrl), { pathname: '/15' }).toString();
const run = randomBytes(4).toString('hex');

let api: ExamplePetstore | undefined;
afterAll(async () => {
  await api?.close();
});

/** `petstore <args>` with only `env` of the PETSTORE_* variables. */
async function petstore(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('PETSTORE_')));
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, { env: { ...base, ...env }, stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) });
  return { code, stdout, stderr };
}

it('limits in Redis, keys in PostgreSQL: limits show with PETSTORE_DATABASE_URL alone names PETSTORE_REDIS_URL (exit 2); with both it shows the quota used', async (context) => {
  if (skipReason !== null) return context.skip(skipReason);
  const both = { PETSTORE_DATABASE_URL: databaseUrl, PETSTORE_REDIS_URL: ownRedisUrl };
  // What start-up prints is kept, not printed: at most the warning about a Redis that keeps no data across a restart
  // (the throwaway one keeps none; its text is redis-persistence.test.ts's), and no setup warning of the petstore.
  const warned = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
  let lines: string[];
  try {
    api = await examplePetstore(readConfig({ ...both, PETSTORE_API_KEYS: `static-${run}:free` }));
  } finally {
    lines = warned.mock.calls.map((args) => args.join(' ')); // before mockRestore, which forgets the calls
    warned.mockRestore();
  }
  expect(lines.filter((line) => !/^\[petstore\] warning: Redis at \S+ keeps no data across a restart/.test(line))).toEqual([]);
  expect(lines.length).toBeLessThanOrEqual(1);
  const accountId = `acme-${run}`;
  const issued = await petstore(['keys', 'issue', '--account', accountId, '--plan', 'free', '--limits', '60:3', '--json'], both);
  expect(issued.code, issued.stderr).toBe(0);
  const { key } = JSON.parse(issued.stdout) as { key: string };
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) {
    const response = await api.petstore.fetch(new Request('http://localhost/v1/categories', { headers: { authorization: `Bearer ${key}` } }));
    statuses.push(response.status);
  }
  expect(statuses).toEqual([200, 200, 200, 429]);

  expect(await petstore(['limits', 'show', '--account', accountId], { PETSTORE_DATABASE_URL: databaseUrl })).toEqual({
    code: 2,
    stdout: '',
    stderr: 'petstore: rate limits are kept in Redis by the servers: set PETSTORE_REDIS_URL\n',
  });
  const shown = await petstore(['limits', 'show', '--account', accountId, '--json'], both);
  expect(shown.code, shown.stderr).toBe(0);
  expect((JSON.parse(shown.stdout) as { windows: unknown[] }).windows).toEqual([
    expect.objectContaining({ name: 'minute', limit: 60 }),
    expect.objectContaining({ name: 'day', limit: 3, used: 3, remaining: 0 }),
  ]);
});
