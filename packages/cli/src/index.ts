/**
 * `@petstore/cli`: the `petstore` command (issue, rotate, revoke, list, show and update managed API keys; read
 * and reset rate limits) and `runCli`, the same from code.
 * @see https://github.com/petstore/petstore-categories/blob/main/packages/cli/README.md
 */
export { runCli, type CliIo } from './run.js';
export { EXIT_CODES, type ExitCode } from './errors.js';
