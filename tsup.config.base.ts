import { defineConfig, type Options } from 'tsup';

/**
 * The one build configuration every package shares: ESM + CJS + type declarations,
 * one file per entry point, Node 20 target. A package passes its entry points.
 */
export function packageBuild(entry: Record<string, string>, overrides: Options = {}) {
  return defineConfig({
    entry,
    format: ['esm', 'cjs'],
    dts: true,
    sourcemap: true,
    clean: true,
    target: 'node20',
    platform: 'node',
    splitting: false,
    treeshake: true,
    ...overrides,
  });
}
