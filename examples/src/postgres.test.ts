/**
 * The examples on PETSTORE_DATABASE_URL, as the README shows them: two running examples — one Fastify, one
 * Express — share one quota and one set of categories in PostgreSQL; categories survive a restart of the
 * server; with PETSTORE_REDIS_URL too, categories stay in PostgreSQL and rate limits go to Redis.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { newDatabase } from '../test-support/database.js';
import { checkStartWithStalledWatch } from '../test-support/stalled-watch.js';
import { startExample, stopExamples, type RunningExample } from './spawn-example.js';

const postgresUrl = inject('postgresUrl');
const redisUrl = inject('redisUrl');
// A database of this file's own: the mixed setup below counts the rows of the examples' rate-limit table.
const databaseUrl = postgresUrl === null ? '' : await newDatabase(postgresUrl, 'examples_postgres');

const run = randomBytes(4).toString('hex'); // this run's keys and names, apart from earlier runs'
// 10 creates a day (and 1,000 a minute): the quota cannot reset in the middle of the test unless it runs across
// midnight UTC.
const LIMITED_KEY = `limited-${run}`;
const READER_KEY = `reader-${run}`;
const API_KEYS = `${LIMITED_KEY}:enterprise:1000:10,${READER_KEY}:pro`;

/**
 * `url` with Redis database `index`: the mixed server records there that its keys are in PostgreSQL, which a
 * `petstore` command of another test file given the shared Redis alone must not read. The CLI's test files use
 * databases 11 (keys purge: a record here made its commands refuse), 13 and 14; this file 12.
 */
function redisDatabase(url: string, index: number): string {
  const withIndex = new URL(url);
  withIndex.pathname = `/${index}`;
  return withIndex.toString();
}

async function createCategory(url: string, name: string, key = LIMITED_KEY): Promise<Response> {
  return fetch(`${url}/v1/categories`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name }),
  });
}

async function listedNames(url: string): Promise<string[]> {
  const listed = await fetch(`${url}/v1/categories`, { headers: { authorization: `Bearer ${READER_KEY}` } });
  expect(listed.status).toBe(200);
  return ((await listed.json()) as Array<{ name: string }>).map((category) => category.name);
}

/** SIGTERM, as a process manager sends it; the server exits 0 once it has shut down. */
async function stop(example: RunningExample): Promise<void> {
  example.child.kill('SIGTERM');
  expect(await example.exited).toEqual({ code: 0, signal: null });
}

describe.skipIf(postgresUrl === null)('examples on PETSTORE_DATABASE_URL', () => {
  afterAll(stopExamples);

  describe('two instances', () => {
    let urls: string[] = [];
    beforeAll(async () => {
      const env = { PETSTORE_DATABASE_URL: databaseUrl, PETSTORE_API_KEYS: API_KEYS };
      const started = await Promise.all([startExample('fastify-server.ts', env), startExample('express-server.ts', env)]);
      for (const server of started) expect(server.output).toContain('PostgreSQL storage (postgres://postgres@127.0.0.1:');
      urls = started.map((server) => server.url);
    });

    it('admit exactly the quota across both servers and list categories created on either', async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 16; i++) statuses.push((await createCategory(urls[i % 2] as string, `${run} ${i % 2 === 0 ? 'fastify' : 'express'} ${i}`)).status);
      expect(statuses).toEqual([...Array(10).fill(201), ...Array(6).fill(429)]);
      for (const url of urls) {
        const names = await listedNames(url);
        expect(names.filter((name) => name.startsWith(`${run} fastify`))).toHaveLength(5);
        expect(names.filter((name) => name.startsWith(`${run} express`))).toHaveLength(5);
      }
    });
  });

  it('keeps the categories across a restart of the server', async () => {
    // The server a user's `npm start` runs (npm-start.test.ts covers npm's own part: the build, the signals).
    const env = { PETSTORE_DATABASE_URL: databaseUrl, PETSTORE_API_KEYS: `${READER_KEY}:pro` };
    const first = await startExample('fastify-server.ts', env);
    expect((await createCategory(first.url, `${run} survives`, READER_KEY)).status).toBe(201);
    await stop(first);
    const second = await startExample('express-server.ts', env);
    expect((await listedNames(second.url)).filter((name) => name === `${run} survives`)).toHaveLength(1);
    await stop(second);
  });

  it('starts when its first key-change watch times out, serves meanwhile and watches once a retry gets through', async () => {
    // The server's stores give a call PETSTORE_CALL_TIMEOUT_MS; a busy database can take longer to open the LISTEN connection.
    await checkStartWithStalledWatch('PostgreSQL', databaseUrl, READER_KEY);
  }, 60_000);

  it('with PETSTORE_REDIS_URL too: categories in PostgreSQL, rate limits in Redis', async () => {
    if (redisUrl === null) return expect.fail(`needs Redis too: ${inject('redisSkipReason')}`);
    try {
      const key = `mixed-${run}`;
      const server = await startExample('fastify-server.ts', {
        PETSTORE_DATABASE_URL: databaseUrl,
        PETSTORE_REDIS_URL: redisDatabase(redisUrl, 12),
        PETSTORE_API_KEYS: `${key}:enterprise:1000:2,${READER_KEY}:pro`,
      });
      expect(server.output).toContain('PostgreSQL storage for categories');
      expect(server.output).toContain('Redis storage for rate limits');
      const { default: pg } = await import('pg');
      const client = new pg.Client({ connectionString: databaseUrl });
      await client.connect();
      const rateLimitRows = async () => (await client.query('SELECT count(*)::int AS n FROM petstore_rate_limits')).rows[0] as { n: number };
      try {
        const before = await rateLimitRows();
        const statuses = [];
        for (let i = 0; i < 3; i++) statuses.push((await createCategory(server.url, `${run} mixed ${i}`, key)).status);
        expect(statuses).toEqual([201, 201, 429]);
        expect((await listedNames(server.url)).filter((name) => name.startsWith(`${run} mixed`))).toHaveLength(2);
        // Counted in Redis: the database's rate-limit table gained no row.
        expect(await rateLimitRows()).toEqual(before);
        const categories = await client.query('SELECT count(*)::int AS n FROM petstore_categories WHERE name LIKE $1', [`${run} mixed %`]);
        expect(categories.rows[0]).toEqual({ n: 2 });
      } finally {
        await client.end();
      }
    } finally {
      stopExamples();
    }
  }, 60_000);
});
