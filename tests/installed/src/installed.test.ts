/**
 * The packages as a user receives them: packed with `npm pack`, installed from the tarballs into throwaway
 * projects outside the workspace, and the READMEs' code compiled (TypeScript ESM `nodenext` strict,
 * TypeScript CommonJS `node16` and `node10`) and run there (ESM, CommonJS, Express 4 and 5).
 */
import { createPackageFromTarballData, checkPackage } from '@arethetypeswrong/core';
import { resolveTestRedis, type TestRedis, type TestRedisSkip } from '@petstore/storage-redis/testing';
import { copyFile, mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { basename, join } from 'node:path';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXPECTED_EXPORTS } from './expected-exports.js';
import {
  PACKAGES,
  ROOT,
  installProject,
  npm,
  packAll,
  readJson,
  runNode,
  startServer,
  throwawayFolder,
  workspaceVersion,
  type PackageName,
} from './projects.js';
import { readSnippets, type Snippet } from './snippets.js';

const FREE_KEY = 'installed-test-free-key';
const ENTERPRISE_KEY = 'installed-test-enterprise-key';

/** Third-party packages the READMEs' code may import, at the versions the workspace has (npm's cache has them). */
const THIRD_PARTY = ['fastify', 'express', 'hono', '@hono/node-server', 'node-fetch', 'ioredis', '@types/express', '@types/node'];

/** What each package needs beside itself: its peers (ours as tarballs, others from the registry). */
const PEERS: Record<PackageName, { ours: PackageName[]; theirs: string[] }> = {
  '@petstore/core': { ours: [], theirs: [] },
  '@petstore/storage-memory': { ours: ['@petstore/core'], theirs: [] },
  '@petstore/storage-redis': { ours: ['@petstore/core'], theirs: ['ioredis'] },
  '@petstore/adapter-fastify': { ours: ['@petstore/core'], theirs: ['fastify'] },
  '@petstore/adapter-express': { ours: ['@petstore/core'], theirs: ['express'] },
  '@petstore/client': { ours: [], theirs: [] },
};

let folder: { path: string; remove: () => Promise<void> };
let tarballs: Record<PackageName, string>;
/** The project every README's code runs in: all packages, all frameworks, TypeScript. */
let app: string;
let redis: TestRedis | TestRedisSkip;
/** The server the client snippets talk to (`PETSTORE_URL`), started by the first of them. */
let apiServer: Promise<{ port: number; stop: () => Promise<unknown> }> | undefined;
/** The ESM compilation, which also holds the probe of every entry point's exports. */
let esmProgram: ts.Program | undefined;
const snippets: Snippet[] = await readSnippets();

beforeAll(async () => {
  folder = await throwawayFolder('installed');
  await mkdir(join(folder.path, 'tarballs'));
  [tarballs, redis] = await Promise.all([packAll(join(folder.path, 'tarballs')), resolveTestRedis()]);
  app = join(folder.path, 'app');
  const dependencies: Record<string, string> = {
    ...Object.fromEntries(Object.entries(tarballs).map(([name, path]) => [name, `file:${path}`])),
    ...Object.fromEntries(THIRD_PARTY.map((name) => [name, workspaceVersion(name)])),
    express4: `npm:express@${workspaceVersion('express4')}`,
    typescript: ts.version,
  };
  await installProject(app, dependencies);
  await prepareSnippets();
});

afterAll(async () => {
  await (await apiServer)?.stop();
  if ('stop' in (redis ?? {})) await (redis as TestRedis).stop();
  await folder?.remove();
});

describe('each package, installed alone with its peers', () => {
  for (const name of Object.values(PACKAGES)) {
    it(`${name} installs from its tarball without the workspace, and loads with require and import`, async () => {
      const project = join(folder.path, `alone-${basename(name)}`);
      const { ours, theirs } = PEERS[name];
      await installProject(project, {
        ...Object.fromEntries([name, ...ours].map((ourName) => [ourName, `file:${tarballs[ourName]}`])),
        ...Object.fromEntries(theirs.map((theirName) => [theirName, workspaceVersion(theirName)])),
      });
      const installed = await readJson<{ version: string }>(join(project, 'node_modules', name, 'package.json'));
      expect(installed.version).toBe(workspaceVersion(name));
      // Nothing else of ours came along: a package that needed another one of ours without declaring it fails here.
      for (const other of Object.values(PACKAGES)) {
        if (other === name || ours.includes(other)) continue;
        await expect(readFile(join(project, 'node_modules', other, 'package.json')), other).rejects.toThrow();
      }
      await writeFile(
        join(project, 'load.cjs'),
        `const cjs = Object.keys(require(${JSON.stringify(name)})).sort();
import(${JSON.stringify(name)}).then((esm) => { console.log(JSON.stringify({ cjs, esm: Object.keys(esm).sort() })); });`,
      );
      const { code, output } = await runNode('load.cjs', project, {});
      expect(code, output).toBe(0);
      const { cjs, esm } = JSON.parse(output) as { cjs: string[]; esm: string[] };
      expect(esm).toEqual([...(EXPECTED_EXPORTS[name]?.values ?? [])].sort());
      expect(cjs).toEqual(esm);
    });
  }
});

describe('the tarballs', () => {
  it('are-the-types-wrong (default profile: node10, node16 CJS and ESM, bundler) finds no problem in any', async () => {
    const problems: Record<string, unknown[]> = {};
    for (const [name, path] of Object.entries(tarballs)) {
      const analysis = await checkPackage(createPackageFromTarballData(new Uint8Array(await readFile(path))));
      problems[name] = 'problems' in analysis ? analysis.problems : ['no types'];
    }
    expect(problems).toEqual(Object.fromEntries(Object.keys(tarballs).map((name) => [name, []])));
  });

  it('publint --strict finds nothing to report in any', async () => {
    const messages: Record<string, string[]> = {};
    for (const [name, path] of Object.entries(tarballs)) {
      const bytes = await readFile(path);
      const tarball = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
      const result = await publint({ pack: { tarball }, strict: true, level: 'suggestion' });
      messages[name] = result.messages.map((message) => formatMessage(message, result.pkg) ?? message.code);
    }
    expect(messages).toEqual(Object.fromEntries(Object.keys(tarballs).map((name) => [name, []])));
  });

  it('each holds its README, LICENSE, CHANGELOG and package metadata', async () => {
    for (const name of Object.values(PACKAGES)) {
      const installed = join(app, 'node_modules', name);
      for (const file of ['README.md', 'LICENSE', 'CHANGELOG.md']) {
        expect((await readFile(join(installed, file), 'utf8')).length, `${name}/${file}`).toBeGreaterThan(100);
      }
      const manifest = await readJson<Record<string, unknown>>(join(installed, 'package.json'));
      expect(manifest, name).toMatchObject({
        license: 'MIT',
        repository: { type: 'git', url: expect.stringMatching(/^git\+https:\/\//) },
        homepage: expect.stringMatching(/^https:\/\//),
        bugs: { url: expect.stringMatching(/^https:\/\//) },
        keywords: expect.arrayContaining(['petstore']),
      });
      expect(JSON.stringify(manifest), `${name} depends on no workspace protocol`).not.toMatch(/workspace:|file:/);
    }
  });

  it('npm publish --dry-run succeeds for each package', async () => {
    const output = await npm(['publish', '--dry-run', ...Object.keys(PACKAGES).flatMap((name) => ['-w', `packages/${name}`])], ROOT);
    for (const name of Object.values(PACKAGES)) expect(output).toContain(`+ ${name}@${workspaceVersion(name)}`);
  });
});

describe('the READMEs’ code, compiled against the installed packages', () => {
  it('has code to check: servers on Fastify, Express, node:http and the Fetch entry, and the client on both fetches', () => {
    const imported = new Set(snippets.flatMap((snippet) => snippet.imports));
    for (const name of ['fastify', 'express', '@hono/node-server', 'node-fetch', '@petstore/client', '@petstore/core', '@petstore/storage-redis']) {
      expect(imported, name).toContain(name);
    }
    expect(snippets.some((snippet) => snippet.server && snippet.code.includes('node:http'))).toBe(true);
    expect(snippets.some((snippet) => snippet.language === 'js' && snippet.commonJs)).toBe(true);
    expect(snippets.some((snippet) => snippet.language === 'js' && !snippet.commonJs)).toBe(true);
  });

  for (const target of ['esm', 'cjs-node16', 'cjs-node10'] as const) {
    it(`compiles as ${target === 'esm' ? 'ESM (module nodenext, strict)' : `CommonJS (moduleResolution ${target.slice(4)}, strict)`}`, () => {
      expect(compile(target)).toEqual([]);
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
const entries = ${JSON.stringify(entries)};
const out = {};
for (const entry of entries) out[entry] = { esm: Object.keys(await import(entry)).sort(), cjs: Object.keys(require(entry)).sort() };
console.log(JSON.stringify(out));`,
    );
    const { code, output } = await runNode('exports.mjs', app, {});
    expect(code, output).toBe(0);
    const runtime = JSON.parse(output) as Record<string, { esm: string[]; cjs: string[] }>;
    const types = typeExports(entries.map((_, index) => `e${index}`), entries);
    for (const entry of entries) {
      const expected = EXPECTED_EXPORTS[entry]!;
      expect(runtime[entry]?.esm, `${entry}: run-time exports`).toEqual([...expected.values].sort());
      expect(runtime[entry]?.cjs, `${entry}: CommonJS exports`).toEqual([...expected.values].sort());
      expect(types[entry], `${entry}: type-only exports`).toEqual([...expected.types].sort());
    }
  });
});

describe.concurrent('the READMEs’ code, run against the installed packages', () => {
  for (const program of programs()) {
    it(`${program.label}: ${program.server ? 'answers an authenticated GET /v1/categories' : 'runs and exits 0'}`, async ({ skip }) => {
      if (program.needsRedis && 'skipReason' in redis) skip(redis.skipReason);
      apiServer ??= freePort().then(async (port) => ({ port, ...(await startServer('serve.mjs', app, { PORT: String(port), PETSTORE_API_KEY: FREE_KEY })) }));
      const api = program.needsApi ? await apiServer : undefined;
      const failure = await runProgram(program, {
        PETSTORE_API_KEY: FREE_KEY,
        PETSTORE_ENTERPRISE_KEY: ENTERPRISE_KEY,
        PETSTORE_URL: `http://127.0.0.1:${api?.port ?? 0}/v1`,
        REDIS_URL: 'url' in redis ? redis.url : '',
      });
      expect(failure).toBeUndefined();
    });
  }
});

// --- helpers -------------------------------------------------------------------------------------------------

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.on('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/** Writes each snippet where its compilations and runs expect it; links Express 4 for a second run. */
async function prepareSnippets(): Promise<void> {
  for (const [dir, type] of [['esm', 'module'], ['cjs', 'commonjs'], ['js', 'commonjs'], ['e4', 'commonjs'], ['e4/esm', 'module'], ['e4/cjs', 'commonjs']] as const) {
    await mkdir(join(app, dir, 'src'), { recursive: true });
    await writeFile(join(app, dir, 'package.json'), JSON.stringify({ type }));
  }
  await mkdir(join(app, 'e4', 'node_modules'), { recursive: true });
  await symlink(join(app, 'node_modules', 'express4'), join(app, 'e4', 'node_modules', 'express'), 'dir');
  for (const snippet of snippets) {
    if (snippet.language === 'ts') {
      await writeFile(join(app, 'esm', 'src', `${snippet.id}.ts`), snippet.code);
      if (!snippet.topLevelAwait) await writeFile(join(app, 'cjs', 'src', `${snippet.id}.ts`), snippet.code);
    } else {
      await writeFile(join(app, 'js', `${snippet.id}.${snippet.commonJs ? 'cjs' : 'mjs'}`), snippet.code);
    }
  }
  // The server the client snippets talk to, from the installed packages.
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
  // The probe of every entry point's exports, compiled with the snippets (see `typeExports`).
  await writeFile(
    join(app, 'esm', 'src', 'exports-probe.ts'),
    Object.keys(EXPECTED_EXPORTS).map((entry, index) => `export * as e${index} from ${JSON.stringify(entry)};`).join('\n'),
  );
  // A check compiled with the snippets: the client states the API's bodies itself, and they must be the core's.
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

type Target = 'esm' | 'cjs-node16' | 'cjs-node10';

/** Compiles the snippets of one target; answers the diagnostics, each with the README line it comes from. */
function compile(target: Target): string[] {
  const { program, diagnostics } = compileProgram(target);
  if (target === 'esm') esmProgram = program;
  return diagnostics.map((diagnostic) => {
    const file = diagnostic.file;
    const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (file === undefined || diagnostic.start === undefined) return text;
    const { line } = file.getLineAndCharacterOfPosition(diagnostic.start);
    const snippet = snippets.find((candidate) => file.fileName.endsWith(`/${candidate.id}.ts`));
    const where = snippet === undefined ? file.fileName : `${snippet.where.replace(/:\d+$/, '')}:${Number(snippet.where.split(':').at(-1)) + line + 1}`;
    return `${where}: TS${diagnostic.code} ${text}`;
  });
}

function compileProgram(target: Target): { program: ts.Program; diagnostics: readonly ts.Diagnostic[] } {
  const dir = join(app, target === 'esm' ? 'esm' : 'cjs');
  const options: ts.CompilerOptions = {
    strict: true,
    target: ts.ScriptTarget.ES2022,
    types: ['node'],
    // The ESM compilation also checks every declaration file (ours included), as a strict consumer without
    // skipLibCheck does; the CommonJS ones check how the code resolves and compiles.
    skipLibCheck: target !== 'esm',
    esModuleInterop: true,
    outDir: join(dir, 'out'),
    noEmit: target === 'cjs-node10',
    ...(target === 'esm'
      ? { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext }
      : target === 'cjs-node16'
        ? { module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16 }
        : { module: ts.ModuleKind.CommonJS, moduleResolution: ts.ModuleResolutionKind.Node10 }),
  };
  const files = ts.sys.readDirectory(join(dir, 'src'), ['.ts']);
  const program = ts.createProgram(files, options);
  return { program, diagnostics: [...ts.getPreEmitDiagnostics(program), ...program.emit().diagnostics] };
}

interface Program {
  label: string;
  file: string;
  /** Relative to the project. */
  cwd: string;
  server: boolean;
  needsRedis: boolean;
  needsApi: boolean;
  /** Folder to run in, relative to the project. For the Express 4 runs, the compiled file to copy to `file` first. */
  copyFrom?: string;
}

/** Every program to run: each snippet in each form it was compiled to, and Express snippets again on Express 4. */
function programs(): Program[] {
  const list: Program[] = [];
  for (const snippet of snippets) {
    const forms: [string, string, string][] = []; // label, folder, file
    if (snippet.language === 'ts') {
      forms.push(['ESM', 'esm', `out/${snippet.id}.js`]);
      if (!snippet.topLevelAwait) forms.push(['CommonJS', 'cjs', `out/${snippet.id}.js`]);
    } else {
      forms.push([snippet.commonJs ? 'CommonJS' : 'ESM', 'js', `${snippet.id}.${snippet.commonJs ? 'cjs' : 'mjs'}`]);
    }
    for (const [form, dir, file] of forms) {
      const needs = { needsRedis: snippet.code.includes('REDIS_URL'), needsApi: snippet.code.includes('PETSTORE_URL') };
      list.push({ label: `${snippet.where} (${form})`, file, cwd: dir, server: snippet.server, ...needs });
      if (snippet.imports.includes('express')) {
        // Under e4/, `express` resolves to Express 4 (a link to the installed express4 alias).
        const e4 = join('e4', dir === 'js' ? '' : dir);
        list.push({ label: `${snippet.where} (${form}, Express 4)`, file: basename(file), cwd: e4, server: snippet.server, copyFrom: join(dir, file), ...needs });
      }
    }
  }
  return list;
}

/** Runs one program; answers what went wrong, or undefined. */
async function runProgram(program: Program, env: Record<string, string>): Promise<string | undefined> {
  const cwd = join(app, program.cwd);
  if (program.copyFrom !== undefined) await copyFile(join(app, program.copyFrom), join(cwd, program.file));
  try {
    if (!program.server) {
      const { code, output } = await runNode(program.file, cwd, env);
      return code === 0 ? undefined : `${program.label} exited with ${code}:\n${output}`;
    }
    const port = await freePort();
    const server = await startServer(program.file, cwd, { ...env, PORT: String(port) });
    try {
      const response = await fetch(`http://127.0.0.1:${port}/v1/categories`, { headers: { authorization: `Bearer ${FREE_KEY}` } });
      const body = await response.text();
      if (response.status !== 200 || response.headers.get('x-ratelimit-limit') === null || !body.startsWith('[')) {
        return `${program.label}: GET /v1/categories answered ${response.status} ${body}\n${server.output()}`;
      }
      return undefined;
    } finally {
      await server.stop();
    }
  } catch (error) {
    return `${program.label}: ${(error as Error).message}`;
  }
}

/** The type-only exports of each entry point, as TypeScript sees them in the installed package (ESM compilation). */
function typeExports(aliases: string[], entries: string[]): Record<string, string[]> {
  const program = esmProgram ?? compileProgram('esm').program;
  const checker = program.getTypeChecker();
  const probe = program.getSourceFile(join(app, 'esm', 'src', 'exports-probe.ts'))!;
  const module = checker.getSymbolAtLocation(probe)!;
  const result: Record<string, string[]> = {};
  aliases.forEach((alias, index) => {
    const namespace = checker.getExportsOfModule(module).find((exported) => exported.getName() === alias)!;
    const names = checker.getExportsOfModule(checker.getAliasedSymbol(namespace)).filter((exported) => {
      const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      return (target.flags & ts.SymbolFlags.Value) === 0;
    });
    result[entries[index]!] = names.map((exported) => exported.getName()).sort();
  });
  return result;
}
