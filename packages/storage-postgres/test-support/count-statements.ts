import type pg from 'pg';

/**
 * Counts the statements a store sends through `pool` from now on: every query run on a connection the pool hands
 * out (`pool.query`, or `query` on a client of `pool.connect()`), counted at the connection (node-postgres's
 * `'acquire'` event), with its text.
 */
export function countStatements(pool: pg.Pool): { readonly count: number; texts: string[] } {
  const texts: string[] = [];
  const counted = new WeakSet<pg.PoolClient>();
  pool.on('acquire', (client) => {
    if (counted.has(client)) return;
    counted.add(client);
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as { query: unknown }).query = (...args: unknown[]) => {
      const [first] = args;
      texts.push(typeof first === 'string' ? first : (first as { text: string }).text);
      return query(...args);
    };
  });
  return {
    texts,
    get count() {
      return texts.length;
    },
  };
}
