/**
 * Starts an example server as a user would (`tsx src/<server>.ts`, PORT=0) for tests, and stops them all.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const examplesDir = fileURLToPath(new URL('..', import.meta.url));
const running: ChildProcess[] = [];

/** Stops every server started by {@link startExample}. */
export function stopExamples(): void {
  for (const child of running.splice(0)) child.kill('SIGTERM');
}

/** Starts a server and resolves with everything it printed once it says where it listens. */
export function startExample(script: string, env: Record<string, string>): Promise<{ url: string; output: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', `src/${script}`], {
    cwd: examplesDir,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.push(child);
  return new Promise((resolve, reject) => {
    let output = '';
    const timer = setTimeout(() => reject(new Error(`no banner after 20 s:\n${output}`)), 20_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const url = /listening on (http:\/\/[\d.]+:\d+)\/v1/.exec(output)?.[1];
      if (url && /curl|API key\(s\) loaded/.test(output)) {
        clearTimeout(timer);
        setTimeout(() => resolve({ url, output }), 50);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`exited with ${code}:\n${output}`)));
  });
}
