/**
 * Starts an example server for tests — its compiled build, `node dist/<server>.js` in examples/ (the build of
 * `npm test`, tsup, makes it from src/ with no change), or an npm script of the repository (`npm start`, which
 * runs the TypeScript source with tsx as a reader would) in its own process group — with PORT=0, and stops
 * them all.
 * Every wait is for an event (a line printed, the process ending); its bound only ends a wait that has failed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { GUARD_CALL_TIMEOUT_MS } from '../../packages/core/test-support/call-timeout.js';

const examplesDir = fileURLToPath(new URL('..', import.meta.url));
const repositoryDir = fileURLToPath(new URL('../..', import.meta.url));
const running: ChildProcess[] = [];

/** How a process ended: its exit code, or the signal that ended it. */
export interface ProcessEnd {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A started example whose banner said where it listens. */
export interface RunningExample {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** What it printed (stdout and stderr) up to its banner. */
  output: string;
  child: ChildProcess;
  /** Everything it printed so far. */
  printed(): string;
  /** Resolves once what it printed matches `pattern`; rejects after `timeoutMs` or when it exits first. */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<void>;
  /** Resolves when the process has exited. */
  exited: Promise<ProcessEnd>;
}

/**
 * Stops every process started here that still runs: a server with SIGTERM, an npm script's whole process
 * group with SIGKILL (a test that got this far without stopping it has failed already).
 */
export function stopExamples(): void {
  for (const child of running.splice(0)) {
    if (child.pid === undefined) continue;
    if (child.spawnargs[0] === 'npm') {
      // Even after npm has exited: what it started may still run in its group.
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // the group is gone
      }
    } else if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
    }
  }
}

function spawnExample(script: string, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, [`dist/${script.replace(/\.ts$/, '.js')}`], {
    cwd: examplesDir,
    // The servers' own store deadline (500 ms) has been outlasted on a busy CI machine (a list after creates on two
    // servers got a 503): the guard, unless a test sets its own (those about that deadline do).
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', PETSTORE_CALL_TIMEOUT_MS: String(GUARD_CALL_TIMEOUT_MS), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.push(child);
  return child;
}

/** Starts the build of `examples/src/<script>` and resolves once it prints where it listens. */
export function startExample(script: string, env: Record<string, string>): Promise<RunningExample> {
  return whenListening(spawnExample(script, env));
}

/** What a process printed, apart, and how it ended. */
export interface FinishedExample extends ProcessEnd {
  stdout: string;
  stderr: string;
}

/** Runs the build of `examples/src/<script>` (one expected not to start, say) and resolves once it has exited. */
export function runExampleToExit(script: string, env: Record<string, string>): Promise<FinishedExample> {
  const child = spawnExample(script, env);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // 'close', not 'exit': by then the pipes have delivered everything the process wrote.
  return new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
}

/**
 * Runs `npm <args>` (e.g. `start`) at the repository root as a user would from a shell — without the
 * `npm_*` variables of the npm running these tests — in a process group of its own, so that
 * {@link stopExamples} can end every process it started. Resolves once the server prints where it listens.
 */
export function startNpmScript(args: string[], env: Record<string, string>): Promise<RunningExample> {
  const userEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
  const child = spawn('npm', args, {
    cwd: repositoryDir,
    env: { ...userEnv, PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  return whenListening(child);
}

function whenListening(child: ChildProcess): Promise<RunningExample> {
  if (!running.includes(child)) running.push(child);
  let printed = '';
  const waiters = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    printed += chunk.toString();
    for (const check of waiters) check();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<ProcessEnd>((resolve) => {
    child.once('exit', (code, signal) => {
      resolve({ code, signal });
      for (const check of waiters) check();
    });
  });

  const waitForOutput = (pattern: RegExp, timeoutMs = 20_000) =>
    new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => finish(new Error(`not printed within ${timeoutMs} ms: ${pattern}\n${printed}`)), timeoutMs);
      const finish = (error?: Error) => {
        clearTimeout(timer);
        waiters.delete(check);
        if (error) reject(error);
        else resolve();
      };
      const check = () => {
        if (pattern.test(printed)) finish();
        else if (child.exitCode !== null || child.signalCode !== null) {
          finish(new Error(`exited (${child.exitCode ?? child.signalCode}) before printing ${pattern}:\n${printed}`));
        }
      };
      waiters.add(check);
      check();
    });

  // The banner up to its last line: the `KEY=` and curl lines of a demo key, or the count of configured keys.
  const banner = /listening on http:\/\/[\d.]+:\d+\/v1\n[^]*(-d '[^\n]*\/v1\/categories|API key\(s\) loaded from PETSTORE_API_KEYS\.)\n/;
  return waitForOutput(banner).then(() => {
    const url = /listening on (http:\/\/[\d.]+:\d+)\/v1/.exec(printed)![1]!;
    return { url, output: printed, child, printed: () => printed, waitForOutput, exited };
  });
}
