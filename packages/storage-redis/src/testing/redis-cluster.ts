/**
 * A throwaway Redis Cluster for tests (masters only, loopback, free ports), and the choice of which cluster a
 * test run uses.
 */
import { answersVersion } from './installed.js';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isRedisServerInstalled, startRedisServer, type RedisServer } from './redis-server.js';
import type { TestRedisSkip } from './resolve-test-redis.js';

/** One node of a Redis Cluster: where to connect (the shape ioredis's `Cluster` takes as a startup node). */
export interface RedisClusterNode {
  host: string;
  port: number;
}

/** Options of {@link startRedisCluster}. */
export interface RedisClusterOptions {
  /** Number of masters, each serving an equal share of the 16,384 hash slots. At least 3. Default 3. */
  masters?: number;
  /** The server binary, a path or a name looked up on `PATH`. Default `redis-server`. */
  binary?: string;
  /** The `redis-cli` binary that joins the nodes (`redis-cli --cluster create`). Default `redis-cli`. */
  cliBinary?: string;
  /**
   * How long to wait, in ms, for everything: the servers to answer `PING`, the join, and every node to
   * report `cluster_state:ok`. Default 30,000.
   */
  startTimeoutMs?: number;
}

/** A running cluster started by {@link startRedisCluster}. */
export interface RedisCluster {
  /** The masters, in port order of creation; each one owns a contiguous range of slots. */
  readonly nodes: readonly RedisClusterNode[];
  /**
   * Stops every node (SIGTERM, waits for each exit) and removes the cluster's temporary directory
   * (the nodes' working directories and `nodes.conf` files). Idempotent.
   */
  stop(): Promise<void>;
}

const DEFAULT_CLI = 'redis-cli';
/** The cluster bus of a node listens on its port + 10,000. */
const BUS_PORT_OFFSET = 10_000;

/** True when `binary --version` runs: `redis-cli` (or `binary`) is installed. Asked once per binary in a process. */
export function isRedisCliInstalled(binary: string = DEFAULT_CLI): boolean {
  return answersVersion(binary);
}

/**
 * Starts a Redis Cluster of `masters` masters (no replicas) on 127.0.0.1 for tests: one {@link startRedisServer}
 * each with `--cluster-enabled yes`, on free ports whose cluster-bus port (port + 10,000) is free as well,
 * joined with `redis-cli --cluster create … --cluster-replicas 0 --cluster-yes`. Resolves once every node
 * reports `cluster_state:ok`, knows every other node and sees all 16,384 slots assigned (polled every
 * 25 ms), so an ioredis `Cluster` on {@link RedisCluster.nodes} can serve any key at once.
 *
 * Nothing is persisted. Always `stop()` a cluster you start (e.g. in `afterAll` or a global teardown); the
 * servers are also sent SIGTERM when this Node.js process exits normally.
 *
 * @throws Error when `masters` is below 3, a binary is missing, a node does not start, `redis-cli` fails
 *   (the message holds its output), or the cluster is not ok within `startTimeoutMs`. Whatever was started
 *   is stopped and removed first.
 */
export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  if (!Number.isSafeInteger(masters) || masters < 3) {
    throw new TypeError(`masters must be a whole number >= 3 (Redis Cluster needs 3 masters), got ${String(masters)}`);
  }
  const startTimeoutMs = options.startTimeoutMs ?? 30_000;
  const deadline = Date.now() + startTimeoutMs;
  const root = await mkdtemp(join(tmpdir(), 'petstore-redis-cluster-'));
  const servers: RedisServer[] = [];
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await Promise.all(servers.map((server) => server.stop()));
    await rm(root, { recursive: true, force: true });
  };

  try {
    const started = await Promise.allSettled(
      Array.from({ length: masters }, (_, index) => startClusterNode(root, index, options.binary, deadline)),
    );
    for (const result of started) if (result.status === 'fulfilled') servers.push(result.value);
    const failed = started.find((result) => result.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    const nodes = servers.map((server): RedisClusterNode => ({ host: '127.0.0.1', port: server.port }));
    await createCluster(options.cliBinary ?? DEFAULT_CLI, nodes, deadline);
    for (const node of nodes) await waitUntilClusterOk(node, masters, deadline);
    return { nodes, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Starts one cluster-enabled server in `root/node-<index>`, on a port whose bus port is free too. */
async function startClusterNode(root: string, index: number, binary: string | undefined, deadline: number): Promise<RedisServer> {
  const dir = join(root, `node-${index}`);
  await mkdir(dir, { recursive: true });
  for (let attempt = 1; ; attempt++) {
    const port = await freePortWithFreeBusPort();
    try {
      return await startRedisServer({
        port,
        dir,
        ...(binary === undefined ? {} : { binary }),
        startTimeoutMs: Math.max(1, deadline - Date.now()),
        extraArgs: ['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf'), '--cluster-node-timeout', '5000'],
      });
    } catch (error) {
      // Another process may take the port or its bus port between the check and the bind.
      if (attempt >= 5 || !/in use/i.test(String(error))) throw error;
    }
  }
}

/** Runs `redis-cli --cluster create`; rejects with its output when it fails. */
function createCluster(cli: string, nodes: readonly RedisClusterNode[], deadline: number): Promise<void> {
  const args = ['--cluster', 'create', ...nodes.map((node) => `${node.host}:${node.port}`), '--cluster-replicas', '0', '--cluster-yes'];
  return new Promise((resolve, reject) => {
    execFile(cli, args, { timeout: Math.max(1, deadline - Date.now()) }, (error, stdout, stderr) => {
      const output = `${stdout}${stderr}`.trim();
      if (error) reject(new Error(`${cli} ${args.join(' ')} failed (${error.message}): ${output}`));
      // redis-cli reports a failed join on its output with exit code 0 in some versions.
      else if (!/All 16384 slots covered/.test(output)) reject(new Error(`${cli} ${args.join(' ')} did not cover every slot: ${output}`));
      else resolve();
    });
  });
}

/** Polls `CLUSTER INFO` on `node` until the cluster is ok there, with every node known and every slot assigned. */
async function waitUntilClusterOk(node: RedisClusterNode, masters: number, deadline: number): Promise<void> {
  let info = '';
  for (;;) {
    info = await clusterInfo(node).catch((error: unknown) => String(error));
    const field = (name: string) => new RegExp(`^${name}:(\\S+)`, 'm').exec(info)?.[1];
    if (field('cluster_state') === 'ok' && field('cluster_known_nodes') === String(masters) && field('cluster_slots_assigned') === '16384') {
      return;
    }
    if (Date.now() > deadline) throw new Error(`the cluster is not ok on ${node.host}:${node.port} in time; CLUSTER INFO: ${info}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** `CLUSTER INFO` of one node over a plain socket (its bulk-string reply). */
function clusterInfo(node: RedisClusterNode): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: node.host, port: node.port });
    let reply = '';
    socket.setTimeout(1000, () => socket.destroy(new Error('CLUSTER INFO timed out')));
    socket.once('error', reject);
    socket.once('connect', () => socket.write('*2\r\n$7\r\nCLUSTER\r\n$4\r\nINFO\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString('utf8');
      if (reply.startsWith('-')) {
        socket.destroy();
        reject(new Error(reply.trim()));
        return;
      }
      const header = /^\$(\d+)\r\n/.exec(reply);
      if (header !== null && Buffer.byteLength(reply) >= header[0].length + Number(header[1]) + 2) {
        socket.destroy();
        resolve(reply.slice(header[0].length));
      }
    });
    socket.once('close', () => reject(new Error('connection closed before CLUSTER INFO answered')));
  });
}

/** A free port on 127.0.0.1 whose cluster-bus port (+10,000) is free as well. */
async function freePortWithFreeBusPort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await listenAndClose(0);
    if (port + BUS_PORT_OFFSET <= 65_535 && (await isFree(port + BUS_PORT_OFFSET))) return port;
  }
  throw new Error('found no free port whose cluster-bus port (+10000) is free too');
}

async function isFree(port: number): Promise<boolean> {
  return listenAndClose(port).then(
    () => true,
    () => false,
  );
}

/** Listens on 127.0.0.1:port (0: any), closes, and resolves with the port. */
function listenAndClose(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** A Redis Cluster to test against; `stop()` stops it when this run started it (a no-op for `REDIS_CLUSTER_NODES`). */
export interface TestRedisCluster {
  nodes: RedisClusterNode[];
  stop(): Promise<void>;
}

/**
 * Finds a Redis Cluster for tests, in this order:
 *
 * 1. `REDIS_CLUSTER_NODES` when set: comma-separated `host:port` startup nodes of an existing cluster, used
 *    as is, never stopped.
 * 2. A throwaway 3-master cluster ({@link startRedisCluster}) when `redis-server` and `redis-cli` are on
 *    `PATH`; `stop()` ends it.
 * 3. Otherwise `{ skipReason }`, for `describe.skipIf` — unless `PETSTORE_REQUIRE_REDIS=1`, which makes a
 *    missing cluster an error, so CI cannot pass by skipping.
 *
 * @param env where to read `REDIS_CLUSTER_NODES` and `PETSTORE_REQUIRE_REDIS`. Default `process.env`.
 * @param options.binary the server binary (path or name on `PATH`). Default `redis-server`.
 * @param options.cliBinary the `redis-cli` binary. Default `redis-cli`.
 * @throws Error when `REDIS_CLUSTER_NODES` is not a list of `host:port`, or when `PETSTORE_REQUIRE_REDIS=1`
 *   and no cluster is available (the message says why).
 */
export async function resolveTestRedisCluster(
  env: Record<string, string | undefined> = process.env,
  options: { binary?: string; cliBinary?: string } = {},
): Promise<TestRedisCluster | TestRedisSkip> {
  const listed = env.REDIS_CLUSTER_NODES;
  if (listed !== undefined && listed.trim() !== '') {
    const nodes = listed.split(',').map((entry) => {
      const match = /^\s*(.+):(\d+)\s*$/.exec(entry);
      if (match === null) throw new Error(`REDIS_CLUSTER_NODES must be comma-separated host:port, got ${JSON.stringify(entry)}`);
      return { host: match[1] as string, port: Number(match[2]) };
    });
    return { nodes, stop: async () => {} };
  }
  const binary = options.binary ?? 'redis-server';
  const cliBinary = options.cliBinary ?? DEFAULT_CLI;
  let skipReason: string;
  if (!isRedisServerInstalled(binary)) {
    skipReason = `REDIS_CLUSTER_NODES is not set and ${binary} is not installed`;
  } else if (!isRedisCliInstalled(cliBinary)) {
    skipReason = `REDIS_CLUSTER_NODES is not set and ${cliBinary} is not installed`;
  } else {
    try {
      const cluster = await startRedisCluster({ binary, cliBinary });
      return { nodes: [...cluster.nodes], stop: () => cluster.stop() };
    } catch (error) {
      skipReason = `REDIS_CLUSTER_NODES is not set and the cluster failed to start: ${error instanceof Error ? error.message : String(error)}`;
    }
  }
  if (env.PETSTORE_REQUIRE_REDIS === '1') throw new Error(`No Redis Cluster for the tests (PETSTORE_REQUIRE_REDIS=1): ${skipReason}`);
  return { skipReason };
}
