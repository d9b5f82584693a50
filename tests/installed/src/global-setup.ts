/**
 * Once per run, before the installed-package test files: packs every package, installs the tarballs into a
 * throwaway project outside the workspace (with the frameworks the READMEs' code imports), and writes the
 * READMEs' code there (see `snippets.ts`). The test files find it all through `inject('installed')`.
 */
import { resolveTestRedis } from '@petstore/storage-redis/testing';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { EXPECTED_EXPORTS } from './expected-exports.js';
import { installProject, packAll, throwawayFolder, workspaceVersion, type PackageName } from './projects.js';
import { readSnippets } from './snippets.js';

export interface Installed {
  /** The throwaway folder holding everything below; removed after the run. */
  folder: string;
  /** The project every README's code runs in: all packages, all frameworks. */
  app: string;
  /** Package name → packed tarball. */
  tarballs: Record<PackageName, string>;
  /** A Redis for the code that needs one, or why there is none. */
  redis: { url: string } | { skipReason: string };
}

declare module 'vitest' {
  export interface ProvidedContext {
    installed: Installed;
  }
}

/**
 * Third-party packages the READMEs' code may import, at the versions the workspace has (npm's cache has them).
 * The compiler is the workspace's TypeScript, with the workspace's `@types/node`: tools, not dependencies.
 */
const THIRD_PARTY = ['fastify', 'express', 'hono', '@hono/node-server', 'node-fetch', 'ioredis', '@types/express'];

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const folder = await throwawayFolder('installed');
  const redis = await resolveTestRedis();
  try {
    await mkdir(join(folder.path, 'tarballs'));
    const tarballs = await packAll(join(folder.path, 'tarballs'));
    const app = join(folder.path, 'app');
    await installProject(app, {
      ...Object.fromEntries(Object.entries(tarballs).map(([name, path]) => [name, `file:${path}`])),
      ...Object.fromEntries(THIRD_PARTY.map((name) => [name, workspaceVersion(name)])),
      express4: `npm:express@${workspaceVersion('express4')}`,
    });
    await writeSnippets(app);
    project.provide('installed', { folder: folder.path, app, tarballs, redis: 'url' in redis ? { url: redis.url } : redis });
  } catch (error) {
    if ('stop' in redis) await redis.stop();
    await folder.remove();
    throw error;
  }
  return async () => {
    if ('stop' in redis) await redis.stop();
    await folder.remove();
  };
}

/**
 * Writes each README block where its compilations and runs expect it: TypeScript under esm/src (and, without
 * top-level await, cjs/src), JavaScript under js/. Under e4/, `express` resolves to Express 4 (a link to the
 * installed `express4` alias), for a second run of the code that imports it.
 */
async function writeSnippets(app: string): Promise<void> {
  for (const [dir, type] of [['esm', 'module'], ['cjs', 'commonjs'], ['js', 'commonjs'], ['e4', 'commonjs'], ['e4/esm', 'module'], ['e4/cjs', 'commonjs']] as const) {
    await mkdir(join(app, dir, 'src'), { recursive: true });
    await writeFile(join(app, dir, 'package.json'), JSON.stringify({ type }));
  }
  await mkdir(join(app, 'e4', 'node_modules'), { recursive: true });
  await symlink(join(app, 'node_modules', 'express4'), join(app, 'e4', 'node_modules', 'express'), 'dir');
  for (const snippet of await readSnippets()) {
    if (snippet.language === 'ts') {
      await writeFile(join(app, 'esm', 'src', `${snippet.id}.ts`), snippet.code);
      if (!snippet.topLevelAwait) await writeFile(join(app, 'cjs', 'src', `${snippet.id}.ts`), snippet.code);
    } else {
      await writeFile(join(app, 'js', `${snippet.id}.${snippet.commonJs ? 'cjs' : 'mjs'}`), snippet.code);
    }
  }
  // The API the client's code talks to (PETSTORE_URL), from the installed packages.
  await writeFile(
    join(app, 'serve.mjs'),
    `import { createServer } from 'node:http';
import { createPetstore, staticApiKeys } from '@petstore/core';
import { petstoreNodeHandler } from '@petstore/core/node';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
const petstore = createPetstore({
  apiKeys: staticApiKeys([{ key: process.env.PETSTORE_API_KEY, plan: 'enterprise', limits: { requestsPerMinute: 10000, requestsPerDay: 100000 } }]),
  categories: memoryCategoryStore(),
  rateLimit: { store: memoryRateLimitStore() },
});
createServer(petstoreNodeHandler(petstore)).listen(Number(process.env.PORT), '127.0.0.1');`,
  );
  // Compiled with the ESM snippets: a probe of every entry point's exports (see `typeExports`), and a check that
  // the client's own statement of the API's bodies is exactly the core's.
  await writeFile(
    join(app, 'esm', 'src', 'exports-probe.ts'),
    Object.keys(EXPECTED_EXPORTS).map((entry, index) => `export * as e${index} from ${JSON.stringify(entry)};`).join('\n'),
  );
  await writeFile(
    join(app, 'esm', 'src', 'client-types-match-core.ts'),
    `import type * as Client from '@petstore/client';
import type * as Core from '@petstore/core';
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
export const checks: [
  Same<Client.Category, Core.Category>,
  Same<Client.NewCategory, Core.NewCategory>,
  Same<Client.ErrorBody, Core.ErrorBody>,
  Same<Client.ErrorCode, Core.ErrorCode>,
] = [true, true, true, true];`,
  );
}
