#!/usr/bin/env node
/**
 * The `petstore` command. Exits once its output has been written: with 0, 1 or 2 (see `EXIT_CODES`). Whatever
 * escapes `runCli` (it never rejects) or happens on a client after it — one line on stderr, exit 1, never a
 * stack trace.
 */
import { runCli } from './run.js';

function fail(error: unknown): void {
  process.stderr.write(`petstore: failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}
process.on('uncaughtException', fail);
process.on('unhandledRejection', fail);
// A reader that went away (`petstore keys list | head -1`): nothing more to say.
process.stdout.on('error', () => process.exit(0));

void runCli(process.argv.slice(2)).then((code) => {
  // Exit once stdout and stderr have taken everything (both may be pipes, written asynchronously on some systems).
  let pending = 2;
  const done = () => {
    pending -= 1;
    if (pending === 0) process.exit(code);
  };
  process.stdout.write('', done);
  process.stderr.write('', done);
});
