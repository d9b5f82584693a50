/**
 * Helpers for this package's tests: the Redis (and Redis Cluster) under test, clients that are closed after
 * each test, and a unique key prefix per store so tests never collide (its keys are deleted after the test).
 */
import { randomUUID } from 'node:crypto';
import { connect as connectSocket, createServer, type Socket } from 'node:net';
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { afterEach, inject } from 'vitest';

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

const openClients = new Set<Redis | Cluster>();
const usedPrefixes = new Set<string>();
const usedValkeyPrefixes = new Set<string>();
const usedClusterPrefixes = new Set<string>();
const openSockets = new Set<Socket>();

afterEach(async () => {
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
  for (const socket of openSockets) socket.destroy();
  openSockets.clear();
  const clients = [...openClients];
  openClients.clear();
  await Promise.all(
    clients.map(async (client) => {
      if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
      else client.disconnect();
    }),
  );
});

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
 * A key prefix no other test uses; its keys are deleted after the current test, on the Redis server,
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

/** A rate-limit key's stored state, decoded from its packed value (layout: rateLimitRedisKey's TSDoc). */
export interface StoredRateLimitState {
  names: string[];
  counters: Record<string, { startMs: number; count: number }>;
  rejected?: { startMs: number; count: number };
  bannedUntilMs: number;
}

/** Reads and decodes the state of one rate-limit key; `null` when the key does not exist. */
export async function readRateLimitState(client: Pick<Redis, 'getBuffer'>, redisKey: string): Promise<StoredRateLimitState | null> {
  const value = await client.getBuffer(redisKey);
  if (value === null) return null;
  const n = value.readUInt8(0);
  const number = (index: number) => value.readDoubleLE(1 + 8 * index);
  const names = JSON.parse(value.subarray(1 + 8 * (3 + 2 * n)).toString('utf8')) as string[];
  const counters: StoredRateLimitState['counters'] = {};
  names.forEach((name, i) => (counters[name] = { startMs: number(3 + i), count: number(3 + n + i) }));
  const state: StoredRateLimitState = { names, counters, bannedUntilMs: number(2) };
  if (number(1) > 0) state.rejected = { startMs: number(0), count: number(1) };
  return state;
}

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
