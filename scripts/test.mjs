/**
 * `npm test`: runs every workspace's tests through turbo, passing its output through, then ends with one
 * plain total over every vitest summary ("Tests: N passed, M failed, K skipped"). Exits with turbo's status.
 *
 * The Node.js major goes into turbo's hash of the test tasks (PETSTORE_NODE_MAJOR, listed in turbo.json), so a
 * run on another Node.js version really runs the tests while the builds are reused.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const turbo = fileURLToPath(new URL('../node_modules/turbo/bin/turbo', import.meta.url));
const env = { ...process.env, PETSTORE_NODE_MAJOR: process.versions.node.split('.')[0] };
const child = spawn(process.execPath, [turbo, 'run', 'test', '--output-logs=new-only', '--continue=never', ...process.argv.slice(2)], {
  cwd: root,
  env,
  stdio: ['inherit', 'pipe', 'pipe'],
});

const totals = { passed: 0, failed: 0, skipped: 0 };
// vitest's summary of one workspace, as turbo prefixes it: "@petstore/core:test:       Tests  12 passed | 1 skipped (13)".
const SUMMARY = /^\S+:test:\s+Tests\s+(.*)$/;
let pending = '';
const count = (line) => {
  const summary = SUMMARY.exec(line.replace(/\x1b\[[0-9;]*m/g, ''));
  if (summary === null) return;
  for (const [, number, kind] of (summary[1] ?? '').matchAll(/(\d+) (passed|failed|skipped)/g)) totals[kind] += Number(number);
};
const pass = (stream, output) =>
  stream.on('data', (chunk) => {
    output.write(chunk);
    const lines = (pending + chunk.toString('utf8')).split('\n');
    pending = lines.pop() ?? '';
    lines.forEach(count);
  });
pass(child.stdout, process.stdout);
pass(child.stderr, process.stderr);
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => {
  count(pending);
  console.log(`\nTests: ${totals.passed} passed, ${totals.failed} failed, ${totals.skipped} skipped`);
  process.exit(code ?? (signal ? 1 : 0));
});
