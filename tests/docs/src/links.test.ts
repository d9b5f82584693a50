/**
 * Every Markdown file of the repository (the READMEs, docs/, BENCHMARKS.md, the changelogs and changesets):
 * each relative link reaches a file of the repository, and each `#anchor` a heading or an HTML id of its
 * target, as GitHub renders them. First the checker itself, on files made for it, so a checker that finds
 * nothing cannot pass for a repository without broken links.
 */
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { brokenLinks, readMarkdown } from './markdown-links.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
/** Folders that hold no documentation of ours: dependencies, build output, caches. */
const SKIPPED = new Set(['node_modules', '.git', 'dist', '.turbo', '.types', 'coverage', 'generated', '.ci']);

async function markdownFiles(folder: string): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await readdir(folder, { withFileTypes: true })) {
    if (entry.isDirectory() && !SKIPPED.has(entry.name)) files.push(...(await markdownFiles(join(folder, entry.name))));
    else if (entry.isFile() && entry.name.endsWith('.md')) files.push(join(folder, entry.name));
  }
  return files;
}

describe('the link checker', () => {
  it('gives headings GitHub’s anchors: lower case, punctuation and code marks dropped, spaces to hyphens, repeats numbered', () => {
    const { anchors } = readMarkdown(
      [
        '# petstore categories API — an embeddable TypeScript library',
        '## Several instances, one quota (Redis)',
        '### The client (`@petstore/client`)',
        '## Safe retries of creates: `Idempotency-Key`',
        '## Usage',
        '## Usage',
        '## *Emphasis* and [a link](https://example.com) & more',
        '<a id="store-failures"></a>',
        '```sh',
        '# a comment in a code block, not a heading',
        '```',
      ].join('\n\n'),
    );
    expect([...anchors].sort()).toEqual(
      [
        'petstore-categories-api--an-embeddable-typescript-library',
        'several-instances-one-quota-redis',
        'the-client-petstoreclient',
        'safe-retries-of-creates-idempotency-key',
        'usage',
        'usage-1',
        'emphasis-and-a-link--more',
        'store-failures',
      ].sort(),
    );
  });

  describe('on files made for it', () => {
    let folder: string;
    beforeAll(async () => {
      folder = await mkdtemp(join(tmpdir(), 'petstore-docs-'));
      await mkdir(join(folder, 'docs'));
      await mkdir(join(folder, 'src'));
      await writeFile(join(folder, 'src', 'file.ts'), 'export {};\n');
      await writeFile(join(folder, 'docs', 'guide.md'), '# Guide\n\n<a id="limits"></a>\n### Rate limits\n\nBack to [the start](../README.md#start).\n');
      await writeFile(
        join(folder, 'README.md'),
        [
          '## Start',
          'Fine: [guide](docs/guide.md), [heading](docs/guide.md#rate-limits), [id](docs/guide.md#limits), [here](#start),',
          '[line](src/file.ts#L1), [lines](src/file.ts#L1-L2), [folder](docs), [web](https://example.com/x.md#nowhere), <a href="docs/guide.md">html</a>.',
          'Broken: [gone](docs/missing.md), [no heading](docs/guide.md#usage), [no local heading](#end),',
          '[outside](../elsewhere.md), [not a line](src/file.ts#top), <a href="#nope">html</a>, ![image](img/logo.png).',
          '```md\n[in a code block](not-checked.md)\n```',
        ].join('\n\n'),
      );
    });
    afterAll(() => rm(folder, { recursive: true, force: true }));

    it('reports exactly the broken ones, with the file and line', () => {
      expect(brokenLinks(join(folder, 'README.md'), { within: folder })).toEqual([
        'README.md:7: docs/missing.md: no such file: docs/missing.md',
        'README.md:7: docs/guide.md#usage: no anchor #usage in docs/guide.md',
        'README.md:7: #end: no anchor #end in README.md',
        'README.md:9: ../elsewhere.md: the target ../elsewhere.md is outside the folder checked',
        'README.md:9: src/file.ts#top: #top is neither a Markdown anchor nor a line (#L12) of src/file.ts',
        'README.md:9: #nope: no anchor #nope in README.md',
        'README.md:9: img/logo.png: no such file: img/logo.png',
      ]);
      expect(brokenLinks(join(folder, 'docs', 'guide.md'), { within: folder })).toEqual([]);
    });

    it('reports a link out of the folder it is confined to, though the file exists (a packed README)', () => {
      expect(brokenLinks(join(folder, 'docs', 'guide.md'), { within: join(folder, 'docs') })).toEqual([
        'guide.md:6: ../README.md#start: the target ../README.md is outside the folder checked',
      ]);
    });
  });
});

describe('the repository’s Markdown', async () => {
  const files = (await markdownFiles(ROOT)).map((file) => relative(ROOT, file)).sort();

  it('includes every README, docs/ and the benchmarks', () => {
    const packages = readdirSync(join(ROOT, 'packages')).map((name) => `packages/${name}/README.md`);
    expect(files).toEqual(expect.arrayContaining(['README.md', 'BENCHMARKS.md', 'docs/http-api.md', ...packages]));
  });

  for (const file of files) {
    it(`${file}: every relative link and #anchor resolves`, () => {
      expect(brokenLinks(join(ROOT, file), { within: ROOT })).toEqual([]);
    });
  }
});
