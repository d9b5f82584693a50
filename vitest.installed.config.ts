import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import TotalReporter from './scripts/total-reporter.js';

/**
 * `npm run test:installed`: the installed-package tests alone (tests/installed: every package packed,
 * installed from its tarball into throwaway projects outside the workspace; are-the-types-wrong, publint,
 * `npm publish --dry-run`, the packed Markdown's links, the READMEs' code compiled with each supported
 * TypeScript and run). They need the built packages (the script builds first) and npm's cache that `npm ci`
 * filled, and end with the same total line as `npm test`.
 */
export default defineConfig({
  test: {
    projects: ['tests/installed'],
    // The files run side by side (vitest's default is one worker fewer than cores: one, on two cores): much of
    // their time goes to child processes (npm, tsc, the READMEs' servers).
    maxWorkers: Math.max(3, availableParallelism() + 1),
    reporters: ['default', new TotalReporter()],
  },
});
