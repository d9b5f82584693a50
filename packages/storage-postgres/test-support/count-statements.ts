import type pg from 'pg';

/** Counts the statements a store sends through `pool` (every `pool.query` call) from now on. */
export function countStatements(pool: pg.Pool): { readonly count: number; texts: string[] } {
  const texts: string[] = [];
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as { query: unknown }).query = (...args: unknown[]) => {
    const [first] = args;
    texts.push(typeof first === 'string' ? first : (first as { text: string }).text);
    return query(...args);
  };
  return {
    texts,
    get count() {
      return texts.length;
    },
  };
}
