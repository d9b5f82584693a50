/**
 * Runs the built command, `node bin/petstore.js <args>` (which runs dist/bin.js), as an operator's shell would: its own process, the
 * environment given (and none of the test run's PETSTORE_* variables), stdout and stderr apart.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../bin/petstore.js', import.meta.url));

/** How a run of the command ended. */
export interface CommandRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A guard against a hang, not a measurement: the command is killed after this long and the test fails. */
const DEADLINE_MS = 25_000;

/** Runs `petstore <args>` with `env` (PETSTORE_DATABASE_URL, PETSTORE_REDIS_URL) and resolves once it has exited. */
export function petstore(args: readonly string[], env: Record<string, string> = {}): Promise<CommandRun> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('PETSTORE_')));
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
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
