/**
 * A throwaway PostgreSQL server for tests: `initdb` into a temporary directory, `postgres` on a free port of
 * 127.0.0.1, torn down afterwards.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import { once } from 'node:events';
import { chownSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Options of {@link startPostgresServer}. */
export interface PostgresServerOptions {
  /** Directory of `initdb` and `postgres`. Default: `PETSTORE_PG_BINDIR`, else `initdb` on `PATH`, else the newest `/usr/lib/postgresql/<major>/bin` (Debian). */
  binDir?: string;
  /** How long to wait for the server to accept connections, in ms. Default 30,000. */
  startTimeoutMs?: number;
}

/** A running server started by {@link startPostgresServer}. */
export interface PostgresServer {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication, loopback only). */
  readonly url: string;
  readonly port: number;
  /** The data directory. */
  readonly dir: string;
  /** Stops the server (fast shutdown, SIGINT; SIGKILL after 10 s) and removes its directory. Idempotent. */
  stop(): Promise<void>;
  /**
   * Kills the server and every backend with SIGKILL, as a crash would: no shutdown checkpoint, open connections
   * drop. The data directory stays; {@link PostgresServer.restart} recovers it (committed transactions survive).
   */
  kill(): Promise<void>;
  /** Starts the server again on the same port and directory (after `kill()`, with crash recovery). */
  restart(): Promise<void>;
}

const KILL_AFTER_MS = 10_000;

/** The directory holding `initdb` and `postgres`, or `undefined` when PostgreSQL is not installed. */
export function findPostgresBinDir(env: Record<string, string | undefined> = process.env): string | undefined {
  if (env.PETSTORE_PG_BINDIR) return env.PETSTORE_PG_BINDIR;
  for (const dir of (env.PATH ?? '').split(':')) {
    if (dir !== '' && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'postgres'))) return dir;
  }
  const debian = '/usr/lib/postgresql';
  if (!existsSync(debian)) return undefined;
  const majors = readdirSync(debian)
    .filter((entry) => /^\d+$/.test(entry) && existsSync(join(debian, entry, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return majors[0] === undefined ? undefined : join(debian, majors[0], 'bin');
}

/**
 * PostgreSQL refuses to run as root: under root the server runs as the `postgres` user (Debian's package
 * creates it), else `nobody`. Answers the ids to run as, or `undefined` to run as this process's user.
 */
function serverUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const users = readFileSync('/etc/passwd', 'utf8').split('\n').map((line) => line.split(':'));
  const found = users.find((fields) => fields[0] === 'postgres') ?? users.find((fields) => fields[0] === 'nobody');
  if (found === undefined) throw new Error('running as root, and neither a postgres nor a nobody user exists to run PostgreSQL as');
  return { uid: Number(found[2]), gid: Number(found[3]) };
}

/**
 * Runs `initdb` (trust authentication, user `postgres`, UTF-8, C locale) into a new temporary directory and
 * starts `postgres` there on a free port of 127.0.0.1 (no Unix socket), with 300 connections (test runs open many
 * pools) and `fsync=off` (a killed server keeps
 * what it committed, because the operating system still holds the writes; only a machine crash would lose
 * them). Resolves once it accepts connections. The server is killed when this Node.js process exits normally;
 * always `stop()` the servers you start.
 *
 * @throws Error when PostgreSQL is not installed, `initdb` fails, or the server does not start in time (the
 *   message holds its output).
 */
export async function startPostgresServer(options: PostgresServerOptions = {}): Promise<PostgresServer> {
  const binDir = options.binDir ?? findPostgresBinDir();
  if (binDir === undefined) throw new Error('PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql/*/bin)');
  const startTimeoutMs = options.startTimeoutMs ?? 30_000;
  const user = serverUser();
  const dir = await mkdtemp(join(tmpdir(), 'petstore-postgres-'));
  if (user) chownSync(dir, user.uid, user.gid);
  const spawnAs = user ? { uid: user.uid, gid: user.gid } : {};
  try {
    // Not execFileSync: a test runner's thread (vitest's main one, in a global setup) must not stand still meanwhile.
    await promisify(execFile)(join(binDir, 'initdb'), ['-D', dir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--locale=C', '--no-sync'], {
      ...spawnAs,
      env: { ...process.env, LC_ALL: 'C' },
    });
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    const output = (error as { stderr?: string }).stderr || String(error);
    throw new Error(`initdb failed: ${output.trim()}`);
  }
  let child: ChildProcess | undefined;
  let port = 0;
  const start = async () => {
    child = await launch(join(binDir, 'postgres'), dir, port, spawnAs, startTimeoutMs);
  };
  try {
    // A free port can be taken between picking and binding it: pick again a few times.
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      try {
        await start();
        break;
      } catch (error) {
        if (attempt >= 3 || !/in use/i.test(String(error))) throw error;
      }
    }
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  const end = async (signal: NodeJS.Signals) => {
    const current = child;
    child = undefined;
    if (current) await terminate(current, signal);
  };
  return {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    dir,
    async stop() {
      await end('SIGINT');
      await rm(dir, { recursive: true, force: true });
    },
    kill: () => end('SIGKILL'),
    async restart() {
      await end('SIGINT');
      await start();
    },
  };
}

// One 'exit' listener for every server this process starts (Node warns past 10 listeners).
const serversToKill = new Set<ChildProcess>();
let exitListener = false;

/** Spawns `postgres` in its own process group and waits until it accepts connections. */
async function launch(
  binary: string,
  dir: string,
  port: number,
  spawnAs: { uid?: number; gid?: number },
  startTimeoutMs: number,
): Promise<ChildProcess> {
  const args = ['-D', dir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'fsync=off', '-c', 'max_connections=300'];
  // detached: the server leads its own process group, so kill() can end every backend with one signal.
  const child = spawn(binary, args, { ...spawnAs, detached: true, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' } });
  let output = '';
  let ready = false;
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-4000);
    if (output.includes('database system is ready to accept connections')) ready = true;
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  let exited: string | undefined;
  child.once('exit', (code, signal) => {
    exited ??= `exit code ${code ?? signal}`;
  });
  child.once('error', (error) => {
    exited ??= error.message;
  });
  if (!exitListener) {
    exitListener = true;
    process.once('exit', () => {
      for (const server of serversToKill) killGroup(server, 'SIGKILL');
    });
  }
  serversToKill.add(child);
  child.once('exit', () => serversToKill.delete(child));
  const deadline = Date.now() + startTimeoutMs;
  while (!ready) {
    if (exited !== undefined) {
      const reason = /already in use/i.test(output) ? `port ${port} is in use` : exited;
      throw new Error(`postgres did not start (${reason}): ${output.trim()}`);
    }
    if (Date.now() > deadline) {
      await terminate(child, 'SIGKILL');
      throw new Error(`postgres did not accept connections on port ${port} within ${startTimeoutMs} ms: ${output.trim()}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return child;
}

/** Sends `signal` to the server's whole process group (the postmaster and its backends). */
function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    process.kill(-(child.pid as number), signal);
  } catch {
    // already gone
  }
}

/** Signals the server and waits for it to exit; SIGKILL to the group when it takes longer than 10 s. */
async function terminate(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  if (signal === 'SIGKILL') killGroup(child, 'SIGKILL');
  else child.kill(signal);
  const timer = setTimeout(() => killGroup(child, 'SIGKILL'), KILL_AFTER_MS);
  await exited;
  clearTimeout(timer);
  // After SIGKILL, backends of the group may outlive the postmaster for a moment; they hold its shared memory,
  // and a restart before they are gone would refuse to start.
  if (signal === 'SIGKILL') await waitForGroupToEnd(child.pid as number);
}

async function waitForGroupToEnd(pgid: number): Promise<void> {
  const deadline = Date.now() + KILL_AFTER_MS;
  for (;;) {
    try {
      process.kill(-pgid, 0);
    } catch {
      return;
    }
    if (Date.now() > deadline) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A TCP port free on 127.0.0.1 right now. */
async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
