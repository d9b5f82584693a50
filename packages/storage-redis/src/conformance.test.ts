/**
 * The core's storage conformance suites and the rate-limit model comparison, run against the Redis stores (each
 * case gets a fresh key prefix), on one Redis server, on a 3-master Redis Cluster through an ioredis `Cluster`
 * client, and on one Valkey server (the open-source fork of Redis).
 */
import { randomUUID } from 'node:crypto';
import {
  runApiKeyRecordStoreConformance,
  runCategoryStoreConformance,
  runRateLimitModelComparison,
  runRateLimitStoreConformance,
} from '@petstore/core/testing';
import { Redis, type Cluster, type ClusterOptions, type RedisOptions } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { redisApiKeyRecordStore } from './api-key-record-store.js';
import { redisCategoryStore } from './category-store.js';
import { redisRateLimitStore } from './rate-limit-store.js';
import {
  connect,
  connectCluster,
  connectValkey,
  keepKeysAnHourLonger,
  patchConsumeScript,
  readRateLimitState,
  redisCluster,
  redisUrl,
  skipCluster,
  skipRedis,
  skipValkey,
  GUARD_CALL_TIMEOUT_MS,
  track,
  uniquePrefix,
  valkeyUrl,
} from '../test-support/redis.js';

interface Target {
  on: string;
  skip: boolean;
  /** A client; `connectionName` names every connection it (and a duplicate of it) makes. */
  connect: (connectionName?: string) => Redis | Cluster;
  prefix: () => string;
  /** Plain connections to every server of the target, for admin commands (closed after the test). */
  servers: () => Redis[];
  /** The seeds of the model comparison on this target (see below). */
  modelSeeds: readonly number[];
}

const plain = (url: string | null) => () => [track(new Redis(url ?? 'redis://127.0.0.1:1', { maxRetriesPerRequest: 1 }))];

const targets: Target[] = [
  {
    on: '',
    skip: skipRedis,
    connect: (connectionName) => connect(named<RedisOptions>(connectionName)),
    prefix: () => uniquePrefix(),
    servers: plain(redisUrl),
    modelSeeds: [1, 2, 3, 4, 5, 6],
  },
  {
    on: ' on a Redis Cluster',
    skip: skipCluster,
    connect: (connectionName) => connectCluster({ redisOptions: named<RedisOptions>(connectionName) } as ClusterOptions),
    prefix: () => uniquePrefix('cluster'),
    servers: () => (redisCluster ?? []).map((node) => track(new Redis({ ...node, maxRetriesPerRequest: 1 }))),
    modelSeeds: [1, 2],
  },
  {
    on: ' on Valkey',
    skip: skipValkey,
    connect: (connectionName) => connectValkey(named<RedisOptions>(connectionName)),
    prefix: () => uniquePrefix('valkey'),
    servers: plain(valkeyUrl),
    modelSeeds: [1, 2],
  },
];

function named<Options extends { connectionName?: string }>(connectionName: string | undefined): Options {
  return (connectionName === undefined ? {} : { connectionName }) as Options;
}

/**
 * Cuts every subscriber connection named `connectionName` on the target's servers (`CLIENT KILL ID`): only this
 * case's, since other suites share the servers. Resolves once one was cut.
 */
async function killSubscribers(target: Target, connectionName: string): Promise<void> {
  let killed = 0;
  for (const server of target.servers()) {
    const list = (await server.call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string;
    for (const line of list.split('\n')) {
      const id = new RegExp(`^id=(\\d+) .* name=${connectionName} `).exec(line)?.[1];
      if (id !== undefined) killed += Number(await server.call('CLIENT', 'KILL', 'ID', id));
    }
  }
  expect(killed).toBeGreaterThan(0);
}

for (const target of targets) {
  const test = { describe: describe.skipIf(target.skip), it };

  runRateLimitStoreConformance(test, {
    name: `redisRateLimitStore conformance${target.on}`,
    createStore() {
      const client = target.connect();
      const store = redisRateLimitStore({ client, keyPrefix: target.prefix(), time: 'request', callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
      return {
        store,
        async remainingTtlMs(key) {
          const ttl = await client.pttl(store.redisKey(key));
          if (ttl === -2) return undefined; // no such key
          if (ttl === -1) return Number.POSITIVE_INFINITY; // no expiry
          return ttl;
        },
        async dropTtl(key) {
          await client.persist(store.redisKey(key));
        },
        // The client is closed after the test by test-support/redis.ts.
      };
    },
  });

  // The script against decideConsume, step by step (the block cache has its own comparison in
  // rate-limit-store.test.ts: answers from memory leave the record as Redis last wrote it, not as the model would).
  // Six seeded runs on Redis; two on the Cluster and on Valkey, which run the same script and differ in what
  // carries it (the slot a record's key hashes to, the server): the conformance cases above cover those.
  runRateLimitModelComparison({
    ...test,
    seeds: target.modelSeeds,
    name: `redisRateLimitStore against the model${target.on}`,
    harness() {
      const client = patchConsumeScript(target.connect(), keepKeysAnHourLonger);
      const store = redisRateLimitStore({ client, keyPrefix: target.prefix(), time: 'request', blockCache: false, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
      return { store, readState: (key) => readRateLimitState(client, store.redisKey(key)) };
    },
  });

  runCategoryStoreConformance(test, {
    name: `redisCategoryStore conformance${target.on}`,
    capabilities: { otherInstance: true },
    createStore: ({ maxCategories }) => {
      const keyPrefix = target.prefix();
      return {
        store: redisCategoryStore({ client: target.connect(), keyPrefix, maxCategories, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }),
        // Another app instance: a client of its own on the same server(s) and prefix.
        other: () => redisCategoryStore({ client: target.connect(), keyPrefix, maxCategories, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }),
      };
    },
  });

  runApiKeyRecordStoreConformance(test, {
    name: `redisApiKeyRecordStore conformance${target.on}`,
    createStore({ maxRecords }) {
      const keyPrefix = target.prefix();
      const connectionName = `apikeys-${randomUUID()}`;
      const store = redisApiKeyRecordStore({ client: target.connect(connectionName), keyPrefix, maxRecords });
      const others: Array<{ close(): Promise<void> }> = [];
      return {
        store,
        // Another app instance: a client of its own on the same server(s) and prefix.
        other() {
          const other = redisApiKeyRecordStore({ client: target.connect(), keyPrefix });
          others.push(other);
          return other;
        },
        breakNotifications: () => killSubscribers(target, connectionName),
        // Clients are closed after the test by test-support/redis.ts; the stores close their watches.
        async close() {
          await Promise.all([store, ...others].map((each) => each.close()));
        },
      };
    },
  });
}

describe.skipIf(skipValkey)('the Valkey target', () => {
  it('is a Valkey server, not Redis', async () => {
    const info = await connectValkey().info('server');
    expect(info).toMatch(/^server_name:valkey\r?$/m);
    expect(info).toMatch(/^valkey_version:\d+\./m);
  });
});
