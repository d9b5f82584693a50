/**
 * The start-up warning about a Redis without persistence, and the start-up line's secrets: throwaway
 * redis-servers of this file's own (one with neither RDB snapshots nor an append-only file and a password holding
 * `@`, one with an append-only file), the check in process, then the example servers started as a user would.
 */
import { startRedisServer, isRedisServerInstalled, type RedisServer } from '@petstore/storage-redis/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisPersistenceWarning } from './redis-persistence.js';
import { startExample, stopExamples } from './spawn-example.js';

/** The password of the server without persistence: an unescaped `@` in its URL. */
const PASSWORD = 'p@ss-w0rd-7';
const WARNING = /^\[petstore\] warning: Redis at \S+ keeps no data across a restart/m;

describe.skipIf(!isRedisServerInstalled())('Redis persistence at start-up', () => {
  let volatile: RedisServer;
  let durable: RedisServer;
  beforeAll(async () => {
    [volatile, durable] = await Promise.all([startRedisServer(), startRedisServer({ appendOnly: true })]);
    // After the start: the start-up probe pings without a password.
    const admin = new Redis(volatile.url);
    await admin.config('SET', 'requirepass', PASSWORD);
    await admin.quit();
  });
  afterAll(async () => {
    stopExamples();
    await Promise.all([volatile?.stop(), durable?.stop()]);
  });

  it('warns about a Redis without RDB snapshots or AOF; not about one with AOF, nor when CONFIG is refused', async () => {
    const clients: Redis[] = [];
    try {
      const volatileClient = new Redis(volatile.port, '127.0.0.1', { password: PASSWORD });
      const durableClient = new Redis(durable.url);
      clients.push(volatileClient, durableClient);
      expect(await redisPersistenceWarning(volatileClient, 'redis://here')).toMatch(WARNING);
      expect(await redisPersistenceWarning(durableClient, 'redis://here')).toBeUndefined();
      // A user whose ACL refuses CONFIG: no warning, no failure.
      await volatileClient.acl('SETUSER', 'limited', 'on', '>limited-pw', '~*', '&*', '+@all', '-config');
      const limited = new Redis(volatile.port, '127.0.0.1', { username: 'limited', password: 'limited-pw' });
      clients.push(limited);
      await expect(limited.config('GET', 'save')).rejects.toThrow(/NOPERM/);
      expect(await redisPersistenceWarning(limited, 'redis://here')).toBeUndefined();
    } finally {
      await Promise.all(clients.map((client) => client.quit()));
    }
  });

  it('a server started on it prints the warning once, and its password in neither URL form', async () => {
    const forms = [`redis://:${PASSWORD}@127.0.0.1:${volatile.port}`, `redis://127.0.0.1:${volatile.port}?password=${encodeURIComponent(PASSWORD)}`];
    const started = await Promise.all([
      startExample('fastify-server.ts', { PETSTORE_REDIS_URL: forms[0] as string, PETSTORE_API_KEYS: 'k1:free' }),
      startExample('express-server.ts', { PETSTORE_REDIS_URL: forms[1] as string, PETSTORE_API_KEYS: 'k1:free' }),
    ]);
    const [fastify, express] = started as [(typeof started)[0], (typeof started)[0]];
    expect(fastify.output).toContain(`Redis storage (redis://:***@127.0.0.1:${volatile.port})`);
    expect(express.output).toContain(`Redis storage (redis://127.0.0.1:${volatile.port}?password=***)`);
    for (const server of started) {
      expect(server.output.match(new RegExp(WARNING.source, 'gm'))).toHaveLength(1);
      expect(server.printed()).not.toContain('w0rd');
    }
  });
});
