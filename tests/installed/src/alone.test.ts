/**
 * Each package installed on its own, from its tarball, with only its peers — as its README's install line
 * does — into a fresh project outside the workspace: no `--legacy-peer-deps`, nothing of the workspace.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { EXPECTED_EXPORTS } from './expected-exports.js';
import { PACKAGES, installProject, readJson, runNode, workspaceVersion, type PackageName } from './projects.js';

/** What each package needs beside itself: its peers (ours as tarballs, others from the registry). */
const PEERS: Record<PackageName, { ours: PackageName[]; theirs: string[] }> = {
  '@petstore/core': { ours: [], theirs: [] },
  '@petstore/storage-memory': { ours: ['@petstore/core'], theirs: [] },
  '@petstore/storage-redis': { ours: ['@petstore/core'], theirs: ['ioredis'] },
  '@petstore/storage-postgres': { ours: ['@petstore/core'], theirs: ['pg'] },
  '@petstore/adapter-fastify': { ours: ['@petstore/core'], theirs: ['fastify'] },
  '@petstore/adapter-express': { ours: ['@petstore/core'], theirs: ['express'] },
  '@petstore/client': { ours: [], theirs: [] },
  '@petstore/opentelemetry': { ours: ['@petstore/core'], theirs: ['@opentelemetry/api'] },
  // A command: its database clients are dependencies of its own, installed with it.
  '@petstore/cli': { ours: ['@petstore/core', '@petstore/storage-postgres', '@petstore/storage-redis'], theirs: [] },
};

const { folder, tarballs } = inject('installed');

describe.concurrent('each package, installed alone with its peers', () => {
  for (const name of Object.values(PACKAGES)) {
    it(`${name} installs from its tarball without the workspace, and loads with require and import`, async () => {
      const project = join(folder, `alone-${basename(name)}`);
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
