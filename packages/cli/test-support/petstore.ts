/**
 * Runs a `petstore` command line with the environment given (and none of the test run's PETSTORE_* variables),
 * stdout and stderr apart: `petstore()` in this process through `runCli` (what the command runs, without the
 * process start-up: a spawned command costs about 0.3 s of CPU, which 100 commands would make half a minute of
 * `npm test`), `petstoreProcess()` as an operator's shell would, the built `node bin/petstore.js <args>` (which
 * runs dist/bin.js) in its own process.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runCli } from '../src/run.js';

const BIN = fileURLToPath(new URL('../bin/petstore.js', import.meta.url));

/** How a run of the command ended. */
export interface CommandRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A guard against a hang, not a measurement: the command is killed after this long and the test fails. */
const DEADLINE_MS = 25_000;

/** The test process's environment without its PETSTORE_* variables, plus `env`. */
function environment(env: Record<string, string>): Record<string, string | undefined> {
  return { ...Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('PETSTORE_'))), ...env };
}

/** Runs `petstore <args>` in this process with `env` (PETSTORE_DATABASE_URL, PETSTORE_REDIS_URL). */
export async function petstore(args: readonly string[], env: Record<string, string> = {}): Promise<CommandRun> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, { env: environment(env), stdout: (text) => (stdout += text), stderr: (text) => (stderr += text) });
  return { code, stdout, stderr };
}

/** Runs the built command `petstore <args>` in a process of its own with `env`; resolves once it has exited. */
export function petstoreProcess(args: readonly string[], env: Record<string, string> = {}): Promise<CommandRun> {
  const child = spawn(process.execPath, [BIN, ...args], { env: environment(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`petstore ${args.join(' ')} did not exit within ${DEADLINE_MS} ms:\n${stdout}\n${stderr}`));
    }, DEADLINE_MS);
    child.on('error', reject);
    // 'close': the pipes have delivered everything the process wrote.
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Runs the command and parses its stdout as one JSON object; fails with its output unless it exited 0. */
export async function petstoreJson<T = Record<string, unknown>>(args: readonly string[], env: Record<string, string>): Promise<T> {
  const run = await petstore([...args, '--json'], env);
  if (run.code !== 0 || run.stderr !== '') throw new Error(`petstore ${args.join(' ')} --json exited ${run.code}:\n${run.stderr}${run.stdout}`);
  return JSON.parse(run.stdout) as T;
}

/**
 * `redisUrl` with Redis database 13, where no server records where it keeps its data: the example servers that
 * other files start on the shared Redis record there (database 0) that everything is in Redis, which a command
 * given both variables would obey. For tests of the command without a servers' record.
 */
export function redisWithoutRecord(redisUrl: string): string {
  const url = new URL(redisUrl);
  url.pathname = '/13';
  return url.toString();
}
