/**
 * The READMEs' code against the installed packages: every tarball and the frameworks installed into a
 * throwaway project outside the workspace; the TypeScript compiled, strict, with every supported TypeScript
 * (the oldest, the workspace's, the latest) under each `moduleResolution` it has — ESM (`nodenext`,
 * `bundler`) and CommonJS (`node16`, `node10`) — and every block run (compiled by the workspace's TypeScript);
 * and the exported names of every entry point, at run time and in the types.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type ts from 'typescript';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EXPECTED_EXPORTS } from './expected-exports.js';
import { runNode, startServer } from './projects.js';
import {
  ENTERPRISE_KEY,
  FREE_KEY,
  TYPESCRIPTS,
  compileSnippets,
  runsAsOwnProcess,
  freePort,
  installApp,
  programs,
  runProgram,
  typeExports,
  typescriptVersion,
  type Compilation,
  type Program,
} from './run-snippets.js';
import { readSnippets } from './snippets.js';

const { folder, tarballs, redis, postgres } = inject('installed');
/** The project every README's code runs in: all packages, all frameworks. */
const app = join(folder, 'app');
const snippets = await readSnippets();
let esm: ts.Program | undefined;
/** The API the client's code talks to (PETSTORE_URL), started by the first code that needs it. */
let api: Promise<{ port: number; stop: () => Promise<unknown> }> | undefined;

beforeAll(() => installApp(app, tarballs, snippets));
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

/** The TypeScripts by role, for the tests' names. */
const ROLE = { 'typescript-oldest': 'the oldest supported', typescript: 'the workspace’s, emitted for the runs', 'typescript-latest': 'the latest' } as const;

describe('the READMEs’ code compiles, strict, with each supported TypeScript under each resolution it has', () => {
  // One at a time in this process (the compiler API is synchronous); the compilations that run as their own
  // `tsc` (TypeScript 7) start together first, on the other core, and are awaited in their turn.
  const inOwnProcess = new Map<string, Promise<Compilation>>();
  beforeAll(() => {
    for (const { package: typescript, resolutions } of TYPESCRIPTS) {
      if (!runsAsOwnProcess(typescript)) continue;
      for (const resolution of resolutions) {
        const compilation = compileSnippets(app, typescript, resolution, snippets);
        compilation.catch(() => undefined); // its test reports the failure
        inOwnProcess.set(`${typescript} ${resolution}`, compilation);
      }
    }
  });

  for (const { package: typescript, resolutions } of TYPESCRIPTS) {
    for (const resolution of resolutions) {
      it(`TypeScript ${typescriptVersion(typescript)} (${ROLE[typescript]}), moduleResolution ${resolution}`, async () => {
        const { problems, program } = await (inOwnProcess.get(`${typescript} ${resolution}`) ?? compileSnippets(app, typescript, resolution, snippets));
        if (typescript === 'typescript' && resolution === 'nodenext') esm = program;
        expect(problems).toEqual([]);
      });
    }
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
