/**
 * Two running examples — one Fastify, one Express — with the same PETSTORE_REDIS_URL share one quota and one
 * set of categories, as the README's "several instances" section shows.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { checkStartWithStalledWatch } from '../test-support/stalled-watch.js';
import { startExample, stopExamples } from './spawn-example.js';

const redisUrl = inject('redisUrl');

const run = randomBytes(4).toString('hex'); // this run's keys and names, apart from earlier runs'
const LIMITED_KEY = `limited-${run}`;
const READER_KEY = `reader-${run}`;

describe.skipIf(redisUrl === null)('examples on PETSTORE_REDIS_URL', () => {
  let urls: string[] = [];
  beforeAll(async () => {
    const env = {
      PETSTORE_REDIS_URL: redisUrl ?? '',
      // 10 a day (and 1,000 a minute): the quota cannot reset during the test unless it runs across midnight UTC.
      PETSTORE_API_KEYS: `${LIMITED_KEY}:enterprise:1000:10,${READER_KEY}:pro`,
    };
    const started = await Promise.all([startExample('fastify-server.ts', env), startExample('express-server.ts', env)]);
    for (const server of started) expect(server.output).toContain('Redis storage');
    urls = started.map((server) => server.url);
  });
  afterAll(stopExamples);

  it('admits exactly the quota across both servers and lists categories created on either', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 16; i++) {
      const response = await fetch(`${urls[i % 2]}/v1/categories`, {
        method: 'POST',
        headers: { authorization: `Bearer ${LIMITED_KEY}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `${run} ${i % 2 === 0 ? 'fastify' : 'express'} ${i}` }),
      });
      statuses.push(response.status);
    }
    expect(statuses.slice(0, 10).every((status) => status === 201)).toBe(true);
    expect(statuses.slice(10).every((status) => status === 429)).toBe(true);
    for (const url of urls) {
      const listed = await fetch(`${url}/v1/categories`, { headers: { authorization: `Bearer ${READER_KEY}` } });
      const names = ((await listed.json()) as Array<{ name: string }>).map((category) => category.name);
      expect(names.filter((name) => name.startsWith(`${run} fastify`))).toHaveLength(5);
      expect(names.filter((name) => name.startsWith(`${run} express`))).toHaveLength(5);
    }
  }, 60_000);

  it('starts when its first key-change watch times out, serves meanwhile and watches once a retry gets through', async () => {
    // The server's stores give a call PETSTORE_CALL_TIMEOUT_MS; the watch's subscribe, on its own connection, gets no answer here.
    await checkStartWithStalledWatch('Redis', redisUrl ?? '', READER_KEY);
  }, 60_000);
});
