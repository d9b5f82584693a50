import { defineConfig } from 'tsup';

/**
 * The example servers compiled to plain JavaScript (dist/, not published): what the example tests start, so that
 * each of their ~25 server starts costs Node alone, not Node plus tsx's loader (about 0.45 s of CPU less per
 * start). `npm start` runs the TypeScript sources with tsx, as a reader would (tested in npm-start.test.ts).
 */
export default defineConfig({
  entry: ['src/fastify-server.ts', 'src/express-server.ts'],
  format: ['esm'],
  target: 'node20',
  platform: 'node',
  outDir: 'dist',
  clean: true,
  dts: false,
  sourcemap: false,
  // The private helpers shared with the packages (@petstore/internal) go into the build: they are TypeScript only.
  noExternal: ['@petstore/internal'],
});
