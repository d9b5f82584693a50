/**
 * Helpers for this package's tests: the Redis (and Redis Cluster) under test, clients that are closed after
 * each test, and a unique key prefix per store so tests never collide (its keys are deleted after the file).
 */
import { randomUUID } from 'node:crypto';
import { connect as connectSocket, createServer, type Server, type Socket } from 'node:net';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { BanState, RateLimitState, WindowCounter } from '@petstore/core';
import { CONSUME_COMMAND } from '../src/consume-batches.js';
import { inject } from 'vitest';

/** URL of the Redis under test, or `null` when skipped. */
export const redisUrl = inject('redisUrl');
/** True when there is no Redis for this run (the reason is printed by the global setup). */
export const skipRedis = redisUrl === null;
/** Startup nodes of the Redis Cluster under test, or `null` when skipped. */
export const redisCluster = inject('redisCluster');
/** True when there is no Redis Cluster for this run (the reason is printed by the global setup). */
export const skipCluster = redisCluster === null;
/** URL of the Valkey server under test, or `null` when skipped. */
export const valkeyUrl = inject('valkeyUrl');
/** True when there is no Valkey for this run (the reason is printed by the global setup). */
export const skipValkey = valkeyUrl === null;

/**
 * The stores' deadline where a test needs their calls answered — those the core's suites run against, and the calls
 * before and after an outage beside a short-deadline store that the test is there to check.
 */
export { GUARD_CALL_TIMEOUT_MS } from '../../core/test-support/call-timeout.js';

const openClients = new Set<Redis | Cluster>();
const usedPrefixes = new Set<string>();
const usedValkeyPrefixes = new Set<string>();
const usedClusterPrefixes = new Set<string>();
const openSockets = new Set<Socket>();
const openServers = new Set<Server>();

/**
 * Closes the clients, sockets and proxies handed out for the test that ended. Registered for every test file by
 * test-support/setup.ts (a setup file runs again for each file; a hook registered here, at the top of a module
 * that the files of a worker share, would run for the first file only).
 */
export async function closeClientsAfterTest(): Promise<void> {
  for (const socket of openSockets) socket.destroy();
  openSockets.clear();
  const servers = [...openServers];
  openServers.clear();
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  const clients = [...openClients];
  openClients.clear();
  await Promise.all(
    clients.map(async (client) => {
      if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
      else client.disconnect();
    }),
  );
}

/**
 * Deletes the keys of every prefix the file's tests used ({@link uniquePrefix}): after the file rather than after
 * each test, so a file opens one cleaning connection per server, not one per test (the prefixes are unique, so
 * the keys of one test never meet another's). Registered for every test file by test-support/setup.ts.
 */
export async function deleteKeysAfterFile(): Promise<void> {
  const clusterPrefixes = [...usedClusterPrefixes];
  usedClusterPrefixes.clear();
  // A REDIS_URL (VALKEY_URL) server may be shared and long-lived: leave nothing behind.
  for (const [url, used] of [[redisUrl, usedPrefixes], [valkeyUrl, usedValkeyPrefixes]] as const) {
    const prefixes = [...used];
    used.clear();
    if (url === null || prefixes.length === 0) continue;
    const cleaner = new Redis(url, { maxRetriesPerRequest: 1 });
    try {
      for (const prefix of prefixes) {
        for await (const keys of cleaner.scanStream({ match: `${prefix}*`, count: 500 })) {
          if ((keys as string[]).length > 0) await cleaner.unlink(...(keys as string[]));
        }
      }
    } finally {
      cleaner.disconnect();
    }
  }
  if (redisCluster !== null && clusterPrefixes.length > 0) {
    // Keys of cluster tests: scan every master (SCAN sees one node's keys), delete key by key (slots differ).
    const cleaner = new Cluster(redisCluster, { redisOptions: { maxRetriesPerRequest: 1 } });
    try {
      await cleaner.ping(); // ready, with the slot map
      for (const node of cleaner.nodes('master')) {
        for (const prefix of clusterPrefixes) {
          for await (const keys of node.scanStream({ match: `${prefix}*`, count: 500 })) {
            await Promise.all((keys as string[]).map((key) => cleaner.unlink(key)));
          }
        }
      }
    } finally {
      cleaner.disconnect();
    }
  }
}

/** A client to the Redis under test, closed after the current test. */
export function connect(options: RedisOptions = {}): Redis {
  return track(new Redis(redisUrl ?? 'redis://127.0.0.1:1', { maxRetriesPerRequest: 1, ...options }));
}

/** A client to the Valkey server under test, closed after the current test. */
export function connectValkey(options: RedisOptions = {}): Redis {
  return track(new Redis(valkeyUrl ?? 'redis://127.0.0.1:1', { maxRetriesPerRequest: 1, ...options }));
}

/**
 * An ioredis `Cluster` on the cluster under test, closed after the current test. Redirections (`MOVED`,
 * `ASK`) are followed by ioredis as in production.
 */
export function connectCluster(options: ClusterOptions = {}): Cluster {
  const client = new Cluster(redisCluster ?? [{ host: '127.0.0.1', port: 1 }], {
    ...options,
    redisOptions: { maxRetriesPerRequest: 1, ...options.redisOptions },
  });
  return track(client);
}

/**
 * Counts the commands `client` sends from now on, at the client (every command goes through `sendCommand`;
 * a `Cluster` counts each command once, before it is routed).
 */
export async function countCommands(client: Redis | Cluster): Promise<{ readonly count: number }> {
  await client.ping(); // connected: the connection's own commands (ready check) are not counted
  const counter = { count: 0 };
  const sendCommand = client.sendCommand.bind(client) as (...args: unknown[]) => unknown;
  (client as { sendCommand: (...args: unknown[]) => unknown }).sendCommand = (...args) => {
    counter.count += 1;
    return sendCommand(...args);
  };
  return counter;
}

/** Closes `client` after the current test. */
export function track<Client extends Redis | Cluster>(client: Client): Client {
  openClients.add(client);
  client.on('error', () => {}); // connection errors are asserted through the stores, not logged
  return client;
}

/**
 * A key prefix no other test uses; its keys are deleted after the current file, on the Redis server,
 * (`'valkey'`) on the Valkey server, or (`'cluster'`) on every master of the cluster under test.
 */
export function uniquePrefix(where: 'server' | 'valkey' | 'cluster' = 'server'): string {
  const prefix = `test:${randomUUID()}:`;
  (where === 'cluster' ? usedClusterPrefixes : where === 'valkey' ? usedValkeyPrefixes : usedPrefixes).add(prefix);
  return prefix;
}

/** A port on 127.0.0.1 where nothing listens. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** One command as MONITOR reports it: where it came from (`ip:port`, or `lua` inside a script) and its words. */
export interface MonitoredCommand {
  source: string;
  args: string[];
}

/**
 * Runs MONITOR on the Redis under test over a plain socket and reports every command to `onCommand`
 * until the test ends. (ioredis's own monitor mode can lose track of its replies when other clients are
 * busy on the same server between MONITOR's `+OK` and its switch into monitoring mode.)
 */
export async function monitorCommands(onCommand: (command: MonitoredCommand) => void): Promise<void> {
  const url = new URL(redisUrl ?? 'redis://127.0.0.1:1');
  const socket = connectSocket(Number(url.port || 6379), url.hostname);
  openSockets.add(socket);
  socket.setEncoding('utf8');
  let buffered = '';
  let started: () => void = () => {};
  let failed: (error: Error) => void = () => {};
  const ready = new Promise<void>((resolve, reject) => ((started = resolve), (failed = reject)));
  socket.on('error', (error) => failed(error));
  socket.on('data', (chunk: string) => {
    buffered += chunk;
    let end: number;
    while ((end = buffered.indexOf('\r\n')) !== -1) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      if (line === '+OK') started();
      else if (line.startsWith('-')) failed(new Error(line.slice(1)));
      else {
        const match = /^\+\d+\.\d+ \[\d+ ([^\]]+)\] (.*)$/.exec(line);
        if (match === null) continue;
        const args = [...(match[2] as string).matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((word) => word[1] as string);
        onCommand({ source: match[1] as string, args });
      }
    }
  });
  socket.write('MONITOR\r\n');
  await ready;
}

/**
 * Reads and decodes the record of one rate-limit key into the core's `RateLimitState` (layout: rateLimitRedisKey's
 * TSDoc), independently of the store's own decoder; `undefined` when the key does not exist. Throws on a value
 * that does not follow the layout to its last byte.
 */
export async function readRateLimitState(client: Pick<Redis | Cluster, 'getBuffer'>, redisKey: string): Promise<RateLimitState | undefined> {
  const value = await client.getBuffer(redisKey);
  if (value === null) return undefined;
  let at = 0;
  const take = (bytes: number) => {
    if (at + bytes > value.length) throw new Error(`${redisKey}: the record ends at byte ${value.length}, wanted ${at + bytes}`);
    at += bytes;
    return at - bytes;
  };
  const n = value.readUInt8(take(1));
  const signatureLength = value.readUInt32LE(take(4));
  const numbers = Array.from({ length: 2 * n }, () => value.readDoubleLE(take(8)));
  const signature = JSON.parse(value.toString('utf8', take(signatureLength), at)) as Array<[string, number, number, ('sliding' | 'gcra')?]>;
  const state: RateLimitState = { counters: {}, bans: {} };
  signature.forEach(([name, limit, windowMs, algorithm], i) => {
    const counter: WindowCounter = { startMs: numbers[i] as number, count: numbers[n + i] as number, limit, windowMs };
    if (algorithm !== undefined) counter.algorithm = algorithm;
    // A sliding window's previous count: 8 bytes after the signature, in window order.
    if (algorithm === 'sliding') counter.previousCount = value.readDoubleLE(take(8));
    Object.defineProperty(state.counters, name, {
      value: counter,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  });
  while (at < value.length) {
    const [rejectedStartMs, rejectedCount, bannedUntilMs] = [0, 1, 2].map(() => value.readDoubleLE(take(8))) as [number, number, number];
    const subjectLength = value.readUInt32LE(take(4));
    const subject = value.toString('utf8', take(subjectLength), at);
    const entry: BanState = { rejected: rejectedCount === 0 ? undefined : { startMs: rejectedStartMs, count: rejectedCount }, bannedUntilMs };
    Object.defineProperty(state.bans, subject, { value: entry, enumerable: true, writable: true, configurable: true });
  }
  return state;
}

/**
 * Has `client` define the consume script with `patch` applied to its Lua (the store defines it when it is
 * created, so patch the client first). For the model comparison's expiry (conformance.test.ts) and the mutation
 * runs (model-mutations.test.ts). Each patch must change the script, or this throws when the store is created.
 */
export function patchConsumeScript<Client extends Redis | Cluster>(client: Client, patch: (lua: string) => string): Client {
  const define = client.defineCommand.bind(client);
  client.defineCommand = (name: string, definition: { lua: string; numberOfKeys?: number; readOnly?: boolean }) => {
    if (name !== CONSUME_COMMAND) return define(name, definition);
    const lua = patch(definition.lua);
    if (lua === definition.lua) throw new Error('the patch changed nothing in the consume script');
    return define(name, { ...definition, lua });
  };
  return client;
}

/** `text` with the one occurrence of `from` replaced by `to`; throws unless `from` occurs exactly once. */
export function replaceOnce(text: string, from: string, to: string): string {
  const at = text.indexOf(from);
  if (at === -1 || text.indexOf(from, at + 1) !== -1) throw new Error(`expected exactly one ${JSON.stringify(from)} in the script`);
  return text.slice(0, at) + to + text.slice(at + from.length);
}

/**
 * For the model comparison: every key kept an hour longer than the script asks. The comparison's clock
 * (`time: 'request'`) runs through days in seconds, and often stops on the last millisecond of a day, where a
 * record ends 1 ms later; Redis counts a key's TTL on its own clock, so such a key would be gone before the next
 * step at that same instant, where the model still holds it. No decision reads a TTL (a record kept past its
 * end decides as no record does, and the comparison accepts it when nothing in it is live); the TTLs themselves
 * are checked by the conformance suite ("lets every key expire …") and rate-limit-store.test.ts.
 */
export const keepKeysAnHourLonger = (lua: string) =>
  replaceOnce(lua, '  local expiresIn = ttl[key]\n', '  local expiresIn = ttl[key]\n  if expiresIn > 0 then expiresIn = expiresIn + 3600000 end\n');

/** Redis's clock now (`TIME`, the clock the scripts read in `'server'` mode), Unix epoch ms, rounded down. */
export async function redisNowMs(client: Pick<Redis, 'time'>): Promise<number> {
  const [seconds, micros] = (await client.time()) as [string | number, string | number];
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/**
 * The absolute expiry of `key` in Redis (`PEXPIRETIME`, Redis 7.0+), Unix epoch ms; -1 without one, -2 when the
 * key does not exist. Compared with {@link redisNowMs} read around the write, it shows the TTL a write set without
 * depending on how long the test took to read it back.
 */
export async function expiresAtMs(client: Pick<Redis, 'call'>, key: string): Promise<number> {
  return Number(await client.call('PEXPIRETIME', key));
}

/** A TCP proxy that can stop forwarding without closing anything: see {@link freezableProxy}. */
export interface FreezableProxy {
  /** The port on 127.0.0.1 it listens on. */
  port: number;
  /** The URL of the Redis under test with this proxy's address instead of the server's. */
  url: string;
  /** Connections accepted so far. */
  readonly connections: number;
  /**
   * Stops forwarding in both directions, keeping every socket open (bytes sent meanwhile are dropped): to a
   * client, a half-open connection, as a network path that died without a word leaves it. New connections are
   * accepted and frozen too.
   */
  freeze(): void;
  /** Forwards again (on every connection; one frozen meanwhile has lost bytes, so its client must replace it). */
  unfreeze(): void;
}

/**
 * A TCP proxy on 127.0.0.1 to `host`:`port` (default: the Redis under test) that can be frozen; closed, with its
 * sockets, after the current test.
 */
export async function freezableProxy(target: { host: string; port: number } = redisTarget()): Promise<FreezableProxy> {
  let frozen = false;
  let connections = 0;
  const server = createServer((client) => {
    connections += 1;
    const upstream = connectSocket(target.port, target.host);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      openSockets.add(from);
      from.on('data', (chunk) => {
        if (!frozen) to.write(chunk);
      });
      from.on('error', () => undefined);
      from.on('close', () => to.destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  openServers.add(server);
  const port = (server.address() as { port: number }).port;
  const url = new URL(redisUrl ?? 'redis://127.0.0.1:1');
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    port,
    url: url.toString(),
    get connections() {
      return connections;
    },
    freeze: () => {
      frozen = true;
    },
    unfreeze: () => {
      frozen = false;
    },
  };
}

/** Host and port of the Redis under test. */
function redisTarget(): { host: string; port: number } {
  const url = new URL(redisUrl ?? 'redis://127.0.0.1:1');
  return { host: url.hostname, port: Number(url.port || 6379) };
}
