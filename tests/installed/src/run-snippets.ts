/**
 * Compiling and running the READMEs' code in the installed project (written there by `global-setup.ts`).
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdir, symlink, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { basename, dirname, join, resolve as resolvePath } from 'node:path';
import ts from 'typescript';
import { EXPECTED_EXPORTS } from './expected-exports.js';
import { ROOT, installProject, runNode, startServer, workspaceVersion, type PackageName } from './projects.js';
import type { Snippet } from './snippets.js';

const require = createRequire(import.meta.url);

export const FREE_KEY = 'installed-test-free-key';
export const ENTERPRISE_KEY = 'installed-test-enterprise-key';

/**
 * Third-party packages the READMEs' code may import, at the versions the workspace has (npm's cache has them).
 * The compilers are the workspace's TypeScripts (see `TYPESCRIPTS`), with the workspace's `@types/node`: tools,
 * not dependencies.
 */
const THIRD_PARTY = [
  'fastify',
  'express',
  'hono',
  '@hono/node-server',
  'node-fetch',
  'ioredis',
  'pg',
  '@types/express',
  '@types/pg',
  '@opentelemetry/api',
  '@opentelemetry/sdk-metrics',
  '@opentelemetry/exporter-prometheus',
];

/** Installs every tarball and the frameworks into `app`, and writes the READMEs' code there. */
export async function installApp(app: string, tarballs: Record<PackageName, string>, snippets: Snippet[]): Promise<void> {
  await installProject(app, {
    ...Object.fromEntries(Object.entries(tarballs).map(([name, path]) => [name, `file:${path}`])),
    ...Object.fromEntries(THIRD_PARTY.map((name) => [name, workspaceVersion(name)])),
    express4: `npm:express@${workspaceVersion('express4')}`,
  });
  await writeSnippets(app, snippets);
}

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

/**
 * A `moduleResolution` the READMEs' code is compiled under, with the `module` it goes with: `nodenext` and
 * `bundler` compile the ESM copy (esm/, `"type": "module"`, top-level await allowed), `node16` and `node10` the
 * CommonJS copy (cjs/).
 */
export type Resolution = 'nodenext' | 'node16' | 'node10' | 'bundler';

const RESOLUTIONS: Record<Resolution, { dir: 'esm' | 'cjs'; module: string; moduleResolution: string }> = {
  nodenext: { dir: 'esm', module: 'nodenext', moduleResolution: 'nodenext' },
  bundler: { dir: 'esm', module: 'esnext', moduleResolution: 'bundler' },
  node16: { dir: 'cjs', module: 'node16', moduleResolution: 'node16' },
  node10: { dir: 'cjs', module: 'commonjs', moduleResolution: 'node10' },
};

/**
 * The TypeScript versions the packages support (the root README, "Installing the packages"): the oldest and the
 * latest, installed under aliases (tests/installed/package.json), each under every resolution it has
 * (TypeScript 6 deprecated `node10` and 7 removed it); and the workspace's own, which emits the code that is
 * run (`nodenext`, `node16`) and is the newest TypeScript with `node10` undeprecated.
 */
export const TYPESCRIPTS = [
  { package: 'typescript-latest', resolutions: ['nodenext', 'node16', 'bundler'] },
  { package: 'typescript-oldest', resolutions: ['nodenext', 'node16', 'node10', 'bundler'] },
  { package: 'typescript', resolutions: ['nodenext', 'node16', 'node10'] },
] as const satisfies readonly { package: string; resolutions: readonly Resolution[] }[];

export type TypeScriptPackage = (typeof TYPESCRIPTS)[number]['package'];

/** The version of an installed TypeScript (`typescript`, `typescript-oldest`, `typescript-latest`). */
export function typescriptVersion(name: TypeScriptPackage): string {
  return (require(`${name}/package.json`) as { version: string }).version;
}

/** The options every compilation shares: strict, Node's types (the workspace's `@types/node`). */
const COMMON_OPTIONS = { strict: true, target: 'es2022', types: ['node'], typeRoots: [join(ROOT, 'node_modules', '@types')], esModuleInterop: true };

/** A declaration file of one of our packages, as installed from its tarball. */
const OUR_DECLARATIONS = /[\\/]node_modules[\\/]@petstore[\\/].*\.d\.[cm]?ts$/;

/** What one compilation found, and (in-process) its program, for `typeExports`. */
export interface Compilation {
  /** One line per error: `README.md:123: TS2304 …` for the READMEs' code, else the file and line. */
  problems: string[];
  program?: ts.Program;
}

/**
 * Compiles one copy of the READMEs' code (with the exports probe) with one TypeScript under one resolution,
 * strict. What is checked: the code, and our packages' declarations (an error in them is an error for every
 * user without `skipLibCheck`); not third-party declarations (fastify, pg, …, whose TypeScript floors are
 * theirs). The workspace's TypeScript also emits the `nodenext` and `node16` copies, which are run.
 * TypeScript 7 has no JavaScript compiler API: it runs as its own `tsc`.
 */
export async function compileSnippets(app: string, typescript: TypeScriptPackage, resolution: Resolution, snippets: Snippet[]): Promise<Compilation> {
  if (runsAsOwnProcess(typescript)) return { problems: await compileWithTsc(app, typescript, resolution, snippets) };
  return compileInProcess(require(typescript) as typeof ts, app, resolution, typescript === 'typescript', snippets);
}

/** Whether this TypeScript compiles as its own `tsc` process: it has no JavaScript compiler API (TypeScript 7). */
export function runsAsOwnProcess(typescript: TypeScriptPackage): boolean {
  return typeof (require(typescript) as Partial<typeof ts>).createProgram !== 'function';
}

function compileInProcess(api: typeof ts, app: string, resolution: Resolution, emitsForRuns: boolean, snippets: Snippet[]): Compilation {
  const { dir: folder, module, moduleResolution } = RESOLUTIONS[resolution];
  const dir = join(app, folder);
  const emit = emitsForRuns && (resolution === 'nodenext' || resolution === 'node16');
  // skipLibCheck off, but only our files are asked for their diagnostics: third-party declarations go unchecked.
  const { options, errors } = api.convertCompilerOptionsFromJson(
    { ...COMMON_OPTIONS, skipLibCheck: false, module, moduleResolution, outDir: join(dir, 'out'), noEmit: !emit },
    dir,
  );
  if (errors.length > 0) return { problems: describeDiagnostics(api, errors, snippets) };
  const program = api.createProgram(api.sys.readDirectory(join(dir, 'src'), ['.ts']), options);
  const ours = program.getSourceFiles().filter((file) => !file.isDeclarationFile || OUR_DECLARATIONS.test(file.fileName));
  const diagnostics = [
    ...program.getOptionsDiagnostics(),
    ...program.getGlobalDiagnostics(),
    ...ours.flatMap((file) => [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)]),
    // File by file: a whole-program emit would first check every declaration file, third parties' included.
    ...(emit ? program.getRootFileNames().flatMap((name) => program.emit(program.getSourceFile(name)).diagnostics) : []),
  ];
  return { problems: describeDiagnostics(api, diagnostics, snippets), program };
}

/** Diagnostics as `README.md:123: TS2304 …`, pointing to the README line they come from. */
function describeDiagnostics(api: typeof ts, diagnostics: readonly ts.Diagnostic[], snippets: Snippet[]): string[] {
  return diagnostics.map((diagnostic) => {
    const file = diagnostic.file;
    const text = api.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    if (file === undefined || diagnostic.start === undefined) return `TS${diagnostic.code} ${text}`;
    const { line } = file.getLineAndCharacterOfPosition(diagnostic.start);
    return `${whereInReadme(file.fileName, line + 1, snippets)}: TS${diagnostic.code} ${text}`;
  });
}

/** `README.md:123` for line `line` (1-based) of a snippet's file, else the file's own name and line. */
function whereInReadme(fileName: string, line: number, snippets: Snippet[]): string {
  const snippet = snippets.find((candidate) => fileName.endsWith(`/${candidate.id}.ts`));
  if (snippet === undefined) return `${fileName}:${line}`;
  const [readme, fence] = snippet.where.split(':') as [string, string];
  return `${readme}:${Number(fence) + line}`;
}

/**
 * Compiles with the `tsc` of the TypeScript installed as `typescript`, without emitting; answers its errors.
 * `tsc` cannot be asked to check some declaration files and not others: under `nodenext` it checks them all
 * (`skipLibCheck` off; errors located in third-party declarations left out), which covers our packages'
 * declarations; the other resolutions reach the same declarations and skip that (it costs four times the rest).
 */
async function compileWithTsc(app: string, typescript: TypeScriptPackage, resolution: Resolution, snippets: Snippet[]): Promise<string[]> {
  const { dir, module, moduleResolution } = RESOLUTIONS[resolution];
  const project = join(app, `tsconfig.${typescript}.${resolution}.json`);
  await writeFile(
    project,
    JSON.stringify({ compilerOptions: { ...COMMON_OPTIONS, skipLibCheck: resolution !== 'nodenext', noEmit: true, module, moduleResolution }, include: [`${dir}/src/**/*.ts`] }),
  );
  const tsc = join(dirname(require.resolve(`${typescript}/package.json`)), 'bin', 'tsc');
  const output = await new Promise<string>((resolve, reject) => {
    execFile(process.execPath, [tsc, '-p', project, '--pretty', 'false'], { cwd: app, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      // Exit status 1 or 2 with output: errors were reported (on stdout). Anything else (a crash, no binary) fails.
      if (error !== null && !(typeof error.code === 'number' && error.code <= 2 && stdout !== '')) reject(new Error(`${typescript}: ${error.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
  const problems: string[] = [];
  let current: { thirdParty: boolean; text: string } | undefined;
  const flush = () => {
    if (current !== undefined && !current.thirdParty) problems.push(current.text);
    current = undefined;
  };
  for (const line of output.split('\n')) {
    if (line.trim() === '') continue;
    const located = /^(.+?)\((\d+),\d+\): error (TS\d+): (.*)$/.exec(line);
    const global = /^error (TS\d+): (.*)$/.exec(line);
    if (located !== null) {
      flush();
      const [, file = '', lineNumber = '0', code, message] = located;
      const path = resolvePath(app, file);
      const thirdParty = /[\\/]node_modules[\\/]/.test(path) && !OUR_DECLARATIONS.test(path);
      current = { thirdParty, text: `${whereInReadme(path, Number(lineNumber), snippets)}: ${code} ${message}` };
    } else if (global !== null) {
      flush();
      current = { thirdParty: false, text: `${global[1]} ${global[2]}` };
    } else if (current !== undefined) {
      current.text += `\n${line.trim()}`; // a message's continuation lines
    } else {
      problems.push(line);
    }
  }
  flush();
  return problems;
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
