/**
 * Starts each example server as a user would (`tsx src/<server>.ts`, PORT=0) and talks to it over HTTP.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startExample as start, stopExamples } from './spawn-example.js';

afterEach(stopExamples);

describe.each(['fastify-server.ts', 'express-server.ts'])('example %s', (script) => {
  it('prints a demo key that works with the printed curl line', async () => {
    const { url, output } = await start(script, { PETSTORE_API_KEYS: '' });
    const key = /Authorization: Bearer (demo_[A-Za-z0-9_-]+)/.exec(output)?.[1];
    expect(key).toBeDefined();
    const created = await fetch(`${url}/v1/categories`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Dogs', description: 'Canine breeds' }),
    });
    expect(created.status).toBe(201);
    expect(await created.json()).toEqual({ id: 1, name: 'Dogs', description: 'Canine breeds' });
    const listed = await fetch(`${url}/v1/categories`, { headers: { authorization: `Bearer ${key}` } });
    expect(listed.status).toBe(200);
    expect(listed.headers.get('x-ratelimit-limit')).toBe('60');
    expect(listed.headers.get('x-ratelimit-remaining')).toBe('58');
    expect(await listed.json()).toEqual([{ id: 1, name: 'Dogs', description: 'Canine breeds' }]);
    const health = await fetch(`${url}/health`);
    expect(await health.json()).toEqual({ status: 'ok' });
  }, 30_000);

  it('serves the keys and plans of PETSTORE_API_KEYS and never prints them', async () => {
    const { url, output } = await start(script, {
      PETSTORE_API_KEYS: 'pro-key-123:pro,ent-key-456:enterprise:2:100',
    });
    expect(output).not.toContain('pro-key-123');
    expect(output).not.toContain('ent-key-456');
    const pro = await fetch(`${url}/v1/categories`, { headers: { authorization: 'Bearer pro-key-123' } });
    expect(pro.headers.get('x-ratelimit-limit')).toBe('300');
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${url}/v1/categories`, { headers: { authorization: 'Bearer ent-key-456' } });
      statuses.push(response.status);
      if (response.status === 429) {
        expect(Number(response.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        expect(await response.json()).toMatchObject({ code: 'rate_limited', status: 429 });
      }
    }
    // Two per minute; a minute boundary between the requests can admit one more.
    expect(statuses.slice(0, 2)).toEqual([200, 200]);
    const missing = await fetch(`${url}/v1/categories`);
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="petstore"');
  }, 30_000);
});
