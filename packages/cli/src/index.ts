/**
 * `@petstore/cli`: the `petstore` command (issue, rotate, revoke, list, show and update managed API keys; read
 * and reset rate limits) and `runCli`, the same from code; `recordDeployment`, which the servers call at start-up so
 * that the command knows where they keep each kind of data.
 * @see https://github.com/petstore/petstore-categories/blob/main/packages/cli/README.md
 */
export { runCli, type CliIo } from './run.js';
export { EXIT_CODES, type ExitCode } from './errors.js';
export {
  DEPLOYMENT_REDIS_KEY,
  DEPLOYMENT_TABLE,
  recordDeployment,
  type DeploymentStore,
  type DeploymentStores,
  type PetstoreDeployment,
} from './deployment.js';
