/**
 * The examples' start-up check of Redis persistence: a Redis that keeps neither RDB snapshots nor an append-only
 * file loses every rate-limit counter, ban and managed key when it restarts (a free key's minute starts over).
 */
import type { Redis } from 'ioredis';

/**
 * One warning line when Redis says it keeps no data across a restart (`CONFIG GET save` empty and `CONFIG GET
 * appendonly` `no`), else `undefined`: also when it cannot tell (CONFIG refused by an ACL, renamed away, or
 * any other failure). Never rejects.
 */
export async function redisPersistenceWarning(client: Redis, where: string): Promise<string | undefined> {
  try {
    const [save, appendonly] = await Promise.all([client.config('GET', 'save'), client.config('GET', 'appendonly')]);
    const value = (reply: unknown) => (Array.isArray(reply) ? String(reply[1] ?? '') : undefined);
    if (value(save)?.trim() !== '' || value(appendonly) !== 'no') return undefined;
    return (
      `[petstore] warning: Redis at ${where} keeps no data across a restart (no RDB snapshots: save is empty; ` +
      'no append-only file: appendonly is no), so a restart resets every rate-limit counter and ban and loses the managed keys ' +
      'kept there. Turn on appendonly yes (or RDB snapshots) as the README says.'
    );
  } catch {
    return undefined;
  }
}
