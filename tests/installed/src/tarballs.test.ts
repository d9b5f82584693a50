/**
 * The packed tarballs as npm would publish them: are-the-types-wrong (default profile), publint (strict),
 * the files and metadata every package carries, `npm publish --dry-run`.
 */
import { checkPackage, createPackageFromTarballData } from '@arethetypeswrong/core';
import { execFile } from 'node:child_process';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';
import { describe, expect, inject, it } from 'vitest';
import { PACKAGES, ROOT, npm, readJson, workspaceVersion } from './projects.js';

const { folder, tarballs } = inject('installed');
const none = Object.fromEntries(Object.keys(tarballs).map((name) => [name, []]));

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
      const extracted = join(folder, 'extracted', name);
      await mkdir(extracted, { recursive: true });
      await promisify(execFile)('tar', ['-xzf', tarballs[name], '-C', extracted]);
      const installed = join(extracted, 'package');
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
