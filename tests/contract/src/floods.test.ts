/**
 * Floods: many distinct invalid keys, many client addresses. The rate-limit state must stay bounded: callers
 * without a valid key are counted per client address (IPv6 per /64) in the anonymous store, which holds at
 * most `maxKeys` addresses; an invalid key leaves no state of its own anywhere.
 *
 * Over real sockets (every implementation of `servers.ts`, connections from distinct loopback source
 * addresses, so the server sees distinct clients) to prove the adapters hand the right address and headers
 * to the core; in process (`petstore.handle`) where volume is needed, with this thread's heap and off-heap memory measured.
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PetstoreResponse } from '@petstore/core';
import { ANONYMOUS_LIMITS, SERVER_IMPLS, testPetstore, type RunningServer } from './servers.js';
import { describeExchange, exchange, type RawExchange } from './raw-http.js';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

const MiB = 1024 * 1024;
const mib = (bytes: number) => (bytes / MiB).toFixed(1);

/**
 * Heap used, and memory held outside the heap (Buffers, ArrayBuffers: `external`), after a full garbage
 * collection — both this isolate's own, so other test files running in other worker threads of the process
 * do not count (the process's RSS would include them).
 */
function memoryAfterGc(): { heap: number; offHeap: number } {
  gc();
  gc();
  const usage = process.memoryUsage();
  return { heap: usage.heapUsed, offHeap: usage.external };
}

/**
 * Heap growth beyond this is a leak rather than noise: 1 KiB per tracked key (an entry of the memory store,
 * its address string included, takes about 0.65 KiB) plus 4 MiB for everything else. A store holding every
 * one of the 18,000 distinct clients of the address flood (about 12 MiB) would not fit under it.
 */
const heapBound = (maxKeys: number) => maxKeys * 1024 + 4 * MiB;
/** Nothing per request or per key lives outside the heap: a bound that catches Buffers left behind. */
const OFF_HEAP_BOUND = 16 * MiB;

/** Statuses in order, run-length encoded: `401×30 429×70`. */
function runs(statuses: readonly number[]): string {
  const parts: string[] = [];
  let index = 0;
  while (index < statuses.length) {
    let end = index;
    while (statuses[end] === statuses[index]) end += 1;
    parts.push(`${statuses[index]}×${end - index}`);
    index = end;
  }
  return parts.join(' ');
}

/** What one client without a valid key gets for `total` requests within a minute: 401 up to its quota, then 429. */
const oneClient = (total: number) => {
  const quota = ANONYMOUS_LIMITS.requestsPerMinute;
  return `401×${quota} 429×${total - quota}`;
};

describe('floods in process', () => {
  it('answers 20,000 distinct invalid keys from one address 401 then 429; one anonymous entry, no key entries, heap flat', async ({ annotate }) => {
    const { petstore, stores } = testPetstore();
    const before = memoryAfterGc();
    const statuses: number[] = [];
    for (let i = 0; i < 20_000; i += 1) {
      const answer = await petstore.handle({
        method: 'GET',
        path: '/categories',
        headers: { authorization: `Bearer invalid-${i.toString(36)}` },
        clientAddress: '203.0.113.9',
      });
      statuses.push(answer.status);
    }
    expect(runs(statuses)).toBe(oneClient(20_000));
    expect(stores.anonymous.size, 'anonymous entries').toBe(1);
    expect(stores.keys.size, 'key entries').toBe(0);
    const after = memoryAfterGc();
    const report = `heap +${mib(after.heap - before.heap)} MiB, off-heap +${mib(after.offHeap - before.offHeap)} MiB after 20,000 invalid keys`;
    await annotate(report, 'memory');
    // Nothing per key may stay behind: 300 bytes for each of the 20,000 keys would pass this bound.
    expect(after.heap - before.heap, report).toBeLessThan(6 * MiB);
    expect(after.offHeap - before.offHeap, report).toBeLessThan(OFF_HEAP_BOUND);
  });

  it('tracks at most maxKeys (2,000) of 20,000 client addresses, IPv4 and IPv6, an IPv6 /64 counting as one', async ({ annotate }) => {
    const maxKeys = 2_000;
    const { petstore, stores } = testPetstore({ anonymousMaxKeys: maxKeys });
    const before = memoryAfterGc();
    const ask = (clientAddress: string): Promise<PetstoreResponse> =>
      petstore.handle({ method: 'GET', path: '/categories', headers: {}, clientAddress });
    let largest = 0;
    const flood = async (count: number, address: (i: number) => string): Promise<number[]> => {
      const statuses: number[] = [];
      for (let i = 0; i < count; i += 1) {
        statuses.push((await ask(address(i))).status);
        if (i % 1000 === 0) largest = Math.max(largest, stores.anonymous.size);
      }
      largest = Math.max(largest, stores.anonymous.size);
      return statuses;
    };
    // 14,000 IPv4 addresses, each a new client with its full quota.
    const ipv4 = await flood(14_000, (i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
    expect(runs(ipv4)).toBe('401×14000');
    // 4,000 IPv6 addresses in 4,000 distinct /64 networks: 4,000 clients.
    const ipv6 = await flood(4_000, (i) => `2001:db8:${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}::1`);
    expect(runs(ipv6)).toBe('401×4000');
    // 2,000 IPv6 addresses inside one /64: one client, whose quota runs out after 30.
    const oneNetwork = await flood(2_000, (i) => `2001:db8:ffff:1:${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}:abcd:1`);
    expect(runs(oneNetwork)).toBe(oneClient(2_000));
    expect(largest, 'most anonymous entries at any time').toBeLessThanOrEqual(maxKeys);
    expect(stores.anonymous.size).toBe(maxKeys);
    expect(stores.keys.size).toBe(0);
    const after = memoryAfterGc();
    const grown = `heap +${mib(after.heap - before.heap)} MiB, off-heap +${mib(after.offHeap - before.offHeap)} MiB`;
    const report = `${grown} for ${maxKeys} tracked of 20,000 addresses`;
    await annotate(report, 'memory');
    expect(after.heap - before.heap, report).toBeLessThan(heapBound(maxKeys));
    expect(after.offHeap - before.offHeap, report).toBeLessThan(OFF_HEAP_BOUND);
    // Still the same petstore afterwards: a fresh address gets its full quota.
    expect((await ask('198.51.100.1')).status).toBe(401);
  });
});

describe.each(SERVER_IMPLS)('floods over sockets: $name', (impl) => {
  const maxKeys = 40;
  let server: RunningServer;
  beforeAll(async () => {
    server = await impl.start({ anonymousMaxKeys: maxKeys });
  });
  afterAll(async () => {
    await server?.close();
  });

  /** `count` GETs with distinct invalid keys, pipelined in one write on one connection from `localAddress`. */
  function invalidKeys(localAddress: string, count: number): Promise<RawExchange> {
    const requests = Array.from(
      { length: count },
      (_, i) => `GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer flood-${localAddress}-${i}\r\n\r\n`,
    );
    return exchange(server.origin, requests.join(''), { localAddress, answers: count });
  }

  it('answers 100 distinct invalid keys from each of 2 addresses 401 ×30 then 429; 2 anonymous entries, no key entries', async () => {
    const results = await Promise.all(['127.66.0.1', '127.66.0.2'].map((address) => invalidKeys(address, 100)));
    for (const result of results) {
      expect(runs(result.answers.map((answer) => answer.status)), describeExchange(result).slice(0, 300)).toBe(oneClient(100));
    }
    expect(server.stores.anonymous.size, 'anonymous entries').toBe(2);
    expect(server.stores.keys.size, 'key entries').toBe(0);
  });

  it(`never tracks more than maxKeys (${maxKeys}) of 60 more client addresses`, async () => {
    const sizes: number[] = [];
    const statuses: number[] = [];
    for (let batch = 0; batch < 4; batch += 1) {
      const results = await Promise.all(
        Array.from({ length: 15 }, (_, i) =>
          exchange(server.origin, 'GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', {
            localAddress: `127.88.${batch}.${i + 1}`,
          }),
        ),
      );
      for (const result of results) statuses.push(...result.answers.map((answer) => answer.status));
      sizes.push(server.stores.anonymous.size);
    }
    // Every address is a new client with its full quota.
    expect(runs(statuses)).toBe('401×60');
    expect(sizes).toEqual([17, 32, 40, 40]);
    // The first addresses were dropped (least recently used): their counters (and any ban) start over.
    const evicted = await exchange(server.origin, 'GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n', {
      localAddress: '127.66.0.1',
    });
    expect(evicted.answers.map((answer) => answer.status), describeExchange(evicted)).toEqual([401]);
    expect(evicted.answers[0]?.headers['x-ratelimit-remaining']).toBe(String(ANONYMOUS_LIMITS.requestsPerMinute - 1));
    expect(server.stores.anonymous.size).toBe(maxKeys);
    expect(server.stores.keys.size).toBe(0);
  });
});
