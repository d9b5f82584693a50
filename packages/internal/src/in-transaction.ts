/** The part of a pg `PoolClient` a transaction needs. */
export interface TransactionClient {
  query(sql: string, values?: unknown[]): Promise<unknown>;
  release(error?: Error | boolean): void;
}

/**
 * Runs `work` in one transaction on a connection from `connect` (`() => pool.connect()`): `BEGIN`, then `COMMIT`, or
 * `ROLLBACK` and the error rethrown. A connection that failed is closed rather than given back to the pool.
 */
export async function inTransaction<Client extends TransactionClient, Result>(
  connect: () => Promise<Client>,
  work: (client: Client) => Promise<Result>,
): Promise<Result> {
  const client = await connect();
  let failure: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    failure = error instanceof Error ? error : new Error(String(error));
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release(failure);
  }
}
