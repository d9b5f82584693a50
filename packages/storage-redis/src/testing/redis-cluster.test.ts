import { describe, expect, it } from 'vitest';
import { resolveTestRedisCluster, startRedisCluster } from './redis-cluster.js';
import { isRedisServerInstalled } from './redis-server.js';

describe('resolveTestRedisCluster', () => {
  it('uses REDIS_CLUSTER_NODES as is, and never stops it', async () => {
    const cluster = await resolveTestRedisCluster({ REDIS_CLUSTER_NODES: 'redis-a.example:7000, 10.0.0.2:7001' });
    expect(cluster).toMatchObject({ nodes: [{ host: 'redis-a.example', port: 7000 }, { host: '10.0.0.2', port: 7001 }] });
    await (cluster as { stop(): Promise<void> }).stop();
    await expect(resolveTestRedisCluster({ REDIS_CLUSTER_NODES: 'redis-a.example' })).rejects.toThrow(/host:port/);
  });

  it('skips with a reason when a binary is missing, and throws instead under PETSTORE_REQUIRE_REDIS=1', async () => {
    expect(await resolveTestRedisCluster({}, { binary: '/nonexistent/redis-server' })).toEqual({
      skipReason: 'REDIS_CLUSTER_NODES is not set and /nonexistent/redis-server is not installed',
    });
    await expect(resolveTestRedisCluster({ PETSTORE_REQUIRE_REDIS: '1' }, { binary: '/nonexistent/redis-server' })).rejects.toThrow(
      /PETSTORE_REQUIRE_REDIS=1/,
    );
  });

  it.skipIf(!isRedisServerInstalled())('names a missing redis-cli in the skip reason', async () => {
    expect(await resolveTestRedisCluster({}, { cliBinary: '/nonexistent/redis-cli' })).toEqual({
      skipReason: 'REDIS_CLUSTER_NODES is not set and /nonexistent/redis-cli is not installed',
    });
  });
});

describe('startRedisCluster', () => {
  it('refuses fewer than 3 masters', async () => {
    await expect(startRedisCluster({ masters: 2 })).rejects.toThrow(TypeError);
  });

  it.skipIf(!isRedisServerInstalled())('fails with the cause when the nodes cannot be joined', async () => {
    await expect(startRedisCluster({ cliBinary: '/nonexistent/redis-cli' })).rejects.toThrow(/redis-cli --cluster create/);
  });
});
