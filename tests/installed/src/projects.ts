/**
 * Throwaway projects outside the workspace, with the packages installed from their packed tarballs — what a
 * user gets from the registry, and nothing of the workspace (no symlinks, no hoisted dev dependencies).
 */
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const run = promisify(execFile);

/** The published packages: workspace folder → package name. */
export const PACKAGES = {
  core: '@petstore/core',
  'storage-memory': '@petstore/storage-memory',
  'storage-redis': '@petstore/storage-redis',
  'storage-postgres': '@petstore/storage-postgres',
  'adapter-fastify': '@petstore/adapter-fastify',
  'adapter-express': '@petstore/adapter-express',
  client: '@petstore/client',
  cli: '@petstore/cli',
  opentelemetry: '@petstore/opentelemetry',
} as const;
export type PackageName = (typeof PACKAGES)[keyof typeof PACKAGES];

/**
 * The environment for npm in a throwaway project: without the `npm_*` variables of the `npm test` that runs
 * us (they would point npm back at the workspace), offline-first so the packages `npm ci` already fetched come
 * from the cache.
 */
export function npmEnvironment(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) if (!/^npm_/i.test(name)) env[name] = value;
  return { ...env, npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' };
}

/** Runs npm (the one that runs the tests) with `args` in `cwd`; rejects with npm's output when it fails. */
export async function npm(args: string[], cwd: string): Promise<string> {
  const npmCli = process.env.npm_execpath;
  const [file, fileArgs] = npmCli !== undefined && /npm-cli\.js$/.test(npmCli) ? [process.execPath, [npmCli, ...args]] : ['npm', args];
  try {
    const { stdout } = await run(file, fileArgs, { cwd, env: npmEnvironment(), maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  } catch (error) {
    const failure = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`npm ${args.join(' ')} failed in ${cwd}:\n${failure.stderr ?? ''}\n${failure.stdout ?? ''}`, { cause: error });
  }
}

/** Packs every package (one npm call) into `destination`; answers package name → tarball path. */
export async function packAll(destination: string): Promise<Record<PackageName, string>> {
  const workspaces = Object.keys(PACKAGES).flatMap((folder) => ['-w', `packages/${folder}`]);
  const output = await npm(['pack', ...workspaces, '--json', '--pack-destination', destination], ROOT);
  const packed = JSON.parse(output) as { name: PackageName; filename: string }[];
  return Object.fromEntries(packed.map(({ name, filename }) => [name, join(destination, filename)])) as Record<PackageName, string>;
}

/** The version of a package installed in the workspace: the throwaway projects take the same, from npm's cache. */
export function workspaceVersion(name: string): string {
  const path = Object.values(PACKAGES).includes(name as PackageName)
    ? join(ROOT, 'packages', name.replace('@petstore/', ''), 'package.json')
    : join(ROOT, 'node_modules', name, 'package.json');
  return (JSON.parse(readFileSync(path, 'utf8')) as { version: string }).version;
}

/** A fresh folder under the system's temporary folder (outside the workspace). */
export async function throwawayFolder(label: string): Promise<{ path: string; remove: () => Promise<void> }> {
  const path = await mkdtemp(join(tmpdir(), `petstore-${label}-`));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

/** Writes `package.json` with `dependencies` into `folder` and runs `npm install` there. */
export async function installProject(folder: string, dependencies: Record<string, string>, type: 'module' | 'commonjs' = 'commonjs'): Promise<void> {
  await mkdir(folder, { recursive: true });
  await writeFile(join(folder, 'package.json'), JSON.stringify({ name: 'throwaway', private: true, type, dependencies }, null, 2));
  await npm(['install', '--no-package-lock', '--ignore-scripts', '--loglevel=error'], folder);
}

export async function readJson<T>(path: string): Promise<T> {
  return JSON.parse(await readFile(path, 'utf8')) as T;
}

/**
 * How long a child process may take to exit (`runNode`) or to listen (`startServer`) before it is killed and
 * its output shown: a guard against a hang, not a measurement — generous for a busy 2-core machine, and under
 * the test timeout (vitest.config.ts) so the failure names the child rather than the test.
 */
export const CHILD_DEADLINE_MS = 45_000;

/** Runs `node file` in `cwd`; answers its exit code and output. */
export function runNode(file: string, cwd: string, env: NodeJS.ProcessEnv, timeoutMs = CHILD_DEADLINE_MS): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${file} did not exit within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** Starts `node file` in `cwd` as a server; resolves once its port accepts connections. */
export async function startServer(file: string, cwd: string, env: NodeJS.ProcessEnv & { PORT: string }): Promise<{ output: () => string; stop: () => Promise<number | null> }> {
  const child = spawn(process.execPath, [file], { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal === 'SIGTERM' ? 0 : null))));
  const deadline = Date.now() + CHILD_DEADLINE_MS;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${file} exited with ${child.exitCode} before listening:\n${output}`);
    try {
      await fetch(`http://127.0.0.1:${env.PORT}/`, { signal: AbortSignal.timeout(1_000) });
      break;
    } catch {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`${file} did not listen on port ${env.PORT} within ${CHILD_DEADLINE_MS / 1000} s:\n${output}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return {
    output: () => output,
    stop: () => {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 3_000);
      return exited.finally(() => clearTimeout(killer));
    },
  };
}
