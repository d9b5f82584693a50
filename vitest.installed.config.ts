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
    reporters: ['default', new TotalReporter()],
  },
});
