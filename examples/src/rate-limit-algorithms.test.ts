/**
 * `PETSTORE_RATE_LIMIT_ALGORITHM=sliding npm start` and `=gcra`: the example server (its build, PORT=0) serves the
 * README's curl lines with the headers docs/http-api.md ("Algorithms") gives for that algorithm. The server runs on
 * the real clock, so each time-dependent value is checked against the instants before and after the requests.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startExample, stopExamples } from './spawn-example.js';

afterEach(stopExamples);

const KEY = 'algorithms-free-key';
const MINUTE_MS = 60_000;

interface Answer {
  status: number;
  headers: Headers;
  body: unknown;
}

async function send(url: string, init: { method?: string; json?: unknown } = {}): Promise<Answer> {
  const response = await fetch(url, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${KEY}`, ...(init.json !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(init.json !== undefined ? { body: JSON.stringify(init.json) } : {}),
  });
  return { status: response.status, headers: response.headers, body: await response.json() };
}

const header = (answer: Answer, name: string) => Number(answer.headers.get(name));

/** The README's "Try it with curl": three creates and a list, then requests until the first 429. */
async function readmeRequests(api: string) {
  const beforeMs = Date.now();
  const created = await send(`${api}/categories`, { method: 'POST', json: { name: 'Dogs', description: 'Canine breeds' } });
  for (const name of ['Cats', 'Birds']) expect((await send(`${api}/categories`, { method: 'POST', json: { name } })).status).toBe(201);
  const listed = await send(`${api}/categories`);
  const afterMs = Date.now();
  let limited: Answer | undefined;
  // The README's loop, bounded: 60 a minute (and a day of 1,000) end it well before.
  for (let sent = 0; sent < 1_000 && limited === undefined; sent++) {
    const answer = await send(`${api}/categories`);
    if (answer.status === 429) limited = answer;
  }
  return { beforeMs, afterMs, created, listed, limited: limited as Answer };
}

describe('the example server with PETSTORE_RATE_LIMIT_ALGORITHM', () => {
  it('sliding: says so at start-up and in the description; the curl lines count as documented, the 429 sends the client back no later than the window after next', async () => {
    const { url, output } = await startExample('fastify-server.ts', { PETSTORE_API_KEYS: `${KEY}:free`, PETSTORE_RATE_LIMIT_ALGORITHM: 'sliding' });
    expect(output).toContain('Rate-limit algorithm (PETSTORE_RATE_LIMIT_ALGORITHM): sliding\n');
    const description = (await (await fetch(`${url}/v1/openapi.json`)).json()) as Record<string, { plans: Record<string, unknown> }>;
    expect(description['x-rate-limits']?.plans['free']).toEqual({ requestsPerMinute: 60, requestsPerDay: 1_000, algorithm: 'sliding' });

    const { beforeMs, afterMs, created, listed, limited } = await readmeRequests(`${url}/v1`);
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ id: 1, name: 'Dogs', description: 'Canine breeds' });
    expect([header(created, 'x-ratelimit-limit'), header(created, 'x-ratelimit-remaining')]).toEqual([60, 59]);
    // Four units held, whatever minute each fell in (the earlier minute still weighs them in full for a while).
    expect([listed.status, header(listed, 'x-ratelimit-remaining')]).toEqual([200, 56]);
    // The quota is whole again at the end of the minute after the current one: a whole minute, in seconds.
    const reset = header(listed, 'x-ratelimit-reset');
    expect(reset % 60).toBe(0);
    expect(reset * 1000).toBeGreaterThanOrEqual(Math.floor(beforeMs / MINUTE_MS) * MINUTE_MS + 2 * MINUTE_MS);
    expect(reset * 1000).toBeLessThanOrEqual(Math.floor(afterMs / MINUTE_MS) * MINUTE_MS + 2 * MINUTE_MS);

    expect(limited.body).toMatchObject({ code: 'rate_limited', status: 429 });
    expect(header(limited, 'x-ratelimit-remaining')).toBe(0);
    // At most a minute and a second: the minute's end, then one unit's share of the next.
    expect(header(limited, 'retry-after')).toBeGreaterThanOrEqual(1);
    expect(header(limited, 'retry-after')).toBeLessThanOrEqual(61);
  }, 30_000);

  it('gcra: says so at start-up and in the description; the curl lines count as documented, and the 429 answers Retry-After: 1 (one unit back each second)', async () => {
    const { url, output } = await startExample('fastify-server.ts', { PETSTORE_API_KEYS: `${KEY}:free`, PETSTORE_RATE_LIMIT_ALGORITHM: 'gcra' });
    expect(output).toContain('Rate-limit algorithm (PETSTORE_RATE_LIMIT_ALGORITHM): gcra\n');
    const description = (await (await fetch(`${url}/v1/openapi.json`)).json()) as Record<string, { plans: Record<string, unknown> }>;
    expect(description['x-rate-limits']?.plans['free']).toEqual({ requestsPerMinute: 60, requestsPerDay: 1_000, algorithm: 'gcra' });

    const { beforeMs, afterMs, created, listed, limited } = await readmeRequests(`${url}/v1`);
    expect(created.status).toBe(201);
    expect([header(created, 'x-ratelimit-limit'), header(created, 'x-ratelimit-remaining')]).toEqual([60, 59]);
    // One unit per second drains; the whole burst is back 4 seconds after the first request, wherever the minute.
    expect(listed.status).toBe(200);
    expect(header(listed, 'x-ratelimit-remaining')).toBeGreaterThanOrEqual(56);
    expect(header(listed, 'x-ratelimit-remaining')).toBeLessThanOrEqual(60 - Math.ceil((4 * MINUTE_MS - 60 * (afterMs - beforeMs)) / MINUTE_MS));
    const reset = header(listed, 'x-ratelimit-reset');
    expect(reset * 1000).toBeGreaterThanOrEqual(beforeMs + 4_000);
    expect((reset - 1) * 1000).toBeLessThan(afterMs + 4_000);

    expect(limited.body).toMatchObject({ code: 'rate_limited', status: 429 });
    expect(header(limited, 'x-ratelimit-remaining')).toBe(0);
    expect(limited.headers.get('retry-after')).toBe('1');
  }, 30_000);
});
