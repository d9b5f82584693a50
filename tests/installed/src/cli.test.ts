/**
 * The `petstore` command as a user of the registry gets it: installed from the @petstore/cli tarball (with the
 * other tarballs) into the throwaway project outside the workspace, and run with `npx` there — its help, a usage
 * error, and keys issued and read back in PostgreSQL and in Redis (the database clients and storage packages it
 * imports only then come from that project, not from the workspace).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { CHILD_DEADLINE_MS, npmEnvironment } from './projects.js';

const { app, postgres, redis } = inject('installed');
const run = randomBytes(4).toString('hex');

/** `npx --no petstore <args>` in the installed project (`--no`: never fetched from the registry). */
function npxPetstore(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const npmCli = process.env['npm_execpath'];
  const [file, fileArgs] =
    npmCli !== undefined && /npm-cli\.js$/.test(npmCli) ? [process.execPath, [npmCli, 'exec', '--no', '--', 'petstore', ...args]] : ['npx', ['--no', 'petstore', ...args]];
  const base = Object.fromEntries(Object.entries(npmEnvironment()).filter(([name]) => !name.startsWith('PETSTORE_')));
  return new Promise((resolve) => {
    execFile(file, fileArgs, { cwd: app, env: { ...base, ...env }, timeout: CHILD_DEADLINE_MS }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout, stderr });
    });
  });
}

describe('npx petstore, installed from its tarball', () => {
  it('--help lists the commands; exit 0', async () => {
    const help = await npxPetstore(['--help']);
    expect(help.code, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^ {2}petstore keys issue +--account <id> --plan <plan>/m);
    expect(help.stdout).toMatch(/^ {2}petstore limits reset /m);
  });

  it('a usage error: exit 2, one line', async () => {
    const result = await npxPetstore(['keys', 'issue', '--plan', 'pro']);
    expect({ code: result.code, stdout: result.stdout }).toEqual({ code: 2, stdout: '' });
    expect(result.stderr).toBe('petstore: keys issue: --account is required\n');
  });

  const backends = [
    { backend: 'PostgreSQL', server: postgres, variable: 'PETSTORE_DATABASE_URL' },
    { backend: 'Redis', server: redis, variable: 'PETSTORE_REDIS_URL' },
  ];
  for (const { backend, server, variable } of backends) {
    it.skipIf('skipReason' in server)(`issues a key in ${backend} and shows it`, async () => {
      const env = { [variable]: (server as { url: string }).url };
      // The tables come from `petstore migrate` (no other command changes the schema); with Redis it does nothing.
      const migrated = await npxPetstore(['migrate'], env);
      expect(migrated.code, migrated.stderr).toBe(0);
      const issued = await npxPetstore(['keys', 'issue', '--account', `installed-${run}`, '--plan', 'free', '--json'], env);
      expect(issued.code, issued.stderr).toBe(0);
      const { key, keyId } = JSON.parse(issued.stdout) as { key: string; keyId: string };
      expect(key).toMatch(/^pet_[0-9A-Za-z]{38}$/);
      const shown = await npxPetstore(['keys', 'show', keyId, '--json'], env);
      expect(shown.code, shown.stderr).toBe(0);
      expect(JSON.parse(shown.stdout)).toMatchObject({ keyId, accountId: `installed-${run}`, plan: 'free', status: 'active' });
    });
  }
});
