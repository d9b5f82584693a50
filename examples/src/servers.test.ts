/**
 * Starts each example server (its build of `src/<server>.ts`, PORT=0) and talks to it over HTTP.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startExample as start, stopExamples } from './spawn-example.js';

afterEach(stopExamples);

describe.each(['fastify-server.ts', 'express-server.ts'])('example %s', (script) => {
  it('prints a KEY=… line whose key works', async () => {
    const { url, output } = await start(script, { PETSTORE_API_KEYS: '' });
    // The banner comes first: no setup warning (e.g. PETSTORE_DEPRECATED_WITHOUT_SUNSET) before it.
    expect(output.split('\n')[0]).toMatch(/^petstore categories API \((Fastify|Express), memory storage\) listening on /);
    const key = /^KEY=(demo_[A-Za-z0-9_-]+)$/m.exec(output)?.[1];
    expect(key).toBeDefined();
    // The server runs on the real clock: its minute window restarts if a minute boundary falls between the calls.
    const firstMinute = Math.floor(Date.now() / 60_000);
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
    // Both calls in one minute: 58 left; a boundary between the two calls: 59 (where it fell is not known here).
    const sameMinute = Math.floor(Date.now() / 60_000) === firstMinute;
    expect(sameMinute ? ['58'] : ['58', '59']).toContain(listed.headers.get('x-ratelimit-remaining'));
    expect(await listed.json()).toEqual([{ id: 1, name: 'Dogs', description: 'Canine breeds' }]);
    const health = await fetch(`${url}/health`);
    expect(await health.json()).toEqual({ status: 'ok' });
    // Without PETSTORE_PUBLIC_URL and PETSTORE_STAGING_URL the description keeps its relative server.
    const description = (await (await fetch(`${url}/v1/openapi.json`)).json()) as { servers: unknown };
    expect(description.servers).toEqual([{ url: '/v1', description: 'This server' }]);
    // The README's deprecated host operation: Deprecation, Sunset and both Links, and it still answers.
    const pet = await fetch(`${url}/v1/pets/1`, { headers: { authorization: `Bearer ${key}` } });
    expect(pet.status).toBe(200);
    expect(await pet.json()).toEqual({ id: 1, name: 'Rex', categoryId: 1 });
    expect(pet.headers.get('deprecation')).toBe('@1767225600');
    expect(pet.headers.get('sunset')).toBe('Tue, 01 Jan 2030 00:00:00 GMT');
    expect(pet.headers.get('link')).toBe(
      '<https://petstore.example/docs/deprecations#get-pet-by-id>; rel="deprecation"; type="text/html", ' +
        '<https://petstore.example/docs/deprecations#get-pet-by-id-sunset>; rel="sunset"; type="text/html"',
    );
  }, 30_000);

  it('serves the keys and plans of PETSTORE_API_KEYS and never prints them; lists the servers of PETSTORE_PUBLIC_URL and PETSTORE_STAGING_URL', async () => {
    // The enterprise key's own limits: 2 per minute and 2 per day, so its third request is refused whatever
    // the second of the minute.
    const { url, output } = await start(script, {
      PETSTORE_API_KEYS: 'pro-key-123:pro,ent-key-456:enterprise:2:2',
      PETSTORE_PUBLIC_URL: 'https://api.petstore.example/v1',
      PETSTORE_STAGING_URL: 'https://staging.petstore.example/v1',
    });
    // The OpenAPI description lists the two environments (the first test: none set, its relative server).
    const described = await fetch(`${url}/v1/openapi.json`);
    expect(described.status).toBe(200);
    expect(((await described.json()) as { servers: unknown }).servers).toEqual([
      { url: 'https://api.petstore.example/v1', description: 'Production' },
      { url: 'https://staging.petstore.example/v1', description: 'Staging' },
    ]);
    expect(output).not.toContain('pro-key-123');
    expect(output).not.toContain('ent-key-456');
    const pro = await fetch(`${url}/v1/categories`, { headers: { authorization: 'Bearer pro-key-123' } });
    expect(pro.headers.get('x-ratelimit-limit')).toBe('300');
    const answers: { status: number; headers: Headers; text: string }[] = [];
    for (let i = 0; i < 3; i++) {
      const response = await fetch(`${url}/v1/categories`, { headers: { authorization: 'Bearer ent-key-456' } });
      answers.push({ status: response.status, headers: response.headers, text: await response.text() });
    }
    expect(answers.map((answer) => answer.status)).toEqual([200, 200, 429]);
    expect(answers[0]?.headers.get('x-ratelimit-limit')).toBe('2');
    const limited = answers[2]!;
    expect(limited.headers.get('retry-after')).toMatch(/^\d+$/);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(limited.headers.get('content-type')).toBe('application/json; charset=utf-8');
    const body = JSON.parse(limited.text) as Record<string, unknown>;
    expect(Object.keys(body).sort()).toEqual(['code', 'message', 'status']);
    expect(body).toMatchObject({ code: 'rate_limited', status: 429, message: expect.any(String) });
    const missing = await fetch(`${url}/v1/categories`);
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="petstore"');
  }, 30_000);
});
