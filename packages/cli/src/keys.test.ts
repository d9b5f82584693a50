/**
 * `petstore keys …` (through `runCli`, what the built command runs; usage.test.ts runs the built command itself),
 * on PostgreSQL and on Redis: exit statuses,
 * the --json objects, the tables, not-found and revoked keys, the key printed by issue and rotate only, and
 * nothing written by a command that fails.
 */
import { randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { petstore, petstoreJson, petstoreProcess, redisWithoutRecord } from '../test-support/petstore.js';

const postgresUrl = inject('postgresUrl');
const redisUrl = inject('redisUrl');
const run = randomBytes(4).toString('hex'); // this run's account ids, apart from earlier runs' in a shared server

const KEY_PATTERN = /^pet_[0-9A-Za-z]{38}$/;
const KEY_ID_PATTERN = /^key_[0-9A-Za-z]{22}$/;
const HOUR_MS = 3_600_000;

// The commands never change the schema: the test database's tables come from `petstore migrate`, as an operator's.
beforeAll(async () => {
  if (postgresUrl === null) return;
  const migrated = await petstore(['migrate'], { PETSTORE_DATABASE_URL: postgresUrl });
  expect(migrated, migrated.stderr).toMatchObject({ code: 0, stderr: '' });
});

interface KeyJson {
  keyId: string;
  accountId: string;
  plan: string;
  limits?: { requestsPerMinute: number; requestsPerDay: number };
  name?: string;
  status: 'active' | 'expired' | 'revoked';
  createdAtMs: number;
  updatedAtMs: number;
  expiresAtMs?: number;
  revokedAtMs?: number;
  previousKeyValidUntilMs?: number;
}
type IssuedJson = KeyJson & { key: string };

/** A failure as the command must report it: the status, one line on stderr, nothing on stdout. */
function expectOneLineFailure(result: { code: number | null; stdout: string; stderr: string }, code: 1 | 2, pattern: RegExp): void {
  expect({ code: result.code, stdout: result.stdout }, result.stderr).toEqual({ code, stdout: '' });
  expect(result.stderr).toMatch(/^petstore: [^\n]+\n$/);
  expect(result.stderr).toMatch(pattern);
  expect(result.stderr).not.toMatch(/\n\s+at /); // no stack trace
}

const backends: Array<{ backend: string; env: Record<string, string>; skipReason: string | null }> = [
  { backend: 'PostgreSQL', env: { PETSTORE_DATABASE_URL: postgresUrl ?? '' }, skipReason: inject('postgresSkipReason') },
  { backend: 'Redis', env: { PETSTORE_REDIS_URL: redisUrl ?? '' }, skipReason: inject('redisSkipReason') },
];

describe.each(backends)('petstore keys on $backend', ({ backend, env, skipReason }) => {
  const account = (label: string) => `${label}-${backend}-${run}`;

  it('issue --json prints one object with the key and its record; show finds it, never printing the key', async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    const issued = await petstoreJson<IssuedJson>(['keys', 'issue', '--account', account('acme'), '--plan', 'pro', '--name', 'Acme "mobile" app ✓'], env);
    expect(issued).toEqual({
      key: expect.stringMatching(KEY_PATTERN),
      keyId: expect.stringMatching(KEY_ID_PATTERN),
      accountId: account('acme'),
      plan: 'pro',
      name: 'Acme "mobile" app ✓',
      status: 'active',
      createdAtMs: expect.any(Number),
      updatedAtMs: issued.createdAtMs,
    });
    const shown = await petstore(['keys', 'show', issued.keyId, '--json'], env);
    expect(shown.code).toBe(0);
    const { key, ...record } = issued;
    expect(JSON.parse(shown.stdout)).toEqual(record);
    expect(shown.stdout).not.toContain(key);

    const table = await petstore(['keys', 'show', issued.keyId], env);
    expect({ code: table.code, stderr: table.stderr }).toEqual({ code: 0, stderr: '' });
    expect(table.stdout).not.toContain(key);
    expect(table.stdout.split('\n')).toEqual(
      expect.arrayContaining([
        `keyId    ${issued.keyId}`,
        `account  ${account('acme')}`,
        'plan     pro',
        "limits   the pro plan's",
        'name     Acme "mobile" app ✓',
        'status   active',
        `created  ${new Date(issued.createdAtMs).toISOString()}`,
        'expires  never',
      ]),
    );
  });

  it('issue prints a table with the key, once, and a warning to store it', async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    const result = await petstore(['keys', 'issue', '--account', account('table'), '--plan', 'enterprise', '--limits', '600:50000', '--expires-in', '30d'], env);
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: '' });
    const key = /^key +(pet_\S+)$/m.exec(result.stdout)?.[1];
    expect(key).toMatch(KEY_PATTERN);
    expect(result.stdout.split(key as string)).toHaveLength(2); // printed once
    expect(result.stdout).toMatch(/^limits +600\/min, 50000\/day$/m);
    expect(result.stdout).toContain('Store the key now: it is shown only this once');
    const keyId = /^keyId +(\S+)$/m.exec(result.stdout)?.[1] as string;
    const shown = await petstoreJson<KeyJson>(['keys', 'show', keyId], env);
    expect(shown.expiresAtMs! - shown.createdAtMs).toBe(30 * 24 * HOUR_MS);
  });

  it('update changes plan, limits and name, and clears them', async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    const { keyId, key } = await petstoreJson<IssuedJson>(['keys', 'issue', '--account', account('update'), '--plan', 'free', '--name', 'before'], env);
    const updated = await petstore(['keys', 'update', keyId, '--plan', 'business', '--limits', '10:100', '--name', 'after', '--json'], env);
    expect(updated.code).toBe(0);
    expect(updated.stdout).not.toContain(key);
    expect(JSON.parse(updated.stdout)).toMatchObject({ keyId, plan: 'business', limits: { requestsPerMinute: 10, requestsPerDay: 100 }, name: 'after' });
    const cleared = await petstoreJson<KeyJson>(['keys', 'update', keyId, '--clear-limits', '--clear-name'], env);
    expect(cleared).toMatchObject({ keyId, plan: 'business', status: 'active' });
    expect(cleared).not.toHaveProperty('limits');
    expect(cleared).not.toHaveProperty('name');
    expect(await petstoreJson<KeyJson>(['keys', 'show', keyId], env)).toEqual(cleared);
  });

  it('rotate prints a new key for the same record, the old one valid for the grace period', async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    const issued = await petstoreJson<IssuedJson>(['keys', 'issue', '--account', account('rotate'), '--plan', 'pro'], env);
    const rotated = await petstoreJson<IssuedJson>(['keys', 'rotate', issued.keyId, '--grace', '1h'], env);
    expect(rotated).toMatchObject({ keyId: issued.keyId, accountId: account('rotate'), plan: 'pro', status: 'active' });
    expect(rotated.key).toMatch(KEY_PATTERN);
    expect(rotated.key).not.toBe(issued.key);
    expect(rotated.previousKeyValidUntilMs! - rotated.updatedAtMs).toBe(HOUR_MS);

    const table = await petstore(['keys', 'rotate', issued.keyId, '--grace', '0'], env);
    expect({ code: table.code, stderr: table.stderr }).toEqual({ code: 0, stderr: '' });
    expect(table.stdout).toMatch(/^key +pet_[0-9A-Za-z]{38}$/m);
    expect(table.stdout).toContain('The old key is refused from now on.');
    expect(table.stdout).not.toContain(rotated.key);
    expect(table.stdout).not.toContain(issued.key);
  });

  it('revoke: 401 from now on; a second revoke keeps the first time; rotate and update of it exit 1', async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    const { keyId, key } = await petstoreJson<IssuedJson>(['keys', 'issue', '--account', account('revoke'), '--plan', 'pro'], env);
    const revoked = await petstore(['keys', 'revoke', keyId, '--json'], env);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).not.toContain(key);
    const record = JSON.parse(revoked.stdout) as KeyJson;
    expect(record).toMatchObject({ keyId, status: 'revoked', revokedAtMs: expect.any(Number) });
    expect(await petstoreJson<KeyJson>(['keys', 'revoke', keyId], env)).toMatchObject({ status: 'revoked', revokedAtMs: record.revokedAtMs });
    expectOneLineFailure(await petstore(['keys', 'rotate', keyId], env), 1, new RegExp(`${keyId}.*revoked|revoked.*${keyId}`));
    expectOneLineFailure(await petstore(['keys', 'update', keyId, '--plan', 'free'], env), 1, /revoked/);
    expect(await petstoreJson<KeyJson>(['keys', 'show', keyId], env)).toEqual(record);
    const table = await petstore(['keys', 'show', keyId], env);
    expect(table.stdout).toMatch(new RegExp(`^revoked +${new Date(record.revokedAtMs!).toISOString()}$`, 'm'));
  });

  it('a keyId that names no key: exit 1, one line, for show, update, rotate, revoke and limits', async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    const missing = `key_${'0'.repeat(22)}`;
    for (const args of [
      ['keys', 'show', missing],
      ['keys', 'update', missing, '--plan', 'pro'],
      ['keys', 'rotate', missing, '--json'],
      ['keys', 'revoke', missing],
      ['limits', 'show', '--key-id', missing],
      ['limits', 'reset', '--key-id', missing, '--json'],
    ]) {
      expectOneLineFailure(await petstore(args, env), 1, new RegExp(`^petstore: no key with keyId ${missing}\n$`));
    }
  });

  it("list: an account's keys in keyId order, page by page, as JSON and as a table; never a key", async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    const owner = account('list');
    const issued = [];
    for (let i = 0; i < 3; i++) issued.push(await petstoreJson<IssuedJson>(['keys', 'issue', '--account', owner, '--plan', 'free', '--name', `app ${i}`], env));
    const keyIds = issued.map((entry) => entry.keyId).sort();
    const all = await petstore(['keys', 'list', '--account', owner, '--json'], env);
    expect(all.code).toBe(0);
    expect((JSON.parse(all.stdout) as { keys: KeyJson[]; next?: string })).toEqual({ keys: keyIds.map((keyId) => expect.objectContaining({ keyId, accountId: owner })) });
    for (const { key } of issued) expect(all.stdout).not.toContain(key);

    const first = await petstoreJson<{ keys: KeyJson[]; next?: string }>(['keys', 'list', '--account', owner, '--limit', '2'], env);
    expect(first.keys.map((entry) => entry.keyId)).toEqual(keyIds.slice(0, 2));
    expect(first.next).toBe(keyIds[1]);
    const second = await petstoreJson<{ keys: KeyJson[]; next?: string }>(['keys', 'list', '--account', owner, '--limit', '2', '--after', first.next!], env);
    expect(second).toEqual({ keys: [expect.objectContaining({ keyId: keyIds[2] })] });

    const table = await petstore(['keys', 'list', '--account', owner, '--limit', '2'], env);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^KEY ID +ACCOUNT +PLAN +LIMITS +STATUS +CREATED +EXPIRES +NAME$/);
    expect(lines.slice(1, 3).map((line) => line.split(/ +/)[0])).toEqual(keyIds.slice(0, 2));
    expect(lines.at(-1)).toBe(`more: petstore keys list --account "${owner}" --limit 2 --after ${keyIds[1]}`);
    for (const { key } of issued) expect(table.stdout).not.toContain(key);

    const none = await petstore(['keys', 'list', '--account', account('nobody')], env);
    expect({ code: none.code, stdout: none.stdout }).toEqual({ code: 0, stdout: `no keys for account ${account('nobody')}\n` });
  });

  it('a command that fails writes nothing: invalid limits or name leave no record', async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    const owner = account('nothing');
    expectOneLineFailure(await petstore(['keys', 'issue', '--account', owner, '--plan', 'pro', '--limits', '100'], env), 2, /--limits must be <perMinute>:<perDay>/);
    // Checked by the key manager, after the store was opened.
    expectOneLineFailure(await petstore(['keys', 'issue', '--account', owner, '--plan', 'pro', '--name', 'x'.repeat(201)], env), 2, /name/);
    expect(await petstoreJson(['keys', 'list', '--account', owner], env)).toEqual({ keys: [] });

    const { keyId } = await petstoreJson<IssuedJson>(['keys', 'issue', '--account', owner, '--plan', 'pro', '--name', 'kept'], env);
    const before = await petstoreJson<KeyJson>(['keys', 'show', keyId], env);
    expectOneLineFailure(await petstore(['keys', 'update', keyId, '--plan', 'pro', '--name', 'y'.repeat(201)], env), 2, /name/);
    expectOneLineFailure(await petstore(['keys', 'update', keyId, '--plan', 'platinum'], env), 2, /--plan must be one of free, pro, business, enterprise/);
    expect(await petstoreJson<KeyJson>(['keys', 'show', keyId], env)).toEqual(before);
  });
});

describe('both variables set, as the example servers read them', () => {
  it('keeps the keys in PostgreSQL', async (context) => {
    const skipReason = inject('postgresSkipReason') ?? inject('redisSkipReason');
    if (skipReason !== null) return context.skip(skipReason);
    // Without a servers' record (servers of the previous release): the command follows the variables.
    const both = { PETSTORE_DATABASE_URL: postgresUrl!, PETSTORE_REDIS_URL: redisWithoutRecord(redisUrl!) };
    const { keyId } = await petstoreJson<IssuedJson>(['keys', 'issue', '--account', `both-${run}`, '--plan', 'pro'], both);
    expect(await petstoreJson(['keys', 'show', keyId], { PETSTORE_DATABASE_URL: postgresUrl! })).toMatchObject({ keyId });
    expectOneLineFailure(await petstore(['keys', 'show', keyId], { PETSTORE_REDIS_URL: both.PETSTORE_REDIS_URL }), 1, /no key with keyId/);
  });
});

describe('petstore without a reachable store', () => {
  it('exits 2 with one line naming the variables when neither is set', async () => {
    expectOneLineFailure(await petstore(['keys', 'list']), 2, /set PETSTORE_DATABASE_URL .* or PETSTORE_REDIS_URL/);
  });

  it('exits 1 with one line naming the variable and the URL without its password when the server refuses', async () => {
    // Port 1 on the loopback interface: nothing listens there, the connection is refused at once.
    const postgres = await petstore(['keys', 'list'], { PETSTORE_DATABASE_URL: 'postgres://app:s3cret@127.0.0.1:1/petstore' });
    expectOneLineFailure(postgres, 1, /^petstore: PETSTORE_DATABASE_URL: PostgreSQL at postgres:\/\/app:\*\*\*@127\.0\.0\.1:1\/petstore failed: .*ECONNREFUSED/);
    expect(postgres.stderr).not.toContain('s3cret');
    const redis = await petstore(['keys', 'list'], { PETSTORE_REDIS_URL: 'redis://:s3cret@127.0.0.1:1' });
    expectOneLineFailure(redis, 1, /^petstore: PETSTORE_REDIS_URL: Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:1 failed: .*ECONNREFUSED/);
    expect(redis.stderr).not.toContain('s3cret');
  });

  it('prints no password given as ?password= or holding an unescaped @, in a process of its own too', async () => {
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ PETSTORE_DATABASE_URL: 'postgres://app@127.0.0.1:1/petstore?password=s3cret&sslmode=disable' }, /PostgreSQL at postgres:\/\/app@127\.0\.0\.1:1\/petstore\?password=\*\*\*&sslmode=disable failed/],
      [{ PETSTORE_DATABASE_URL: 'postgres://app:s3c@ret@127.0.0.1:1/petstore' }, /PostgreSQL at postgres:\/\/app:\*\*\*@127\.0\.0\.1:1\/petstore failed/],
      [{ PETSTORE_REDIS_URL: 'redis://127.0.0.1:1?password=s3cret' }, /Redis at redis:\/\/127\.0\.0\.1:1\?password=\*\*\* failed/],
      [{ PETSTORE_REDIS_URL: 'redis://:s3c@ret@127.0.0.1:1' }, /Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:1 failed/],
    ];
    for (const [env, pattern] of cases) {
      const result = await petstore(['keys', 'list'], env);
      expectOneLineFailure(result, 1, pattern);
      expect(result.stderr).not.toMatch(/s3c/);
    }
    // The built command, as an operator runs it: each form once.
    for (const [env, pattern] of [cases[0], cases[3]] as Array<[Record<string, string>, RegExp]>) {
      const result = await petstoreProcess(['limits', 'show', '--account', 'acme'], env);
      expectOneLineFailure(result, 1, pattern);
      expect(result.stderr + result.stdout).not.toMatch(/s3c/);
    }
  });
});
