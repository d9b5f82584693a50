/**
 * `npm start` and `npm run start:express`: builds what the examples import (turbo, cached), then runs the
 * example server in examples/ (`node --import tsx src/<fastify|express>-server.ts`) and hands it SIGTERM,
 * SIGINT and SIGHUP, so a signal sent to the `npm start` process reaches the server, which then shuts down
 * gracefully. Exits with the server's exit status.
 *
 * npm runs a script with `sh -c`, and sh (dash) waits for its child without passing signals on: npm would
 * signal the shell, the shell would die, and the server would keep running. The root package.json scripts
 * therefore say `exec node scripts/start-example.mjs …`, so npm's child is this process.
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { fileURLToPath } from 'node:url';

const servers = { fastify: 'src/fastify-server.ts', express: 'src/express-server.ts' };
const which = process.argv[2];
if (!Object.hasOwn(servers, which ?? '')) {
  console.error('usage: node scripts/start-example.mjs fastify|express');
  process.exit(2);
}
const root = fileURLToPath(new URL('..', import.meta.url));

/** The child running now (the build, then the server). */
let child;
/** The first signal received, if any: after the build, the server is then not started. */
let received;
const forwardedSignals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
const forward = (signal) => {
  received ??= signal;
  child?.kill(signal);
};
for (const signal of forwardedSignals) process.on(signal, forward);

/** Runs a command with this process's stdio; resolves with how it ended. */
function run(command, args, options = {}) {
  return new Promise((resolve) => {
    child = spawn(command, args, { stdio: 'inherit', ...options });
    child.once('error', (error) => {
      console.error(`could not run ${command}: ${error.message}`);
      resolve({ code: 1, signal: null });
    });
    child.once('exit', (code, signal) => {
      child = undefined;
      resolve({ code, signal });
    });
  });
}

/** Ends this process the way the child ended: the same exit code, or the same signal. */
function endLike({ code, signal }) {
  if (signal === null) process.exit(code ?? 1);
  for (const forwarded of forwardedSignals) process.off(forwarded, forward);
  process.kill(process.pid, signal);
  process.exit(128 + (constants.signals[signal] ?? 0)); // not reached where the signal's default ends the process
}

const turbo = fileURLToPath(new URL('../node_modules/turbo/bin/turbo', import.meta.url));
const build = await run(process.execPath, [turbo, 'run', 'build', '--filter=@petstore/examples...', '--output-logs=errors-only'], {
  cwd: root,
});
if (received !== undefined) endLike({ code: null, signal: received });
if (build.code !== 0) endLike(build);
endLike(await run(process.execPath, ['--import', 'tsx', servers[which]], { cwd: new URL('../examples/', import.meta.url) }));
