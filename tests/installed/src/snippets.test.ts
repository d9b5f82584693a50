/**
 * The READMEs' code against the installed packages (every tarball and the frameworks installed by
 * global-setup.ts into a throwaway project outside the workspace): compiled, strict, by the workspace's
 * TypeScript as ESM (`nodenext`) and as CommonJS (`node16`), and every block run; and the exported names of
 * every entry point, at run time and in the types. The other TypeScript versions and resolutions:
 * typescripts.test.ts.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type ts from 'typescript';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { EXPECTED_EXPORTS } from './expected-exports.js';
import { runNode, startServer } from './projects.js';
import {
  ENTERPRISE_KEY,
  FREE_KEY,
  compileSnippets,
  freePort,
  programs,
  runProgram,
  typeExports,
  typescriptVersion,
  type Program,
} from './run-snippets.js';
import { readSnippets } from './snippets.js';

/** `app`: the project every README's code runs in, with all packages and frameworks. */
const { app, redis, postgres } = inject('installed');
const snippets = await readSnippets();
let esm: ts.Program | undefined;
/** The API the client's code talks to (PETSTORE_URL), started by the first code that needs it. */
let api: Promise<{ port: number; stop: () => Promise<unknown> }> | undefined;

afterAll(async () => {
  await (await api)?.stop();
});

async function run(program: Program, skip: (condition: boolean, note?: string) => void): Promise<void> {
  skip(program.needsRedis && 'skipReason' in redis, 'skipReason' in redis ? redis.skipReason : '');
  skip(program.needsPostgres && 'skipReason' in postgres, 'skipReason' in postgres ? postgres.skipReason : '');
  api ??= freePort().then(async (port) => ({ port, ...(await startServer('serve.mjs', app, { PORT: String(port), PETSTORE_API_KEY: FREE_KEY })) }));
  const { port } = program.needsApi ? await api : { port: 0 };
  const failure = await runProgram(app, program, {
    PETSTORE_API_KEY: FREE_KEY,
    PETSTORE_ENTERPRISE_KEY: ENTERPRISE_KEY,
    PETSTORE_URL: `http://127.0.0.1:${port}/v1`,
    REDIS_URL: 'url' in redis ? redis.url : '',
    DATABASE_URL: 'url' in postgres ? postgres.url : '',
  });
  expect(failure).toBeUndefined();
}

const title = (program: Program) => `${program.label}: ${program.server ? 'answers an authenticated GET /v1/categories' : 'runs and exits 0'}`;

describe('the READMEs’ code', () => {
  it('covers servers on Fastify, Express, node:http and the Fetch entry, the client on both fetches, and plain CommonJS and ESM', () => {
    const imported = new Set(snippets.flatMap((snippet) => snippet.imports));
    for (const name of ['fastify', 'express', '@hono/node-server', 'node-fetch', '@petstore/client', '@petstore/core', '@petstore/storage-redis', '@petstore/storage-postgres']) {
      expect(imported, name).toContain(name);
    }
    expect(snippets.some((snippet) => snippet.server && snippet.code.includes('node:http'))).toBe(true);
    expect(snippets.some((snippet) => snippet.language === 'js' && snippet.commonJs)).toBe(true);
    expect(snippets.some((snippet) => snippet.language === 'js' && !snippet.commonJs)).toBe(true);
  });
});

describe('the READMEs’ code compiles with the workspace’s TypeScript, emitted for the runs', () => {
  for (const resolution of ['nodenext', 'node16'] as const) {
    it(`TypeScript ${typescriptVersion('typescript')}, moduleResolution ${resolution}, strict`, async () => {
      const { problems, program } = await compileSnippets(app, 'typescript', resolution, snippets);
      if (resolution === 'nodenext') esm = program;
      expect(problems).toEqual([]);
    });
  }
});

describe('the public surface', () => {
  it('every entry point exports exactly the listed names, at run time (ESM and CommonJS) and in its types', async () => {
    const entries = Object.keys(EXPECTED_EXPORTS);
    await writeFile(
      join(app, 'exports.mjs'),
      `import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const out = {};
for (const entry of ${JSON.stringify(entries)}) out[entry] = { esm: Object.keys(await import(entry)).sort(), cjs: Object.keys(require(entry)).sort() };
console.log(JSON.stringify(out));`,
    );
    const { code, output } = await runNode('exports.mjs', app, {});
    expect(code, output).toBe(0);
    const runtime = JSON.parse(output) as Record<string, { esm: string[]; cjs: string[] }>;
    const types = typeExports(esm ?? (await compileSnippets(app, 'typescript', 'nodenext', snippets)).program!, app, entries);
    for (const entry of entries) {
      const expected = EXPECTED_EXPORTS[entry]!;
      expect(runtime[entry]?.esm, `${entry}: run-time exports`).toEqual([...expected.values].sort());
      expect(runtime[entry]?.cjs, `${entry}: CommonJS exports`).toEqual([...expected.values].sort());
      expect(types[entry], `${entry}: type-only exports`).toEqual([...expected.types].sort());
    }
  });
});

describe.concurrent('the READMEs’ code, run', () => {
  for (const program of programs(snippets)) it(title(program), ({ skip }) => run(program, skip));
});
