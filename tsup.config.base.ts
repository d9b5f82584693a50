import { basename } from 'node:path';
import { defineConfig, type Options } from 'tsup';

/**
 * The one build configuration every package shares: ESM + CJS + type declarations, one file per entry point,
 * Node 20 target. A package passes its entry points.
 *
 * The declarations are bundled from `.types/<package>/src`, which `npm run build:types` (tsconfig.types.json)
 * emits for every package in one TypeScript program before the package builds (turbo runs it first), so no
 * package's build type-checks its sources again.
 */
export function packageBuild(entry: Record<string, string>, overrides: Options = {}) {
  const declarations = `../../.types/${basename(process.cwd())}/`;
  return defineConfig({
    entry,
    format: ['esm', 'cjs'],
    dts: { entry: Object.fromEntries(Object.entries(entry).map(([name, source]) => [name, declarations + source.replace(/\.ts$/, '.d.ts')])) },
    sourcemap: true,
    clean: true,
    target: 'node20',
    platform: 'node',
    splitting: false,
    treeshake: true,
    // The private workspace package of shared helpers goes into each build: no published package imports it.
    noExternal: ['@petstore/internal'],
    ...overrides,
  });
}
