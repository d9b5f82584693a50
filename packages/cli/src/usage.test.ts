/**
 * Help and usage errors: a usage error exits 2 with one line on stderr and nothing on stdout, before any store
 * is opened (the URLs here lead nowhere: a command that tried to connect would exit 1). The built command, in a
 * process of its own, for its exit statuses and streams; the rest through `runCli`.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { petstore, petstoreProcess } from '../test-support/petstore.js';

// Port 1 on the loopback interface refuses connections: reaching it would be exit 1, not 2.
const NOWHERE = { PETSTORE_DATABASE_URL: 'postgres://127.0.0.1:1/petstore' };

describe('petstore --help and --version', () => {
  it('--help lists every command, the environment and the exit statuses; exit 0 (the built command)', async () => {
    const help = await petstoreProcess(['--help']);
    expect({ code: help.code, stderr: help.stderr }).toEqual({ code: 0, stderr: '' });
    for (const command of ['keys issue', 'keys rotate', 'keys revoke', 'keys list', 'keys show', 'keys update', 'keys purge', 'limits show', 'limits reset']) {
      expect(help.stdout).toMatch(new RegExp(`^  petstore ${command} `, 'm'));
    }
    expect(help.stdout).toContain('PETSTORE_DATABASE_URL');
    expect(help.stdout).toContain('PETSTORE_REDIS_URL');
    expect(help.stdout).toMatch(/Exit status: 0 done; 1 .*; 2 usage error/);
  });

  it("a command's --help lists its options, without opening a store", async () => {
    const help = await petstore(['keys', 'issue', '--help'], NOWHERE);
    expect({ code: help.code, stderr: help.stderr }).toEqual({ code: 0, stderr: '' });
    expect(help.stdout.split('\n')[0]).toBe(
      'petstore keys issue --account <id> --plan <plan> [--limits <perMinute>:<perDay>] [--name <text>] [--expires-in <duration>]',
    );
    for (const option of ['--account <id>', '--plan <plan>', '--limits <perMinute>:<perDay>', '--name <text>', '--expires-in <duration>', '--json', '-h, --help']) {
      expect(help.stdout).toMatch(new RegExp(`^  ${option.replace(/[[\]()]/g, '\\$&')} `, 'm'));
    }
    expect((await petstore(['limits', '--help'])).stdout).toContain('petstore limits reset (--key-id <keyId> | --account <id> | --address <ip>)');
  });

  it('--version prints the version of package.json (the built command), a released one: its CHANGELOG has it', async () => {
    const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(await petstoreProcess(['--version'])).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    // Versions come from the release process (Changesets writes each version's heading): never a placeholder.
    const changelog = readFileSync(new URL('../CHANGELOG.md', import.meta.url), 'utf8');
    expect(changelog.split('\n')).toContain(`## ${version}`);
  });

  it('a usage error of the built command: exit 2, one line on stderr, nothing on stdout', async () => {
    expect(await petstoreProcess(['keys', 'issue', '--plan', 'pro'], NOWHERE)).toEqual({
      code: 2,
      stdout: '',
      stderr: 'petstore: keys issue: --account is required\n',
    });
  });

  it('an unknown command of a group (the built command): exit 2, one line naming the group and its commands', async () => {
    expect(await petstoreProcess(['keys', 'frobnicate'], NOWHERE)).toEqual({
      code: 2,
      stdout: '',
      stderr: 'petstore: unknown keys command "frobnicate"; commands: issue, rotate, revoke, list, show, update, purge (see petstore keys --help)\n',
    });
  });

  it('a store the built command cannot reach: exit 1, one line on stderr, no stack trace', async () => {
    const result = await petstoreProcess(['keys', 'show', 'key_0000000000000000000000'], NOWHERE);
    expect({ code: result.code, stdout: result.stdout }, result.stderr).toEqual({ code: 1, stdout: '' });
    expect(result.stderr).toMatch(/^petstore: [^\n]+\n$/);
    expect(result.stderr).toContain('PETSTORE_DATABASE_URL');
  });
});

describe('a key given where its keyId belongs', () => {
  it('is refused (exit 2) without being printed', async () => {
    const key = `pet_${'A1b2C3d4E5'.repeat(3)}x9Y8z7Q6`;
    for (const args of [['keys', 'revoke', key], ['limits', 'reset', '--key-id', key]]) {
      const result = await petstore(args, NOWHERE);
      expect(result).toEqual({
        code: 2,
        stdout: '',
        stderr: `petstore: ${args.slice(0, 2).join(' ')}: that is an API key, not a keyId (key_…); find the keyId with petstore keys list\n`,
      });
    }
  });
});

describe.concurrent('usage errors: exit 2, one line on stderr, nothing on stdout, no store opened', () => {
  const cases: Array<[string[], RegExp]> = [
    [[], /^petstore: no command given; see petstore --help$/],
    [['pets'], /unknown command "pets"/],
    [['keys'], /petstore keys needs one of: issue, rotate, revoke, list, show, update/],
    [['keys', 'delete', 'key_x'], /^petstore: unknown keys command "delete"; commands: issue, rotate, revoke, list, show, update, purge \(see petstore keys --help\)$/],
    [['keys', 'issue', '--plan', 'pro'], /^petstore: keys issue: --account is required$/],
    [['keys', 'issue', '--account', 'acme'], /--plan is required/],
    [['keys', 'issue', '--account', 'acme', '--plan', 'gold'], /--plan must be one of free, pro, business, enterprise, not "gold"/],
    [['keys', 'issue', '--account', 'acme', '--plan', 'pro', '--limits', '60/1000'], /--limits must be <perMinute>:<perDay>/],
    [['keys', 'issue', '--account', 'acme', '--plan', 'pro', '--limits', '-1:5'], /--limits (must be|needs a value)/],
    [['keys', 'issue', '--account', 'acme', '--plan', 'pro', '--expires-in', 'soon'], /--expires-in must be a duration such as 90s, 30m, 12h or 30d, not "soon"/],
    [['keys', 'issue', '--account', 'acme', '--plan', 'pro', '--expires-in', '0'], /--expires-in must be longer than 0/],
    [['keys', 'issue', '--account', 'acme', '--plan', 'pro', '--expires-in', '-1d'], /--expires-in (must not be negative|needs a value)/],
    [['keys', 'issue', '--account', '--plan', 'pro'], /--account needs a value/],
    [['keys', 'issue', '--account', 'acme', '--plan', 'pro', '--colour', 'red'], /unknown option --colour/],
    [['keys', 'issue', '--account', 'acme', '--plan', 'pro', 'extra'], /unexpected argument "extra"/],
    [['keys', 'issue', '--account', 'acme', '--plan', 'pro', '--json=yes'], /--json takes no value/],
    [['keys', 'rotate'], /^petstore: keys rotate: the keyId is missing: petstore keys rotate <keyId>/],
    [['keys', 'rotate', 'key_a', 'key_b'], /unexpected argument "key_b" after the keyId/],
    [['keys', 'rotate', 'key_a', '--grace', '30'], /--grace needs a unit, e.g. 30m, 12h or 30d, not "30"/],
    [['keys', 'rotate', 'key_a', '--grace', '0.5ms'], /--grace must be a whole number of milliseconds/],
    [['keys', 'show'], /the keyId is missing/],
    [['keys', 'show', 'key_a', '--plan', 'pro'], /unknown option --plan/],
    [['keys', 'update', 'key_a'], /nothing to change/],
    [['keys', 'update', 'key_a', '--limits', '1:2', '--clear-limits'], /give --limits or --clear-limits, not both/],
    [['keys', 'update', 'key_a', '--name', 'x', '--clear-name'], /give --name or --clear-name, not both/],
    [['keys', 'list', '--limit', '0'], /--limit must be a whole number from 1 to 1000, not "0"/],
    [['keys', 'list', '--limit', '1001'], /--limit must be a whole number from 1 to 1000/],
    [['limits', 'show'], /give exactly one of --key-id, --account, --address$/m],
    [['limits', 'reset', '--account', 'acme', '--address', '203.0.113.7'], /give exactly one of --key-id, --account, --address, not --account and --address/],
    [['limits', 'show', '--address', 'example.com'], /--address must be an IPv4 or IPv6 address, not "example.com"/],
    [['limits', 'show', '--account', ''], /--account must not be empty/],
    [['limits', 'peek', '--account', 'acme'], /^petstore: unknown limits command "peek"; commands: show, reset \(see petstore limits --help\)$/],
  ];
  for (const [args, pattern] of cases) {
    it(`petstore ${args.join(' ') || '(nothing)'}`, async () => {
      const result = await petstore(args, NOWHERE);
      expect({ code: result.code, stdout: result.stdout }, result.stderr).toEqual({ code: 2, stdout: '' });
      expect(result.stderr).toMatch(/^petstore: [^\n]+\n$/);
      expect(result.stderr.trimEnd()).toMatch(pattern);
    });
  }
});
