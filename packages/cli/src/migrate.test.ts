/**
 * `petstore migrate` and the commands that never migrate, on a PostgreSQL database of this file's own (created
 * here, dropped after): against a database never migrated every command exits 1 naming `petstore migrate`, and
 * changes nothing; `migrate` creates the tables (again: applies nothing); then a role with only USAGE on the schema
 * and SELECT on the tables can list keys and show limits.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { petstore, petstoreJson, petstoreProcess } from '../test-support/petstore.js';

const postgresUrl = inject('postgresUrl');
const run = randomBytes(4).toString('hex');
const database = `petstore_cli_${run}`;
const readerRole = `petstore_reader_${run}`;
const readerPassword = `reader-${run}`;

/** `url` with another database, and optionally another user and password. */
function urlOf(base: string, options: { user?: string; password?: string } = {}): string {
  const url = new URL(base);
  url.pathname = `/${database}`;
  if (options.user !== undefined) url.username = options.user;
  if (options.password !== undefined) url.password = options.password;
  return url.toString();
}

let admin: pg.Client | undefined;
let skipReason: string | null = inject('postgresSkipReason');

beforeAll(async () => {
  if (skipReason !== null || postgresUrl === null) return;
  admin = new pg.Client({ connectionString: postgresUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.query(`CREATE ROLE ${readerRole} LOGIN PASSWORD '${readerPassword}'`);
  } catch (error) {
    // A DATABASE_URL whose role may not create databases and roles: these cases cannot run there.
    skipReason = `cannot create a database and a role on the test PostgreSQL: ${(error as Error).message}`;
  }
});

afterAll(async () => {
  if (admin === undefined) return;
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => undefined);
  await admin.query(`DROP ROLE IF EXISTS ${readerRole}`).catch(() => undefined);
  await admin.end();
});

/** The tables of the database's public schema. */
async function tables(): Promise<string[]> {
  const client = new pg.Client({ connectionString: urlOf(postgresUrl!) });
  await client.connect();
  try {
    const { rows } = await client.query<{ tablename: string }>(`SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`);
    return rows.map((row) => row.tablename);
  } finally {
    await client.end();
  }
}

describe('petstore migrate, and the commands that never migrate', () => {
  it('a database never migrated: every command exits 1 with one line naming petstore migrate, and creates nothing', async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    const env = { PETSTORE_DATABASE_URL: urlOf(postgresUrl!) };
    for (const args of [
      ['keys', 'list'],
      ['keys', 'issue', '--account', 'acme', '--plan', 'free'],
      ['keys', 'purge', '--older-than', '30d'],
      ['limits', 'show', '--account', 'acme'],
    ]) {
      const result = await petstore(args, env);
      expect({ code: result.code, stdout: result.stdout }, result.stderr).toEqual({ code: 1, stdout: '' });
      expect(result.stderr).toMatch(/^petstore: PETSTORE_DATABASE_URL: PostgreSQL at \S+ has no petstore tables: run petstore migrate first\n$/);
    }
    expect(await tables()).toEqual([]);
  });

  it('migrate creates the tables (the built command: a table of what it applied); again, it applies nothing', async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    const env = { PETSTORE_DATABASE_URL: urlOf(postgresUrl!) };
    const first = await petstoreProcess(['migrate'], env);
    expect({ code: first.code, stderr: first.stderr }).toEqual({ code: 0, stderr: '' });
    expect(first.stdout).toMatch(/^applied \d+ migration\(s\):\n/);
    expect(first.stdout).toMatch(/^petstore_api_keys +version 1 +API-key records/m);
    expect(await tables()).toEqual(expect.arrayContaining(['petstore_api_keys', 'petstore_migrations', 'petstore_rate_limits']));
    expect(await petstoreJson(['migrate'], env)).toEqual({ applied: [] });
    expect(await petstore(['migrate'], env)).toEqual({ code: 0, stdout: 'the PostgreSQL tables are up to date: nothing applied\n', stderr: '' });
    expect((await petstore(['keys', 'list'], env)).code).toBe(0);
  });

  it('a database behind this release: exit 1 naming petstore migrate, which brings it up to date', async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    const env = { PETSTORE_DATABASE_URL: urlOf(postgresUrl!) };
    const client = new pg.Client({ connectionString: env.PETSTORE_DATABASE_URL });
    await client.connect();
    // As if the release before the last migration had migrated it (each migration is idempotent).
    await client.query(`DELETE FROM petstore_migrations WHERE (table_name, version) = (SELECT table_name, version FROM petstore_migrations ORDER BY applied_at DESC, table_name LIMIT 1)`);
    await client.end();
    const behind = await petstore(['keys', 'list'], env);
    expect({ code: behind.code, stdout: behind.stdout }).toEqual({ code: 1, stdout: '' });
    expect(behind.stderr).toMatch(/lacks 1 migration\(s\) of this release: run petstore migrate first\n$/);
    expect(await petstoreJson<{ applied: unknown[] }>(['migrate'], env)).toEqual({ applied: [expect.objectContaining({ version: expect.any(Number) })] });
  });

  it('a role with USAGE on the schema and SELECT on the tables only: keys list and limits show work; keys issue is refused', async (context) => {
    if (skipReason !== null) return context.skip(skipReason);
    const owner = { PETSTORE_DATABASE_URL: urlOf(postgresUrl!) };
    const issued = await petstoreJson<{ keyId: string }>(['keys', 'issue', '--account', 'acme', '--plan', 'pro'], owner);
    const client = new pg.Client({ connectionString: owner.PETSTORE_DATABASE_URL });
    await client.connect();
    await client.query(`GRANT CONNECT ON DATABASE ${database} TO ${readerRole}`);
    await client.query(`GRANT USAGE ON SCHEMA public TO ${readerRole}`);
    await client.query(`GRANT SELECT ON ALL TABLES IN SCHEMA public TO ${readerRole}`);
    await client.end();
    const reader = { PETSTORE_DATABASE_URL: urlOf(postgresUrl!, { user: readerRole, password: readerPassword }) };
    expect(await petstoreJson(['keys', 'list'], reader)).toEqual({ keys: [expect.objectContaining({ keyId: issued.keyId, accountId: 'acme' })] });
    expect(await petstoreJson(['limits', 'show', '--account', 'acme'], reader)).toMatchObject({ owner: { accountId: 'acme' }, windows: [], bans: [] });
    expect(await petstoreJson(['limits', 'show', '--key-id', issued.keyId], reader)).toMatchObject({ owner: { accountId: 'acme', keyId: issued.keyId } });
    const refused = await petstore(['keys', 'issue', '--account', 'acme', '--plan', 'pro'], reader);
    expect({ code: refused.code, stdout: refused.stdout }).toEqual({ code: 1, stdout: '' });
    expect(refused.stderr).toMatch(/^petstore: [^\n]*permission denied[^\n]*\n$/);
    expect(refused.stderr).not.toContain(readerPassword);
  });
});
