/**
 * Every type that an entry point's exports use — in an option, a parameter, a return value, a callback — is
 * exported too, so a user can name it: API Extractor's `ae-forgotten-export` check over the built declarations
 * of every entry of every package (`exports[entry].import.types` of each package.json, so a new entry is
 * checked without a change here).
 *
 * A subpath entry (`@petstore/core/node`) uses types that the package's main entry declares and exports
 * (`Petstore`, `PetstoreRequest` …; the bundler puts the shared declarations in a chunk both entries import).
 * Such a type is exported for the user — `import type { Petstore } from '@petstore/core'` names it — when the
 * main entry exports that very declaration, which is checked. Any other forgotten type fails the test, as does
 * any compiler message that surfaces.
 */
import { Extractor, ExtractorConfig, ExtractorLogLevel, ExtractorMessageCategory, type ExtractorMessage } from '@microsoft/api-extractor';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { PACKAGES, ROOT } from './projects.js';

interface Entry {
  /** `@petstore/core/node` */
  name: string;
  /** `./node`; `.` for the main entry. */
  subpath: string;
  packageFolder: string;
  declarations: string;
}

type Exports = Record<string, string | { import: { types: string } }>;

function entriesOf(folder: string): Entry[] {
  const packageFolder = join(ROOT, 'packages', folder);
  const manifest = JSON.parse(readFileSync(join(packageFolder, 'package.json'), 'utf8')) as { name: string; exports: Exports };
  return Object.entries(manifest.exports).flatMap(([subpath, target]) =>
    typeof target === 'string' ? [] : [{ name: manifest.name + subpath.slice(1), subpath, packageFolder, declarations: join(packageFolder, target.import.types) }],
  );
}

/**
 * Of `names`, those that `entry` uses and `main` exports as the same declaration (not merely the same name):
 * the names in scope at the top of the entry's declaration file, and the main entry's exports, resolved
 * through their imports and re-exports to what they declare.
 */
function exportedByMain(entry: Entry, main: Entry, names: readonly string[]): string[] {
  const program = ts.createProgram([entry.declarations, main.declarations], {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    skipLibCheck: true,
  });
  const checker = program.getTypeChecker();
  const declared = (symbol: ts.Symbol) => ((symbol.flags & ts.SymbolFlags.Alias) !== 0 ? checker.getAliasedSymbol(symbol) : symbol).declarations?.[0];
  const sourceOf = (file: string) => {
    const source = program.getSourceFile(file);
    if (source === undefined) throw new Error(`${file} is not in the program`);
    return source;
  };
  const mainModule = checker.getSymbolAtLocation(sourceOf(main.declarations));
  if (mainModule === undefined) throw new Error(`${main.declarations} is not a module`);
  const mainExports = new Map(checker.getExportsOfModule(mainModule).map((symbol) => [symbol.getName(), declared(symbol)]));
  const inScope = checker.getSymbolsInScope(sourceOf(entry.declarations), ts.SymbolFlags.Type | ts.SymbolFlags.Value | ts.SymbolFlags.Alias);
  return names.filter((name) => {
    const used = inScope.find((symbol) => symbol.getName() === name);
    return used !== undefined && declared(used) !== undefined && declared(used) === mainExports.get(name);
  });
}

/** API Extractor's findings for one entry: forgotten exports by name, and compiler errors. */
function analyse(entry: Entry): { forgotten: string[]; compilerErrors: string[] } {
  const config = ExtractorConfig.prepare({
    configObject: {
      projectFolder: entry.packageFolder,
      mainEntryPointFilePath: entry.declarations,
      compiler: {
        overrideTsconfig: {
          // skipLibCheck: the declarations are read, not type-checked again (attw and the READMEs' code compiled
          // against the tarballs check them); checking @types/node with them takes seconds per entry.
          compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2023', 'dom'], types: ['node'], strict: true, skipLibCheck: true },
        },
      },
      apiReport: { enabled: false },
      docModel: { enabled: false },
      dtsRollup: { enabled: false },
      tsdocMetadata: { enabled: false },
      messages: {
        compilerMessageReporting: { default: { logLevel: ExtractorLogLevel.Warning } },
        extractorMessageReporting: { default: { logLevel: ExtractorLogLevel.None }, 'ae-forgotten-export': { logLevel: ExtractorLogLevel.Warning } },
        tsdocMessageReporting: { default: { logLevel: ExtractorLogLevel.None } },
      },
    },
    configObjectFullPath: undefined,
    packageJsonFullPath: join(entry.packageFolder, 'package.json'),
  });
  const forgotten: string[] = [];
  const compilerErrors: string[] = [];
  Extractor.invoke(config, {
    localBuild: true,
    messageCallback(message: ExtractorMessage) {
      if (message.messageId === 'ae-forgotten-export') forgotten.push(/The symbol "([^"]+)"/.exec(message.text)?.[1] ?? message.text);
      else if (message.category === ExtractorMessageCategory.Compiler) compilerErrors.push(message.formatMessageWithLocation(ROOT));
      message.handled = true; // collected here, not printed
    },
  });
  return { forgotten: forgotten.sort(), compilerErrors };
}

describe('every type a public entry uses is exported (API Extractor, ae-forgotten-export)', () => {
  for (const folder of Object.keys(PACKAGES)) {
    const entries = entriesOf(folder);
    const main = entries.find((entry) => entry.subpath === '.');
    it.each(entries.map((entry) => [entry.name, entry] as const))('%s', (_name, entry) => {
      const { forgotten, compilerErrors } = analyse(entry);
      expect(compilerErrors, 'the declarations compile').toEqual([]);
      const shared = main === undefined || main === entry ? [] : exportedByMain(entry, main, forgotten);
      expect(forgotten.filter((name) => !shared.includes(name)), 'types used by the exports but not exported').toEqual([]);
    });
  }
});
