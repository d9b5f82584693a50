/**
 * Once per run, before the installed-package test files: packs every package into a throwaway folder outside
 * the workspace and finds a Redis and a PostgreSQL. The test files find both through `inject('installed')`.
 */
import { resolveTestPostgres } from '@petstore/storage-postgres/testing';
import { resolveTestRedis } from '@petstore/storage-redis/testing';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { packAll, throwawayFolder, type PackageName } from './projects.js';

export interface Installed {
  /** The throwaway folder the tests install into; removed after the run. */
  folder: string;
  /** Package name → packed tarball. */
  tarballs: Record<PackageName, string>;
  /** A Redis for the code that needs one, or why there is none. */
  redis: { url: string } | { skipReason: string };
  /** A PostgreSQL for the code that needs one, or why there is none. */
  postgres: { url: string } | { skipReason: string };
}

declare module 'vitest' {
  export interface ProvidedContext {
    installed: Installed;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const folder = await throwawayFolder('installed');
  const redis = await resolveTestRedis();
  const postgres = await resolveTestPostgres();
  const stopServers = async () => {
    if ('stop' in redis) await redis.stop();
    if ('stop' in postgres) await postgres.stop();
  };
  try {
    await mkdir(join(folder.path, 'tarballs'));
    const tarballs = await packAll(join(folder.path, 'tarballs'));
    project.provide('installed', {
      folder: folder.path,
      tarballs,
      redis: 'url' in redis ? { url: redis.url } : redis,
      postgres: 'url' in postgres ? { url: postgres.url } : postgres,
    });
  } catch (error) {
    await stopServers();
    await folder.remove();
    throw error;
  }
  return async () => {
    await stopServers();
    await folder.remove();
  };
}

