/**
 * The code of the READMEs: every fenced block tagged `ts` or `js` in README.md and packages/*\/README.md. Each
 * one is a complete module, compiled and run against the installed tarballs (see the root README, "Code in
 * the READMEs"); other tags (`sh`, `text`, `json`) are not code to run.
 */
import { readFile, readdir } from 'node:fs/promises';
import { join, relative } from 'node:path';
import ts from 'typescript';
import { ROOT } from './projects.js';

export interface Snippet {
  /** Where it is, e.g. `packages/core/README.md:42` (the line of the opening fence). */
  where: string;
  /** A file-name-safe id, unique among the snippets. */
  id: string;
  language: 'ts' | 'js';
  code: string;
  /** TypeScript with top-level `await` can only be compiled as ESM. */
  topLevelAwait: boolean;
  /** Plain JavaScript using `require(` is CommonJS; other JavaScript is ESM. */
  commonJs: boolean;
  /** It starts a server on `process.env.PORT`. */
  server: boolean;
  /** The packages it imports (not `node:` builtins, not relative). */
  imports: string[];
}

const FENCE = /^```(ts|js)[ \t]*\n([\s\S]*?)^```[ \t]*$/gm;

export async function readmeFiles(): Promise<string[]> {
  const packages = await readdir(join(ROOT, 'packages'));
  return [join(ROOT, 'README.md'), ...packages.sort().map((name) => join(ROOT, 'packages', name, 'README.md'))];
}

export async function readSnippets(): Promise<Snippet[]> {
  const snippets: Snippet[] = [];
  for (const file of await readmeFiles()) {
    const text = await readFile(file, 'utf8');
    const name = relative(ROOT, file);
    for (const match of text.matchAll(FENCE)) {
      const language = match[1] as 'ts' | 'js';
      const code = match[2] ?? '';
      const line = text.slice(0, match.index).split('\n').length;
      const source = ts.createSourceFile(`snippet.${language}`, code, ts.ScriptTarget.ES2022, true);
      snippets.push({
        where: `${name}:${line}`,
        id: `${name.replace(/\/README\.md$|\.md$/, '').replace(/[^a-z0-9]+/gi, '-')}-${line}`,
        language,
        code,
        topLevelAwait: hasTopLevelAwait(source),
        commonJs: language === 'js' && /\brequire\(/.test(code),
        server: /process\.env\.PORT\b/.test(code),
        imports: importedPackages(source),
      });
    }
  }
  return snippets;
}

function hasTopLevelAwait(source: ts.SourceFile): boolean {
  let found = false;
  const visit = (node: ts.Node): void => {
    if (found || ts.isFunctionLike(node) || ts.isClassLike(node)) return;
    if (ts.isAwaitExpression(node) || (ts.isForOfStatement(node) && node.awaitModifier !== undefined)) {
      found = true;
      return;
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function importedPackages(source: ts.SourceFile): string[] {
  const names = new Set<string>();
  const visit = (node: ts.Node): void => {
    let specifier: ts.Expression | undefined;
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined) specifier = node.moduleSpecifier;
    if (ts.isCallExpression(node) && (node.expression.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(node.expression) && node.expression.text === 'require'))) {
      specifier = node.arguments[0];
    }
    if (specifier !== undefined && ts.isStringLiteral(specifier) && !specifier.text.startsWith('node:') && !specifier.text.startsWith('.')) {
      const parts = specifier.text.split('/');
      names.add(specifier.text.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] as string));
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return [...names].sort();
}
