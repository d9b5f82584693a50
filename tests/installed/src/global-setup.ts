/**
 * Once per run, before the installed-package test files: packs every package into a throwaway folder outside
 * the workspace, installs the tarballs and the frameworks into the project the READMEs' code is compiled and
 * run in (with that code written there), and finds a Redis and a PostgreSQL. The test files find all of it
 * through `inject('installed')`, and run side by side.
 */
import { resolveTestPostgres } from '@petstore/storage-postgres/testing';
import { resolveTestRedis } from '@petstore/storage-redis/testing';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { packAll, throwawayFolder, type PackageName } from './projects.js';
import { installApp } from './run-snippets.js';
import { readSnippets } from './snippets.js';

export interface Installed {
  /** The throwaway folder the tests install into; removed after the run. */
  folder: string;
  /** Package name → packed tarball. */
  tarballs: Record<PackageName, string>;
  /** The project with every tarball and the frameworks installed, and the READMEs' code written (`installApp`). */
  app: string;
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
  // The servers start while npm packs.
  const tarballsFolder = join(folder.path, 'tarballs');
  const [redis, postgres, packed] = await Promise.allSettled([
    resolveTestRedis(),
    resolveTestPostgres(),
    mkdir(tarballsFolder).then(() => packAll(tarballsFolder)),
  ]);
  const stopServers = async () => {
    if (redis.status === 'fulfilled' && 'stop' in redis.value) await redis.value.stop();
    if (postgres.status === 'fulfilled' && 'stop' in postgres.value) await postgres.value.stop();
  };
  try {
    const [foundRedis, foundPostgres, tarballs] = [valueOf(redis), valueOf(postgres), valueOf(packed)];
    const app = join(folder.path, 'app');
    await installApp(app, tarballs, await readSnippets());
    project.provide('installed', {
      folder: folder.path,
      tarballs,
      app,
      redis: 'url' in foundRedis ? { url: foundRedis.url } : foundRedis,
      postgres: 'url' in foundPostgres ? { url: foundPostgres.url } : foundPostgres,
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

function valueOf<T>(settled: PromiseSettledResult<T>): T {
  if (settled.status === 'rejected') throw settled.reason;
  return settled.value;
}
