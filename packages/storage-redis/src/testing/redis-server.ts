/**
 * A throwaway `redis-server` child process for tests: loopback only, a free port, its own directory.
 */
import { answersVersion } from './installed.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Options of {@link startRedisServer}. */
export interface RedisServerOptions {
  /** TCP port on 127.0.0.1. Default: a free port picked by the OS. */
  port?: number;
  /** Turn on the append-only file, so data survives {@link RedisServer.restart}. Default `false` (no persistence at all). */
  appendOnly?: boolean;
  /**
   * Working directory (RDB/AOF files). Default: a new temporary directory. Without `appendOnly` it holds
   * nothing and {@link RedisServer.stop} removes it. With `appendOnly` it is kept after `stop()` (so a
   * restart finds the data) and removed when this Node.js process exits normally; a process that is killed
   * (e.g. a test worker ended with SIGTERM) leaves it behind, so remove `dir` after your final `stop()`.
   */
  dir?: string;
  /** The server binary, a path or a name looked up on `PATH`. Default `redis-server`. */
  binary?: string;
  /** How long to wait for the server to answer `PING`, in ms. Default 10,000. */
  startTimeoutMs?: number;
  /**
   * More `redis-server` command-line arguments, appended after this function's own (so they can override
   * them), e.g. `['--cluster-enabled', 'yes', '--cluster-config-file', '/tmp/x/nodes.conf']`. Also used by
   * {@link RedisServer.restart}. Default: none.
   */
  extraArgs?: readonly string[];
}

/** A running `redis-server` started by {@link startRedisServer}. */
export interface RedisServer {
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /** The server's working directory. */
  readonly dir: string;
  /**
   * Stops the server with SIGTERM and resolves once the process has exited (SIGKILL after 10 s). Idempotent.
   * {@link RedisServer.restart} can bring it back (same port and directory), e.g. after a simulated outage.
   */
  stop(): Promise<void>;
  /**
   * Starts the server again on the same port and directory — stopping it first (SIGTERM, waits for exit)
   * when it runs — and resolves when it answers `PING` (with `appendOnly`, after it has reloaded its data).
   * @throws Error when the server does not come back (e.g. another process took the port meanwhile).
   */
  restart(): Promise<void>;
}

const DEFAULT_BINARY = 'redis-server';
const KILL_AFTER_MS = 10_000;

/** True when `binary --version` runs: the Redis server binary is installed. Asked once per binary in a process. */
export function isRedisServerInstalled(binary: string = DEFAULT_BINARY): boolean {
  return answersVersion(binary);
}

/**
 * Starts `redis-server` on 127.0.0.1 and resolves once it answers `PING`. The server is also sent SIGTERM
 * when this Node.js process exits normally (`process.exit`, an uncaught error); a process that is itself
 * killed by a signal cannot do that, so always `stop()` servers you start (e.g. in `afterAll`).
 *
 * @throws Error when the binary is missing, the server exits during start-up (the message holds its output),
 *   or it does not answer within `startTimeoutMs`.
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const binary = options.binary ?? DEFAULT_BINARY;
  const startTimeoutMs = options.startTimeoutMs ?? 10_000;
  const ownsDir = options.dir === undefined;
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'petstore-redis-')));
  const args = (port: number) => [
    '--port', String(port),
    '--bind', '127.0.0.1',
    '--dir', dir,
    '--save', '',
    '--appendonly', options.appendOnly ? 'yes' : 'no',
    '--daemonize', 'no',
    '--loglevel', 'warning',
    ...(options.extraArgs ?? []),
  ];

  let child: ChildProcess | undefined;
  let port = options.port ?? 0;
  try {
    // A free port can be taken between picking and binding it: pick again a few times.
    for (let attempt = 1; ; attempt++) {
      if (options.port === undefined) port = await freePort();
      try {
        child = await launch(binary, args(port), port, startTimeoutMs);
        break;
      } catch (error) {
        if (options.port !== undefined || attempt >= 3 || !/in use/i.test(String(error))) throw error;
      }
    }
  } catch (error) {
    if (ownsDir) await rm(dir, { recursive: true, force: true });
    throw error;
  }

  if (ownsDir && options.appendOnly) removeAtExit(dir);

  const stopChild = async () => {
    const current = child;
    child = undefined;
    if (current) await terminate(current);
  };

  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    async stop() {
      await stopChild();
      if (ownsDir && !options.appendOnly) await rm(dir, { recursive: true, force: true });
    },
    async restart() {
      await stopChild();
      await mkdir(dir, { recursive: true });
      child = await launch(binary, args(port), port, startTimeoutMs);
    },
  };
}

// Servers to stop and temporary directories to remove when this process exits. Process-wide on purpose: one
// 'exit' listener for every server this process starts, instead of one each (Node warns past 10 listeners, and
// a test run starts a dozen: servers, cluster nodes, Valkey).
const directoriesToRemove = new Set<string>();
const serversToStop = new Set<ChildProcess>();
let exitListener = false;

function atExit(): void {
  if (exitListener) return;
  exitListener = true;
  process.once('exit', () => {
    for (const child of serversToStop) child.kill('SIGTERM');
    for (const entry of directoriesToRemove) rmSync(entry, { recursive: true, force: true });
  });
}

function removeAtExit(dir: string): void {
  atExit();
  directoriesToRemove.add(dir);
}

/** Spawns the server and waits until it answers PING; kills it on failure. */
async function launch(binary: string, args: string[], port: number, startTimeoutMs: number): Promise<ChildProcess> {
  // Otherwise the PING below could be answered by that other server.
  if (await ping(port)) throw new Error(`port ${port} is in use by another Redis server`);
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  let exit: { code: number | null; signal: string | null; error?: Error } | undefined;
  child.once('exit', (code, signal) => {
    exit ??= { code, signal };
  });
  child.once('error', (error) => {
    exit ??= { code: null, signal: null, error };
  });
  atExit();
  serversToStop.add(child);
  child.once('exit', () => serversToStop.delete(child));

  const deadline = Date.now() + startTimeoutMs;
  while (!(await ping(port))) {
    if (exit !== undefined) {
      const how = exit.error ? exit.error.message : `exit code ${exit.code ?? exit.signal}`;
      throw new Error(`redis-server did not start (${how}): ${output.trim()}`);
    }
    if (Date.now() > deadline) {
      await terminate(child);
      throw new Error(`redis-server did not answer PING on port ${port} within ${startTimeoutMs} ms: ${output.trim()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return child;
}

/** SIGTERM, then wait for exit; SIGKILL when it takes longer than 10 s. */
async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), KILL_AFTER_MS);
  await exited;
  clearTimeout(timer);
}

/** A TCP port free on 127.0.0.1 right now. */
async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/** True when a Redis server on 127.0.0.1:port answers PING with PONG (not while it is still loading data). */
async function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('*1\r\n$4\r\nPING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString('utf8');
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
    socket.once('close', () => done(false));
  });
}
