import { Redis } from 'ioredis';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { track } from '../../test-support/redis.js';
import { isRedisServerInstalled, startRedisServer } from './redis-server.js';
import { resolveTestRedis } from './resolve-test-redis.js';

describe('resolveTestRedis', () => {
  it('uses REDIS_URL as is, and never stops it', async () => {
    const redis = await resolveTestRedis({ REDIS_URL: 'redis://redis.example:6380' });
    expect(redis).toMatchObject({ url: 'redis://redis.example:6380' });
    await (redis as { stop(): Promise<void> }).stop();
  });

  it('skips with a reason when there is no Redis, and throws instead under PETSTORE_REQUIRE_REDIS=1', async () => {
    const options = { binary: '/nonexistent/redis-server' };
    const redis = await resolveTestRedis({}, options);
    expect(redis).toEqual({ skipReason: 'REDIS_URL is not set and /nonexistent/redis-server is not installed' });
    await expect(resolveTestRedis({ PETSTORE_REQUIRE_REDIS: '1' }, options)).rejects.toThrow(/PETSTORE_REQUIRE_REDIS=1/);
  });

  it.skipIf(!isRedisServerInstalled())('starts a throwaway server when the binary is installed', async () => {
    const redis = await resolveTestRedis({});
    if ('skipReason' in redis) throw new Error(redis.skipReason);
    try {
      expect(await track(new Redis(redis.url)).ping()).toBe('PONG');
    } finally {
      await redis.stop();
    }
  });
});

describe.skipIf(!isRedisServerInstalled())('startRedisServer', () => {
  it('serves on 127.0.0.1, restarts on the same port with its data, also after a stop', async () => {
    const server = await startRedisServer({ appendOnly: true });
    try {
      expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
      const client = track(new Redis(server.url, { maxRetriesPerRequest: 5 }));
      await client.set('k', 'v');
      await server.restart();
      expect(await client.get('k')).toBe('v');
      await server.stop();
      await server.stop(); // idempotent
      const probe = track(new Redis(server.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null }));
      await expect(probe.ping()).rejects.toThrow();
      expect(existsSync(server.dir)).toBe(true); // appendOnly: kept for a restart
      await server.restart();
      expect(await track(new Redis(server.url)).get('k')).toBe('v');
    } finally {
      await server.stop();
      await rm(server.dir, { recursive: true, force: true });
    }
  });

  it('removes its own directory on stop when nothing is persisted, and restarts empty', async () => {
    const server = await startRedisServer();
    try {
      await track(new Redis(server.url)).set('k', 'v');
      await server.stop();
      expect(existsSync(server.dir)).toBe(false);
      await server.restart();
      expect(await track(new Redis(server.url)).get('k')).toBeNull();
    } finally {
      await server.stop();
    }
  });

  it('refuses a port another Redis already serves', async () => {
    const server = await startRedisServer();
    try {
      await expect(startRedisServer({ port: server.port })).rejects.toThrow(/in use/);
    } finally {
      await server.stop();
    }
  });
});
