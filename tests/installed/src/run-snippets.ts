/**
 * Compiling and running the READMEs' code in the installed project (written there by `global-setup.ts`).
 */
import { copyFile, mkdir, symlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { basename, join } from 'node:path';
import ts from 'typescript';
import { EXPECTED_EXPORTS } from './expected-exports.js';
import { ROOT, installProject, runNode, startServer, workspaceVersion, type PackageName } from './projects.js';
import type { Snippet } from './snippets.js';

export const FREE_KEY = 'installed-test-free-key';
export const ENTERPRISE_KEY = 'installed-test-enterprise-key';

/**
 * Third-party packages the READMEs' code may import, at the versions the workspace has (npm's cache has them).
 * The compiler is the workspace's TypeScript, with the workspace's `@types/node`: tools, not dependencies.
 */
const THIRD_PARTY = ['fastify', 'express', 'hono', '@hono/node-server', 'node-fetch', 'ioredis', 'pg', '@types/express', '@types/pg'];

/** Installs every tarball and the frameworks into `app`, and writes the READMEs' code there. */
export async function installApp(app: string, tarballs: Record<PackageName, string>, snippets: Snippet[]): Promise<void> {
  await installProject(app, {
    ...Object.fromEntries(Object.entries(tarballs).map(([name, path]) => [name, `file:${path}`])),
    ...Object.fromEntries(THIRD_PARTY.map((name) => [name, workspaceVersion(name)])),
    express4: `npm:express@${workspaceVersion('express4')}`,
  });
  await writeSnippets(app, snippets);
}

export type Target = 'esm' | 'cjs-node16' | 'cjs-node10';

export function freePort(): Promise<number> {
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

/** Compiles (and, but for node10, emits) the code of one target with the workspace's TypeScript. */
export function compileProgram(app: string, target: Target): { program: ts.Program; diagnostics: readonly ts.Diagnostic[] } {
  const dir = join(app, target === 'esm' ? 'esm' : 'cjs');
  const options: ts.CompilerOptions = {
    strict: true,
    target: ts.ScriptTarget.ES2022,
    types: ['node'],
    typeRoots: [join(ROOT, 'node_modules', '@types')],
    skipLibCheck: true,
    esModuleInterop: true,
    outDir: join(dir, 'out'),
    noEmit: target === 'cjs-node10',
    ...(target === 'esm'
      ? { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext }
      : target === 'cjs-node16'
        ? { module: ts.ModuleKind.Node16, moduleResolution: ts.ModuleResolutionKind.Node16 }
        : { module: ts.ModuleKind.CommonJS, moduleResolution: ts.ModuleResolutionKind.Node10 }),
  };
  const program = ts.createProgram(ts.sys.readDirectory(join(dir, 'src'), ['.ts']), options);
  return { program, diagnostics: [...ts.getPreEmitDiagnostics(program), ...program.emit().diagnostics] };
}

/** Diagnostics as `README.md:123: TS2304 …`, pointing to the README line they come from. */
export function describeDiagnostics(diagnostics: readonly ts.Diagnostic[], snippets: Snippet[]): string[] {
  return diagnostics.map((diagnostic) => {
    const file = diagnostic.file;
    const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (file === undefined || diagnostic.start === undefined) return text;
    const { line } = file.getLineAndCharacterOfPosition(diagnostic.start);
    const snippet = snippets.find((candidate) => file.fileName.endsWith(`/${candidate.id}.ts`));
    if (snippet === undefined) return `${file.fileName}: TS${diagnostic.code} ${text}`;
    const [readme, fence] = snippet.where.split(':') as [string, string];
    return `${readme}:${Number(fence) + line + 1}: TS${diagnostic.code} ${text}`;
  });
}

export interface Program {
  label: string;
  /** Relative to `cwd`. */
  file: string;
  /** Relative to the installed project. */
  cwd: string;
  form: 'ESM' | 'CommonJS';
  server: boolean;
  needsRedis: boolean;
  needsPostgres: boolean;
  needsApi: boolean;
  /** For the Express 4 runs: the compiled file (relative to the project) to copy to `file` first. */
  copyFrom?: string;
}

/**
 * Every program to run: each block once as ESM (TypeScript compiled, or JavaScript as written); embedding code
 * (a server) also as CommonJS; code importing `express` once more on Express 4.
 */
export function programs(snippets: Snippet[]): Program[] {
  const list: Program[] = [];
  for (const snippet of snippets) {
    const forms: [Program['form'], string, string][] = []; // form, folder, file
    if (snippet.language === 'ts') {
      forms.push(['ESM', 'esm', `out/${snippet.id}.js`]);
      if (!snippet.topLevelAwait && snippet.server) forms.push(['CommonJS', 'cjs', `out/${snippet.id}.js`]);
    } else {
      forms.push([snippet.commonJs ? 'CommonJS' : 'ESM', 'js', `${snippet.id}.${snippet.commonJs ? 'cjs' : 'mjs'}`]);
    }
    const needs = { server: snippet.server, needsRedis: snippet.code.includes('REDIS_URL'), needsPostgres: snippet.code.includes('DATABASE_URL'), needsApi: snippet.code.includes('PETSTORE_URL') };
    for (const [form, dir, file] of forms) {
      list.push({ label: `${snippet.where} (${form})`, file, cwd: dir, form, ...needs });
      if (snippet.imports.includes('express')) {
        const e4 = join('e4', dir === 'js' ? '' : dir);
        list.push({ label: `${snippet.where} (${form}, Express 4)`, file: basename(file), cwd: e4, form, copyFrom: join(dir, file), ...needs });
      }
    }
  }
  return list;
}

/**
 * Runs one program in the installed project; answers what went wrong, or undefined. A server must answer an
 * authenticated `GET /v1/categories` with 200, a JSON array and `X-RateLimit-Limit`; other code must exit 0.
 */
export async function runProgram(app: string, program: Program, env: Record<string, string>): Promise<string | undefined> {
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

/** The type-only exports of each entry point, as TypeScript sees them in the installed package. */
export function typeExports(program: ts.Program, app: string, entries: string[]): Record<string, string[]> {
  const checker = program.getTypeChecker();
  const probe = program.getSourceFile(join(app, 'esm', 'src', 'exports-probe.ts'));
  if (probe === undefined) throw new Error('exports-probe.ts is not in the ESM compilation');
  const probeExports = checker.getExportsOfModule(checker.getSymbolAtLocation(probe)!);
  const result: Record<string, string[]> = {};
  entries.forEach((entry, index) => {
    const namespace = probeExports.find((exported) => exported.getName() === `e${index}`);
    if (namespace === undefined) throw new Error(`no e${index} (${entry}) in exports-probe.ts`);
    const names = checker.getExportsOfModule(checker.getAliasedSymbol(namespace)).filter((exported) => {
      const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      return (target.flags & ts.SymbolFlags.Value) === 0;
    });
    result[entry] = names.map((exported) => exported.getName()).sort();
  });
  return result;
}

/**
 * Writes each README block where its compilations and runs expect it: TypeScript under esm/src (and, without
 * top-level await, cjs/src), JavaScript under js/. Under e4/, `express` resolves to Express 4 (a link to the
 * installed `express4` alias), for a second run of the code that imports it.
 */
async function writeSnippets(app: string, snippets: Snippet[]): Promise<void> {
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
