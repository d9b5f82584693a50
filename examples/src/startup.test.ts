/**
 * An example server that cannot start says why in one line on stderr and exits 1 — no stack trace: the helper
 * on its own; the start-up steps both servers share (readConfig, examplePetstore) with each variable they cannot
 * use, in process; then both servers started as a user would, each with a variable it cannot use and a store
 * (PostgreSQL for one, Redis for the other) it cannot reach.
 */
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { runExampleToExit } from './spawn-example.js';
import { readConfig } from './config.js';
import { examplePetstore } from './petstore.js';
import { STARTUP_FAILURE_PREFIX, startOrExit, startupFailureLine } from './startup.js';

describe('startOrExit', () => {
  it('prints one line and exits 1 when start-up fails, and does neither when it succeeds', async () => {
    const lines: string[] = [];
    const exits: number[] = [];
    await startOrExit(
      async () => {
        throw new Error('PETSTORE_REDIS_URL: Redis at redis://127.0.0.1:1 failed at start-up: connect ECONNREFUSED 127.0.0.1:1');
      },
      (line) => lines.push(line),
      (code) => exits.push(code),
    );
    expect(lines).toEqual([`${STARTUP_FAILURE_PREFIX} PETSTORE_REDIS_URL: Redis at redis://127.0.0.1:1 failed at start-up: connect ECONNREFUSED 127.0.0.1:1`]);
    expect(exits).toEqual([1]);
    await startOrExit(async () => undefined, (line) => lines.push(line), (code) => exits.push(code));
    expect(lines).toHaveLength(1);
    expect(exits).toEqual([1]);
  });

  it('describes a start-up failure in one line, without the causes it already quotes', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' });
    const failure = new Error('PETSTORE_REDIS_URL: Redis at redis://127.0.0.1:1 failed at start-up: connect ECONNREFUSED 127.0.0.1:1', {
      cause: Object.assign(refused, { cause: new Error('Connection is closed.') }),
    });
    expect(startupFailureLine(failure)).toBe(`${STARTUP_FAILURE_PREFIX} ${failure.message}`);
    expect(startupFailureLine(new TypeError(''))).toBe(`${STARTUP_FAILURE_PREFIX} TypeError`);
  });
});

/** A loopback port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** A bad variable each, and the line that names it (the servers read them with readConfig and examplePetstore). */
const BAD_VARIABLES: Array<{ env: Record<string, string>; line: string }> = [
  { env: { REQUEST_TIMEOUT_MS: '30s' }, line: 'REQUEST_TIMEOUT_MS must be a positive whole number of milliseconds, not "30s"' },
  {
    env: { PETSTORE_STAGING_URL: 'https://staging.example.com/v2' },
    line: 'PETSTORE_STAGING_URL must be an absolute http(s) URL ending in /v1, such as https://api.example.com/v1, not "https://staging.example.com/v2"',
  },
  {
    env: { PETSTORE_OPERATION_COSTS: 'createCategory=5,deleteCategory=2' },
    line: 'PETSTORE_OPERATION_COSTS entry 2 ("deleteCategory=2"): deleteCategory is not one of listCategories, createCategory, getOpenApiDocument, getPetById, listStoreOrders, guard',
  },
  {
    env: { PETSTORE_OPERATION_COSTS: 'createCategory=61' },
    line: 'PETSTORE_OPERATION_COSTS: createPetstore: rateLimit.cost.createCategory is 61, more than rateLimit.plans.free.requestsPerMinute (60): such a request could never be admitted',
  },
  {
    env: { PETSTORE_RATE_LIMIT_ALGORITHM: 'gcra,free:slidng' },
    line: 'PETSTORE_RATE_LIMIT_ALGORITHM entry 2 ("free:slidng"): slidng is not one of fixed, sliding, gcra',
  },
];

describe('the servers\' start-up steps with a variable they cannot use', () => {
  // What both servers run first, in process: each bad variable is one line and exit 1 before anything listens.
  // The servers themselves are started below with the first of these (the line reaches stderr from either).
  it.each(BAD_VARIABLES)('$line', async ({ env, line }) => {
    const lines: string[] = [];
    const exits: number[] = [];
    await startOrExit(
      async () => {
        const config = readConfig({ PETSTORE_API_KEYS: 'startup-key:free', PORT: '0', ...env });
        const api = await examplePetstore(config);
        await api.close();
      },
      (printed) => lines.push(printed),
      (code) => exits.push(code),
    );
    expect(lines).toEqual([`${STARTUP_FAILURE_PREFIX} ${line}`]);
    expect(exits).toEqual([1]);
  });
});

// Each server with a variable it cannot use and with one of the two stores unreachable: the line naming the store
// comes from examplePetstore, which both share, so each store is tried on one server; that a failure becomes one
// line and exit 1 is each server's own start-up, tried on both. Two processes per server.
describe.each([
  ['fastify-server.ts', 'database'],
  ['express-server.ts', 'redis'],
] as const)('%s that cannot start', (script, store) => {
  it(`prints one line naming the variable, without the password or a stack trace, and exits 1 (a bad variable, an unreachable ${store === 'database' ? 'PostgreSQL' : 'Redis'})`, async () => {
    const port = await closedPort();
    const unreachable: { env: Record<string, string>; line: string } =
      store === 'database'
        ? {
            // The password as a query parameter (pg reads it there too).
            env: { PETSTORE_DATABASE_URL: `postgres://petstore@127.0.0.1:${port}/petstore?password=s3cret&sslmode=disable` },
            line: `PETSTORE_DATABASE_URL: PostgreSQL at postgres://petstore@127.0.0.1:${port}/petstore?password=***&sslmode=disable failed at start-up: connect ECONNREFUSED 127.0.0.1:${port}`,
          }
        : {
            // A password holding an unescaped @: the last @ ends the userinfo.
            env: { PETSTORE_REDIS_URL: `redis://:s3c@ret@127.0.0.1:${port}` },
            line: `PETSTORE_REDIS_URL: Redis at redis://:***@127.0.0.1:${port} failed at start-up: connect ECONNREFUSED 127.0.0.1:${port}`,
          };
    const cases = [unreachable, BAD_VARIABLES[0] as { env: Record<string, string>; line: string }];
    const runs = await Promise.all(cases.map(({ env }) => runExampleToExit(script, { PETSTORE_API_KEYS: 'startup-key:free', ...env })));
    runs.forEach((run, index) => {
      expect({ code: run.code, signal: run.signal, stderr: run.stderr, stdout: run.stdout }).toEqual({
        code: 1,
        signal: null,
        stderr: `${STARTUP_FAILURE_PREFIX} ${cases[index]?.line}\n`,
        stdout: '',
      });
    });
  }, 30_000);
});
