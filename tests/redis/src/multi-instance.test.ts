/**
 * Several app instances, one quota: 2 Fastify and 2 Express servers share one Redis, and a burst spread over
 * all of them on one Free key admits exactly the minute quota. The same again on a 3-master Redis Cluster,
 * each instance with its own ioredis `Cluster` client.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { GUARD_CALL_TIMEOUT_MS, call, redisNowMs, startInstance, withinOneMinute, type Instance, type InstanceOptions } from './instances.js';

const redisUrl = inject('redisUrl');
const redisCluster = inject('redisCluster');
// Three of each: a burst that straddles a minute boundary is made again with a fresh key.
const FREE_KEYS = [1, 2, 3].map((i) => `multi-instance-free-key-${i}`);
const PRO_KEYS = [1, 2, 3].map((i) => `multi-instance-pro-key-${i}`);

describe.skipIf(redisUrl === null)('several instances sharing one Redis', () => {
  sharedStoreSuite({ redisUrl: redisUrl as string }, redisUrl as string);
});

describe.skipIf(redisCluster === null)('several instances sharing one Redis Cluster, each with its own Cluster client', () => {
  const first = redisCluster?.[0];
  // The masters run on one machine: any node's TIME is the cluster's clock.
  sharedStoreSuite({ cluster: redisCluster as InstanceOptions['cluster'] }, `redis://${first?.host}:${first?.port}`);
});

/** The shared-quota and shared-categories cases, on 4 instances built with `backend`. */
function sharedStoreSuite(backend: Pick<InstanceOptions, 'redisUrl' | 'cluster'>, clockUrl: string): void {
  const instances: Instance[] = [];
  /** The Free key the first case banned. */
  let bannedKey: string | undefined;
  beforeAll(async () => {
    const keyPrefix = `petstore-test:${randomUUID()}:`;
    const apiKeys = [
      ...FREE_KEYS.map((key) => ({ key, plan: 'free' as const })),
      ...PRO_KEYS.map((key) => ({ key, plan: 'pro' as const })),
    ];
    for (const framework of ['fastify', 'express', 'fastify', 'express'] as const) {
      instances.push(await startInstance({ framework, ...backend, keyPrefix, apiKeys, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }));
    }
  });
  afterAll(async () => {
    await Promise.all(instances.map((instance) => instance.close()));
  });

  it('admits exactly 60 of 500 parallel requests on one Free key spread over 4 instances', async () => {
    // A fixed minute window that ends during the burst would admit a second quota: the burst counts only
    // when it began and ended in one minute of Redis's clock.
    const { key, result: answers } = await withinOneMinute(clockUrl, FREE_KEYS, (apiKey) =>
      Promise.all(Array.from({ length: 500 }, (_, i) => call(instances[i % instances.length] as Instance, '/v1/categories', { apiKey }))),
    );
    bannedKey = key;
    const byStatus = (status: number) => answers.filter((answer) => answer.status === status);
    expect(byStatus(200)).toHaveLength(60);
    expect(byStatus(429)).toHaveLength(440);
    expect(byStatus(500)).toHaveLength(0);
    // Atomic across instances: rejections 1–19 are rate_limited, the 20th starts the ban (default policy).
    const codes = byStatus(429).map((answer) => (answer.body as { code: string }).code);
    expect(codes.filter((code) => code === 'rate_limited')).toHaveLength(19);
    expect(codes.filter((code) => code === 'temporarily_banned')).toHaveLength(421);
    for (const answer of answers) {
      expect(answer.headers['x-ratelimit-limit']).toBe('60');
    }
    // Every instance admitted some of the 60: the quota is shared, not split.
    const admittedRemaining = byStatus(200).map((answer) => Number(answer.headers['x-ratelimit-remaining']));
    expect(new Set(admittedRemaining)).toEqual(new Set(Array.from({ length: 60 }, (_, i) => i)));
  });

  it('gives the same rate-limit headers on every instance', async () => {
    const { result: answers } = await withinOneMinute(clockUrl, PRO_KEYS, (apiKey) =>
      Promise.all(instances.map((instance) => call(instance, '/v1/categories', { apiKey }))),
    );
    const remaining = answers.map((answer) => Number(answer.headers['x-ratelimit-remaining'])).sort((a, b) => b - a);
    expect(remaining).toEqual([299, 298, 297, 296]);
    expect(new Set(answers.map((answer) => answer.headers['x-ratelimit-limit']))).toEqual(new Set(['300']));
    expect(new Set(answers.map((answer) => answer.headers['x-ratelimit-reset'])).size).toBe(1);
    expect(bannedKey).toBeDefined();
    const before = await redisNowMs(clockUrl);
    const banned = await Promise.all(instances.map((instance) => call(instance, '/v1/categories', { apiKey: bannedKey as string })));
    const after = await redisNowMs(clockUrl);
    for (const answer of banned) {
      expect(answer.status).toBe(429);
      expect(answer.body).toMatchObject({ code: 'temporarily_banned', status: 429 });
      expect(answer.headers['x-ratelimit-remaining']).toBe('0');
    }
    const resets = new Set(banned.map((answer) => answer.headers['x-ratelimit-reset']));
    expect(resets.size).toBe(1);
    // Every instance counts Retry-After down to that one ban end (Reset, whole seconds rounded up) on Redis's clock,
    // read between `before` and `after` (the block cache's clock is set to Redis's at its last answer).
    const reset = Number([...resets][0]);
    for (const answer of banned) {
      const retryAfter = Number(answer.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(reset - Math.ceil(after / 1000));
      expect(retryAfter).toBeLessThanOrEqual(reset - Math.floor(before / 1000) + 1);
    }
  });

  it('shares categories: parallel creates on all instances get distinct ids, and every instance lists them all', async () => {
    const created = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        call(instances[i % instances.length] as Instance, '/v1/categories', { apiKey: PRO_KEYS[0] as string, json: { name: `shared ${i}` } }),
      ),
    );
    expect(created.every((answer) => answer.status === 201)).toBe(true);
    const ids = created.map((answer) => (answer.body as { id: number }).id);
    expect(new Set(ids).size).toBe(100);
    for (const instance of instances) {
      const listed = await call(instance, '/v1/categories', { apiKey: PRO_KEYS[0] as string });
      expect((listed.body as Array<{ id: number }>).map((category) => category.id)).toEqual([...ids].sort((a, b) => a - b));
    }
  });

  it('tag the list alike: a create on one instance changes the ETag both answer; the current tag gets 304 on both', async () => {
    const [first, second] = instances as [Instance, Instance];
    const before = await call(first, '/v1/categories?limit=1000', { apiKey: PRO_KEYS[0] as string });
    const etag = before.headers['etag'] as string;
    expect(etag).toMatch(/^"[^"]+"$/);
    expect((await call(second, '/v1/categories?limit=1000', { apiKey: PRO_KEYS[0] as string, headers: { 'if-none-match': etag } })).status).toBe(304);
    const created = await call(second, '/v1/categories', { apiKey: PRO_KEYS[0] as string, json: { name: 'tagged elsewhere' } });
    expect(created.status).toBe(201);
    for (const instance of [first, second]) {
      const after = await call(instance, '/v1/categories?limit=1000', { apiKey: PRO_KEYS[0] as string, headers: { 'if-none-match': etag } });
      expect(after.status).toBe(200);
      expect(after.body).toContainEqual(created.body);
      expect(after.headers['etag']).not.toBe(etag);
      const full = await call(instance, '/v1/categories', { apiKey: PRO_KEYS[0] as string });
      expect((await call(instance, '/v1/categories', { apiKey: PRO_KEYS[0] as string, headers: { 'if-none-match': full.headers['etag'] as string } })).status).toBe(304);
    }
  });
}
