/**
 * A database of its own on the run's shared PostgreSQL, for a test file whose assertions count rows of the
 * examples' tables (names the servers choose, the same in every file): created empty, left for the server's stop.
 */
import { randomBytes } from 'node:crypto';

/** Creates an empty database `<label>_<random>` on the server of `serverUrl`; resolves with its URL. */
export async function newDatabase(serverUrl: string, label: string): Promise<string> {
  const { default: pg } = await import('pg');
  const name = `${label}_${randomBytes(4).toString('hex')}`;
  const client = new pg.Client({ connectionString: serverUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
