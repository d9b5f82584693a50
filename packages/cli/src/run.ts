/** `runCli`: one command line, from its arguments to its exit status. */
import { createRateLimiter, isPetstoreError, managedApiKeys, type ApiKeyRecordStore, type ManagedApiKeys } from '@petstore/core';
import { parseCommand, type Command } from './commands.js';
import { DATABASE_URL_VARIABLE, describeError, openBackend, REDIS_URL_VARIABLE, type Backend } from './backend.js';
import { EXIT_CODES, FailedError, UsageError, type ExitCode } from './errors.js';
import { keyTable, keysTable, limitsTable, ownerText, table, time } from './output.js';
import { redactSecrets } from '@petstore/internal';

/** Where {@link runCli} reads its environment and writes its output. Default: this process's. */
export interface CliIo {
  /** The environment (`PETSTORE_DATABASE_URL`, `PETSTORE_REDIS_URL`). Default `process.env`. */
  env?: Record<string, string | undefined>;
  /** Receives what goes to stdout (tables, JSON), in pieces ending in a line break. */
  stdout?: (text: string) => void;
  /** Receives the one line of a failure (or a usage error), ending in a line break. */
  stderr?: (text: string) => void;
}

/** This package's version, for `--version` (tsup replaces it at build time; `0.0.0-dev` from the sources). */
declare const __CLI_VERSION__: string | undefined;
const VERSION = typeof __CLI_VERSION__ === 'string' ? __CLI_VERSION__ : '0.0.0-dev';

/**
 * Runs one `petstore` command line (`args` without `node` and the script, e.g. `['keys', 'show', 'key_…']`):
 * parses it, opens the store the environment names, does the command and prints its result — a table, or one
 * JSON object with `--json` — then closes every connection it opened. A failure prints one line on `stderr`
 * (never a stack trace) and nothing on `stdout`. The plaintext key is printed by `keys issue` and `keys rotate`
 * only.
 * @returns the exit status (see {@link EXIT_CODES}): 0 done; 1 no such key, a revoked key, or the store failed;
 *   2 a usage error or a missing environment variable. It never rejects.
 * @see https://github.com/petstore/petstore-categories/blob/main/packages/cli/README.md
 */
export async function runCli(args: readonly string[], io: CliIo = {}): Promise<ExitCode> {
  const env = io.env ?? process.env;
  const stdout = io.stdout ?? ((text: string) => void process.stdout.write(text));
  const stderr = io.stderr ?? ((text: string) => void process.stderr.write(text));
  try {
    const command = parseCommand(args);
    if (command.kind === 'help') {
      stdout(`${command.text}\n`);
      return EXIT_CODES.ok;
    }
    if (command.kind === 'version') {
      stdout(`${VERSION}\n`);
      return EXIT_CODES.ok;
    }
    // Everything is printed at once at the end: a failure half-way prints nothing on stdout.
    const output = await execute(command, env);
    stdout(output.endsWith('\n') ? output : `${output}\n`);
    return EXIT_CODES.ok;
  } catch (error) {
    const [code, line] = failureOf(error);
    // A driver's message may quote the URL, or a part of it: no secret of either URL is printed.
    const redacted = redactSecrets(line, [env[DATABASE_URL_VARIABLE]?.trim(), env[REDIS_URL_VARIABLE]?.trim()]);
    stderr(`petstore: ${redacted.replace(/\s*\n\s*/g, ' ')}\n`);
    return code;
  }
}

/** A keyId as a message shows it: at most 60 characters, control characters as `?`. */
function shown(keyId: string): string {
  // eslint-disable-next-line no-control-regex
  const printable = keyId.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return printable.length > 60 ? `${printable.slice(0, 60)}…` : printable;
}

/** The exit status and the line of what a command threw. */
function failureOf(error: unknown): [ExitCode, string] {
  if (error instanceof UsageError) return [EXIT_CODES.usage, error.message];
  if (error instanceof FailedError) return [EXIT_CODES.failed, error.message];
  if (isPetstoreError(error)) {
    if (error.code === 'service_unavailable') {
      const cause = error.cause === undefined ? '' : `: ${describeError(error.cause)}`;
      return [EXIT_CODES.failed, `the store is unavailable${cause}`];
    }
    return [EXIT_CODES.failed, describeError(error)];
  }
  // The key manager's checks of the values given (an account id or a name too long, say): a usage error.
  if (error instanceof TypeError || error instanceof RangeError) return [EXIT_CODES.usage, describeError(error)];
  return [EXIT_CODES.failed, `failed: ${describeError(error)}`];
}

/**
 * The record store as the commands use it: without `watch`. A command makes one change and ends; it has no cache
 * to keep fresh, so it opens no notification connection (the servers' managers are told of its change by the
 * store's mutation itself).
 */
function withoutWatch(store: ApiKeyRecordStore): ApiKeyRecordStore {
  return {
    create: (record) => store.create(record),
    findByDigest: (digest) => store.findByDigest(digest),
    findByKeyId: (keyId) => store.findByKeyId(keyId),
    list: (options) => store.list(options),
    update: (keyId, change) => store.update(keyId, change),
    ...(store.purge !== undefined ? { purge: store.purge.bind(store) } : {}),
  };
}

/** Does a parsed command against the stores; answers what to print. */
async function execute(command: Exclude<Command, { kind: 'help' | 'version' }>, env: Record<string, string | undefined>): Promise<string> {
  const limits = command.kind === 'limits show' || command.kind === 'limits reset';
  const migrate = command.kind === 'migrate';
  const needsKeys = migrate ? false : !limits || 'keyId' in command.owner;
  const backend: Backend = await openBackend(env, { keys: needsKeys, rateLimits: limits, migrate });
  let manager: ManagedApiKeys | undefined;
  try {
    if (backend.keys !== undefined) manager = managedApiKeys({ store: withoutWatch(backend.keys) });
    return await executeOn(command, backend, manager);
  } catch (error) {
    const keyId = 'keyId' in command ? command.keyId : 'owner' in command && 'keyId' in command.owner ? command.owner.keyId : undefined;
    if (keyId !== undefined && isPetstoreError(error) && error.code === 'not_found') throw new FailedError(`no key with keyId ${shown(keyId)}`, { cause: error });
    throw error;
  } finally {
    await manager?.close().catch(() => undefined);
    await backend.keys?.close?.().catch(() => undefined);
    await backend.close();
  }
}

async function executeOn(command: Exclude<Command, { kind: 'help' | 'version' }>, backend: Backend, manager: ManagedApiKeys | undefined): Promise<string> {
  const keys = () => manager as ManagedApiKeys;
  const json = (value: unknown) => JSON.stringify(value);
  switch (command.kind) {
    case 'keys issue': {
      const { key, record } = await keys().issue({
        accountId: command.accountId,
        plan: command.plan,
        ...(command.limits !== undefined ? { limits: command.limits } : {}),
        ...(command.name !== undefined ? { name: command.name } : {}),
        ...(command.expiresInMs !== undefined ? { expiresInMs: command.expiresInMs } : {}),
      });
      if (command.json) return json({ key, ...record });
      return `${keyTable(record, key)}\n\nStore the key now: it is shown only this once (only its SHA-256 digest is kept).`;
    }
    case 'keys rotate': {
      const { key, record } = await keys().rotate(command.keyId, command.graceMs !== undefined ? { graceMs: command.graceMs } : {});
      if (command.json) return json({ key, ...record });
      // Grace 0: the old key's grace ends at the rotation itself.
      const grace =
        record.previousKeyValidUntilMs === undefined || record.previousKeyValidUntilMs <= record.updatedAtMs
          ? 'The old key is refused from now on.'
          : `The old key keeps working until ${new Date(record.previousKeyValidUntilMs).toISOString()}.`;
      return `${keyTable(record, key)}\n\nStore the new key now: it is shown only this once. ${grace}`;
    }
    case 'keys revoke': {
      const record = await keys().revoke(command.keyId);
      return command.json ? json(record) : keyTable(record);
    }
    case 'keys show': {
      const record = await keys().get(command.keyId);
      if (record === undefined) throw new FailedError(`no key with keyId ${shown(command.keyId)}`);
      return command.json ? json(record) : keyTable(record);
    }
    case 'keys update': {
      const record = await keys().update(command.keyId, command.change);
      return command.json ? json(record) : keyTable(record);
    }
    case 'keys list': {
      const page = await keys().list({
        ...(command.accountId !== undefined ? { accountId: command.accountId } : {}),
        ...(command.limit !== undefined ? { limit: command.limit } : {}),
        ...(command.after !== undefined ? { after: command.after } : {}),
      });
      if (command.json) return json(page.next === undefined ? { keys: page.keys } : { keys: page.keys, next: page.next });
      const none = command.accountId === undefined ? 'no keys' : `no keys for account ${command.accountId}`;
      const lines = [page.keys.length === 0 ? (command.after === undefined ? none : 'no more keys') : keysTable(page.keys)];
      if (page.next !== undefined) {
        const account = command.accountId === undefined ? '' : ` --account ${JSON.stringify(command.accountId)}`;
        const limit = command.limit === undefined ? '' : ` --limit ${command.limit}`;
        lines.push('', `more: petstore keys list${account}${limit} --after ${page.next}`);
      }
      return lines.join('\n');
    }
    case 'migrate': {
      const applied = backend.migration?.applied;
      if (applied === undefined) {
        // Only PETSTORE_REDIS_URL is set.
        return command.json ? json({ applied: [], redis: 'no migration needed' }) : 'nothing to migrate: Redis keeps no schema';
      }
      if (command.json) return json({ applied });
      if (applied.length === 0) return 'the PostgreSQL tables are up to date: nothing applied';
      return [`applied ${applied.length} migration(s):`, table(applied.map((step) => [step.table, `version ${step.version}`, step.description]))].join('\n');
    }
    case 'keys purge': {
      if (command.dryRun) {
        const beforeMs = Date.now() - command.olderThanMs;
        let wouldRemove = 0;
        let after: string | undefined;
        do {
          const page = await keys().list({ limit: 1000, ...(after !== undefined ? { after } : {}) });
          for (const key of page.keys) {
            if ((key.revokedAtMs !== undefined && key.revokedAtMs <= beforeMs) || (key.expiresAtMs !== undefined && key.expiresAtMs <= beforeMs)) wouldRemove++;
          }
          after = page.next;
        } while (after !== undefined);
        if (command.json) return json({ dryRun: true, wouldRemove, beforeMs });
        return `dry run: would remove ${wouldRemove} key record(s) revoked or expired at or before ${time(beforeMs)}; nothing removed`;
      }
      const { removed, beforeMs } = await keys().purge({ olderThanMs: command.olderThanMs });
      if (command.json) return json({ removed, beforeMs });
      return `removed ${removed} key record(s) revoked or expired at or before ${time(beforeMs)}`;
    }
    case 'limits show':
    case 'limits reset': {
      const limiter = createRateLimiter({ store: backend.rateLimits! });
      let owner: { accountId: string; keyId?: string } | { clientAddress: string };
      if ('keyId' in command.owner) {
        const record = await keys().get(command.owner.keyId);
        if (record === undefined) throw new FailedError(`no key with keyId ${shown(command.owner.keyId)}`);
        owner = { accountId: record.accountId, keyId: record.keyId };
      } else owner = command.owner;
      const described = ownerText(owner as Parameters<typeof ownerText>[0]);
      if (command.kind === 'limits show') {
        const peek = await limiter.peek(owner);
        return command.json ? json({ owner, ...peek }) : limitsTable(described, peek);
      }
      await limiter.reset(owner);
      if (command.json) return json({ owner, reset: true });
      return 'accountId' in owner
        ? `reset: ${described}: the windows its keys share, and the bans of all its keys`
        : `reset: ${described}: its windows and its ban`;
    }
  }
}
