/**
 * The API-key record store on a 3-master Redis Cluster through ioredis `Cluster` clients: every key in one slot,
 * changes heard by a watcher on another client (PUBLISH reaches every node), and the watcher's connection cut on
 * its node, or left half-open, and made again.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { ApiKeyRecord, ApiKeyRecordWatcher } from '@petstore/core';
import { Redis } from 'ioredis';
import { describe, expect, it, vi } from 'vitest';
import { apiKeyRedisKeys, redisApiKeyRecordStore } from './api-key-record-store.js';
import { WATCH_HEARTBEAT_INTERVAL_MS, WATCH_HEARTBEAT_TIMEOUT_MS } from './api-key-watch.js';
import { connectCluster, freezableProxy, GUARD_CALL_TIMEOUT_MS, redisCluster, skipCluster, track, uniquePrefix } from '../test-support/redis.js';

const digest = (label: string) => new Uint8Array(createHash('sha256').update(label).digest());
const hexOf = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
const record = (keyId: string, accountId = 'acct'): ApiKeyRecord => ({
  keyId,
  accountId,
  plan: 'pro',
  createdAtMs: 1,
  updatedAtMs: 1,
  digest: digest(keyId),
});

/** Events a watcher heard; `next()` waits for the next one. */
function recorder() {
  const events: string[] = [];
  const waiting: Array<() => void> = [];
  let read = 0;
  const push = (event: string) => {
    events.push(event);
    waiting.splice(0).forEach((wake) => wake());
  };
  const listener: ApiKeyRecordWatcher = {
    onChange: (digests) => push(`change ${digests.map(hexOf).sort().join(',')}`),
    onDisconnect: () => push('disconnect'),
    onReconnect: () => push('reconnect'),
  };
  return {
    listener,
    events,
    async next() {
      while (read >= events.length) await new Promise<void>((resolve) => waiting.push(resolve));
      return events[read++]!;
    },
  };
}

describe.skipIf(skipCluster)('redisApiKeyRecordStore on a 3-master Redis Cluster', () => {
  const nodes = redisCluster ?? [];
  const nodeClient = (node: (typeof nodes)[number]) => track(new Redis({ host: node.host, port: node.port, maxRetriesPerRequest: 1 }));

  it('puts every key of the store in one slot, the prefix\'s own tag when it has one, and refuses an empty first tag', async () => {
    const admin = nodeClient(nodes[0]!);
    const slot = (key: string) => admin.call('CLUSTER', 'KEYSLOT', key) as Promise<number>;
    for (const [prefix, tag] of [
      ['petstore:', 'apikeys'],
      ['tenant:{eu}:', 'eu'],
      ['', 'apikeys'],
    ] as const) {
      const keys = apiKeyRedisKeys(prefix);
      const expected = await slot(tag);
      for (const key of [keys.all, keys.record('key_x'), keys.digest(digest('x')), keys.account('acct:{other}')]) {
        expect({ key, slot: await slot(key) }).toEqual({ key, slot: expected });
      }
    }
    const lazy = connectCluster({ lazyConnect: true });
    expect(() => redisApiKeyRecordStore({ client: lazy, keyPrefix: 'a{}:' })).toThrow(TypeError);
    expect(() => redisApiKeyRecordStore({ client: connectCluster({ lazyConnect: true, keyPrefix: '{}' }) })).toThrow(TypeError);
    expect(() => redisApiKeyRecordStore({ client: track(new Redis({ lazyConnect: true })), keyPrefix: 'a{}:' })).not.toThrow();
  });

  it('serves writes and reads from several Cluster clients and tells a watcher on another one', async () => {
    const keyPrefix = uniquePrefix('cluster');
    const [first, second, third] = Array.from({ length: 3 }, () => redisApiKeyRecordStore({ client: connectCluster(), keyPrefix, callTimeoutMs: GUARD_CALL_TIMEOUT_MS }));
    const heard = recorder();
    const watch = await third!.watch(heard.listener);
    await Promise.all(Array.from({ length: 30 }, (_, i) => (i % 2 ? first! : second!).create(record(`key_${String(i).padStart(2, '0')}`, i % 3 ? 'a' : 'b'))));
    const page = await third!.list({ limit: 20 });
    expect(page.records.map((each) => each.keyId)).toEqual(Array.from({ length: 20 }, (_, i) => `key_${String(i).padStart(2, '0')}`));
    expect((await third!.list({ accountId: 'b', after: page.next! })).records.map((each) => each.keyId)).toEqual(['key_21', 'key_24', 'key_27']);
    const heardCreates = new Set<string>();
    for (let i = 0; i < 30; i++) heardCreates.add(await heard.next());
    expect(heardCreates).toEqual(new Set(Array.from({ length: 30 }, (_, i) => `change ${hexOf(digest(`key_${String(i).padStart(2, '0')}`))}`)));
    await first!.update('key_05', { kind: 'revoke', nowMs: 2 });
    expect(await heard.next()).toBe(`change ${hexOf(digest('key_05'))}`);
    expect(await second!.findByDigest(digest('key_05'))).toMatchObject({ keyId: 'key_05', revokedAtMs: 2 });
    await watch.close();
  });

  it('makes a new subscriber connection when its node connection is cut, tells onReconnect, and hears changes again', async () => {
    const keyPrefix = uniquePrefix('cluster');
    const name = `watcher-${randomUUID()}`;
    const watcher = redisApiKeyRecordStore({ client: connectCluster({ redisOptions: { connectionName: name } }), keyPrefix, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const writer = redisApiKeyRecordStore({ client: connectCluster(), keyPrefix, callTimeoutMs: GUARD_CALL_TIMEOUT_MS });
    const heard = recorder();
    await watcher.watch(heard.listener);
    await writer.create(record('key_before'));
    expect(await heard.next()).toBe(`change ${hexOf(digest('key_before'))}`);

    // The subscriber is on one of the nodes, under the client's connection name: cut it there.
    const admins = nodes.map(nodeClient);
    let killed = 0;
    for (const admin of admins) {
      const list = (await admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub')) as string;
      for (const line of list.split('\n').filter((each) => each.includes(` name=${name} `))) {
        killed += Number(await admin.call('CLIENT', 'KILL', 'ID', /^id=(\d+)/.exec(line)![1]!));
      }
    }
    expect(killed).toBe(1);
    expect(await heard.next()).toBe('disconnect');
    expect(await heard.next()).toBe('reconnect');
    await writer.update('key_before', { kind: 'update', nowMs: 2, plan: 'business' });
    expect(await heard.next()).toBe(`change ${hexOf(digest('key_before'))}`);
    await watcher.close();
  });

  it('notices a half-open node connection by its heartbeat: onDisconnect, a connection to a node again, onReconnect', async () => {
    // The watcher's client reaches every node through a proxy of its own (natMap); the writer's goes straight.
    const proxies = await Promise.all(nodes.map((node) => freezableProxy(node)));
    const natMap = Object.fromEntries(nodes.map((node, i) => [`${node.host}:${node.port}`, { host: '127.0.0.1', port: proxies[i]!.port }]));
    const keyPrefix = uniquePrefix('cluster');
    const watcherClient = connectCluster({ natMap });
    await watcherClient.ping(); // its slot map, hence every node it knows, is behind the proxies
    const watcher = redisApiKeyRecordStore({ client: watcherClient, keyPrefix });
    const writer = redisApiKeyRecordStore({ client: connectCluster(), keyPrefix });
    const heard = recorder();
    // Only timers are faked (the heartbeat, its deadline, the backoff); sockets stay real.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      await watcher.watch(heard.listener);
      await writer.create(record('key_half'));
      expect(await heard.next()).toBe(`change ${hexOf(digest('key_half'))}`);
      for (const proxy of proxies) proxy.freeze();
      await vi.advanceTimersByTimeAsync(WATCH_HEARTBEAT_INTERVAL_MS + WATCH_HEARTBEAT_TIMEOUT_MS - 1);
      expect(heard.events).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1);
      expect(await heard.next()).toBe('disconnect');
      for (const proxy of proxies) proxy.unfreeze();
      await vi.advanceTimersByTimeAsync(100); // the new connection's backoff
      expect(await heard.next()).toBe('reconnect');
      await writer.update('key_half', { kind: 'update', nowMs: 2, plan: 'business' });
      expect(await heard.next()).toBe(`change ${hexOf(digest('key_half'))}`);
      await watcher.close();
    } finally {
      vi.useRealTimers();
    }
  });
});
