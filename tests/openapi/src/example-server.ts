/**
 * Starts the real Fastify example server — its compiled build, `node examples/dist/fastify-server.js` (the build
 * `npm test` runs first makes it from src/ with no change; examples/src/npm-start.test.ts runs the TypeScript
 * source through `npm start`), PORT=0 — and stops it. The spawn logic is a copy of examples/src/spawn-example.ts,
 * kept here so this suite does not import across workspaces.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const examplesDir = fileURLToPath(new URL('../../../examples/', import.meta.url));

/** A running example server. */
export interface ExampleServer {
  /** `http://127.0.0.1:<port>`, without the `/v1` prefix. */
  readonly origin: string;
  /** Everything it printed so far. */
  output(): string;
  /** Sends SIGTERM and waits for the process to exit (SIGKILL after 5 s). */
  stop(): Promise<void>;
}

/**
 * Starts the build of `examples/src/<script>` with `PORT=0`, `HOST=127.0.0.1` and `env`, and resolves once it prints where
 * it listens. Rejects when it exits first or prints no banner within 45 s.
 */
export function startExample(script: string, env: Record<string, string>): Promise<ExampleServer> {
  const child = spawn(process.execPath, [`dist/${script.replace(/\.ts$/, '.js')}`], {
    cwd: examplesDir,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  return new Promise((resolve, reject) => {
    // A guard against a hang (not a measurement), under the hook timeout (vitest.config.ts).
    const timer = setTimeout(() => {
      void stop();
      reject(new Error(`no banner after 45 s:\n${output}`));
    }, 45_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const origin = /listening on (http:\/\/[\d.]+:\d+)\/v1/.exec(output)?.[1];
      if (origin && /curl|API key\(s\) loaded/.test(output)) {
        clearTimeout(timer);
        resolve({ origin, output: () => output, stop });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`exited with ${code ?? signal}:\n${output}`));
    });
  });
}
