/**
 * vitest globalSetup: a PostgreSQL and a Redis for the command's tests (DATABASE_URL / REDIS_URL, else throwaway
 * servers, else a skip with its reason), found once per run with the other projects' servers
 * (scripts/test-servers.ts).
 */
import type { TestProject } from 'vitest/node';
import { providePostgresAndRedis } from '../../../scripts/test-servers.js';

export default function setup(project: TestProject): Promise<() => Promise<void>> {
  return providePostgresAndRedis(project, '@petstore/cli');
}
