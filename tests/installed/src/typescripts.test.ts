/**
 * The READMEs' code (installed by global-setup.ts) compiled, strict, with each supported TypeScript under each
 * `moduleResolution` it has (the root README, "Installing the packages"): the oldest and the latest supported
 * (tests/installed's `typescript-oldest` and `typescript-latest`), and the workspace's for `node10`, the one
 * resolution snippets.test.ts does not compile with it. Our packages' declarations are checked with them.
 * Apart from snippets.test.ts, so the compilers run beside the README code's runs.
 */
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { TYPESCRIPTS, compileSnippets, runsAsOwnProcess, typescriptVersion, type Compilation, type Resolution, type TypeScriptPackage } from './run-snippets.js';
import { readSnippets } from './snippets.js';

const { app } = inject('installed');
const snippets = await readSnippets();

/** The TypeScripts by role, for the tests' names. */
const ROLE = { 'typescript-oldest': 'the oldest supported', typescript: 'the workspace’s', 'typescript-latest': 'the latest' } as const;

/** Each TypeScript with each resolution it has, but those snippets.test.ts compiles (and emits) already. */
const COMPILATIONS: [TypeScriptPackage, Resolution][] = TYPESCRIPTS.flatMap(({ package: typescript, resolutions }) =>
  resolutions.filter((resolution) => typescript !== 'typescript' || resolution === 'node10').map((resolution): [TypeScriptPackage, Resolution] => [typescript, resolution]),
);

describe('the READMEs’ code compiles, strict, with each supported TypeScript under each resolution it has', () => {
  // One at a time in this process (the compiler API is synchronous); the compilations that run as their own
  // `tsc` (TypeScript 7) start together first, on the other core, and are awaited in their turn.
  const inOwnProcess = new Map<string, Promise<Compilation>>();
  beforeAll(() => {
    for (const [typescript, resolution] of COMPILATIONS) {
      if (!runsAsOwnProcess(typescript)) continue;
      const compilation = compileSnippets(app, typescript, resolution, snippets);
      compilation.catch(() => undefined); // its test reports the failure
      inOwnProcess.set(`${typescript} ${resolution}`, compilation);
    }
  });

  it('covers the oldest and the latest TypeScript under nodenext, node16 and bundler, and node10 where it exists', () => {
    const covered = COMPILATIONS.map(([typescript, resolution]) => `${typescript} ${resolution}`);
    expect(covered).toEqual(
      expect.arrayContaining(['typescript-oldest nodenext', 'typescript-oldest node16', 'typescript-oldest node10', 'typescript-oldest bundler', 'typescript-latest nodenext', 'typescript-latest node16', 'typescript-latest bundler', 'typescript node10']),
    );
    expect(typescriptVersion('typescript-oldest')).toMatch(/^5\.0\./);
    expect(typescriptVersion('typescript-latest')).toMatch(/^7\./);
  });

  for (const [typescript, resolution] of COMPILATIONS) {
    it(`TypeScript ${typescriptVersion(typescript)} (${ROLE[typescript]}), moduleResolution ${resolution}`, async () => {
      const { problems } = await (inOwnProcess.get(`${typescript} ${resolution}`) ?? compileSnippets(app, typescript, resolution, snippets));
      expect(problems).toEqual([]);
    });
  }
});
