/**
 * The packed tarballs as npm would publish them: are-the-types-wrong (default profile), publint (strict),
 * the files and metadata every package carries, Markdown that links only inside the tarball or to absolute
 * URLs (the registry shows the README without the rest of the repository), `npm publish --dry-run`.
 */
import { brokenLinks } from '@petstore/docs-tests/markdown-links';
import { checkPackage, createPackageFromTarballData } from '@arethetypeswrong/core';
import { execFile } from 'node:child_process';
import { mkdir, readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { PACKAGES, ROOT, npm, readJson, workspaceVersion } from './projects.js';

const { folder, tarballs } = inject('installed');
const none = Object.fromEntries(Object.keys(tarballs).map((name) => [name, []]));
/** Package name → the folder its tarball was extracted to (the `package/` inside it). */
const extracted: Record<string, string> = {};

beforeAll(async () => {
  for (const name of Object.values(PACKAGES)) {
    const destination = join(folder, 'extracted', name);
    await mkdir(destination, { recursive: true });
    await promisify(execFile)('tar', ['-xzf', tarballs[name], '-C', destination]);
    extracted[name] = join(destination, 'package');
  }
});

describe('the tarballs', () => {
  it('are-the-types-wrong (default profile: node10, node16 CJS and ESM, bundler) finds no problem in any', async () => {
    const problems: Record<string, unknown[]> = {};
    for (const [name, path] of Object.entries(tarballs)) {
      const analysis = await checkPackage(createPackageFromTarballData(new Uint8Array(await readFile(path))));
      problems[name] = 'problems' in analysis ? analysis.problems : ['no types'];
    }
    expect(problems).toEqual(none);
  });

  it('publint --strict finds nothing to report in any', async () => {
    const messages: Record<string, string[]> = {};
    for (const [name, path] of Object.entries(tarballs)) {
      const bytes = await readFile(path);
      const tarball = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
      const result = await publint({ pack: { tarball }, strict: true, level: 'suggestion' });
      messages[name] = result.messages.map((message) => formatMessage(message, result.pkg) ?? message.code);
    }
    expect(messages).toEqual(none);
  });

  it('each holds its README, LICENSE, CHANGELOG and package metadata', async () => {
    for (const name of Object.values(PACKAGES)) {
      const installed = extracted[name]!;
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

  it('link, in their Markdown (README, CHANGELOG), only to files inside the tarball and anchors there, or to absolute URLs', async () => {
    const problems: Record<string, string[]> = {};
    for (const name of Object.values(PACKAGES)) {
      const markdownFiles = (await readdir(extracted[name]!, { recursive: true })).filter((file) => file.endsWith('.md'));
      expect(markdownFiles, name).toContain('README.md');
      problems[name] = markdownFiles.sort().flatMap((file) => brokenLinks(join(extracted[name]!, file), { within: extracted[name]! }));
    }
    expect(problems).toEqual(none);
  });

  it('npm publish --dry-run succeeds for each package', async () => {
    const output = await npm(['publish', '--dry-run', ...Object.keys(PACKAGES).flatMap((name) => ['-w', `packages/${name}`])], ROOT);
    for (const name of Object.values(PACKAGES)) expect(output).toContain(`+ ${name}@${workspaceVersion(name)}`);
  });
});
