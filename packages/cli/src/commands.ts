/**
 * The commands of `petstore`: their words, options and help, as data. {@link parseCommand} turns the argument
 * list into one of them (or a usage error); nothing here touches a store.
 */
import { parseArgs } from 'node:util';
import { isIP } from 'node:net';
import { PLAN_NAMES, isPlanName, type PlanLimits, type PlanName } from '@petstore/core';
import ms from 'ms';
import { UsageError } from './errors.js';

interface OptionSpec {
  type: 'string' | 'boolean';
  /** `<value>` in the help. */
  value?: string;
  help: string;
}

interface CommandSpec {
  /** `keys issue`, or one word (`migrate`) */
  words: readonly [string, string] | readonly [string];
  /** `<keyId>` when the command takes one; else none. */
  positional?: string;
  summary: string;
  /** The usage line after `petstore <words>`. */
  usage: string;
  options: Record<string, OptionSpec>;
}

const JSON_OPTION: OptionSpec = { type: 'boolean', help: 'print one JSON object on stdout instead of a table' };
const LIMITS_HELP = 'custom limits of this key, in requests (units) per minute and per day, e.g. 600:50000';
const OWNER_OPTIONS: Record<string, OptionSpec> = {
  'key-id': { type: 'string', value: 'keyId', help: "a managed key: its account's windows (shared by all its keys) and this key's ban" },
  account: { type: 'string', value: 'id', help: "an account: its windows and the bans of all its keys" },
  address: { type: 'string', value: 'ip', help: 'a caller without a valid key, by client address (IPv6 grouped by /64, as requests are)' },
};

/** Every command, in the order the help lists them. */
export const COMMANDS: readonly CommandSpec[] = [
  {
    words: ['keys', 'issue'],
    summary: 'Issue a new key for an account. The key is printed this once; only its SHA-256 digest is stored.',
    usage: '--account <id> --plan <plan> [--limits <perMinute>:<perDay>] [--name <text>] [--expires-in <duration>]',
    options: {
      account: { type: 'string', value: 'id', help: 'the account the key belongs to (1-200 characters); its keys share one quota' },
      plan: { type: 'string', value: 'plan', help: `the account's plan: ${PLAN_NAMES.join(', ')}` },
      limits: { type: 'string', value: 'perMinute>:<perDay', help: LIMITS_HELP },
      name: { type: 'string', value: 'text', help: "a label for operators (1-200 characters), e.g. the customer's app" },
      'expires-in': { type: 'string', value: 'duration', help: 'refuse the key (401) after this long, e.g. 90d; default: never' },
    },
  },
  {
    words: ['keys', 'rotate'],
    positional: 'keyId',
    summary:
      'Give a key a new secret, keeping its keyId, account, plan and limits. The new key is printed this once; the old one keeps working for the grace period, then gets 401.',
    usage: '<keyId> [--grace <duration>]',
    options: {
      grace: { type: 'string', value: 'duration', help: "how long the old key keeps working, e.g. 1h; 0: refused at once; default: the library's (24h)" },
    },
  },
  {
    words: ['keys', 'revoke'],
    positional: 'keyId',
    summary: 'Revoke a key (and the key it replaced, if still in its grace period): 401 from now on, on every instance. Revoking twice keeps the first time.',
    usage: '<keyId>',
    options: {},
  },
  {
    words: ['keys', 'list'],
    summary: 'List keys (never the keys themselves), in keyId order, one page at a time.',
    usage: '[--account <id>] [--limit <count>] [--after <keyId>]',
    options: {
      account: { type: 'string', value: 'id', help: "only this account's keys" },
      limit: { type: 'string', value: 'count', help: 'at most this many (1-1000; default 100)' },
      after: { type: 'string', value: 'keyId', help: 'the page after this keyId (the "next" of the page before)' },
    },
  },
  {
    words: ['keys', 'show'],
    positional: 'keyId',
    summary: 'Show one key: account, plan, limits, name, status, times (never the key itself).',
    usage: '<keyId>',
    options: {},
  },
  {
    words: ['keys', 'update'],
    positional: 'keyId',
    summary: 'Change the plan, limits or name of a key; every instance obeys within a second.',
    usage: '<keyId> [--plan <plan>] [--limits <perMinute>:<perDay> | --clear-limits] [--name <text> | --clear-name]',
    options: {
      plan: { type: 'string', value: 'plan', help: `the new plan: ${PLAN_NAMES.join(', ')}` },
      limits: { type: 'string', value: 'perMinute>:<perDay', help: LIMITS_HELP },
      'clear-limits': { type: 'boolean', help: "drop the key's custom limits: its plan's apply" },
      name: { type: 'string', value: 'text', help: 'the new label (1-200 characters)' },
      'clear-name': { type: 'boolean', help: 'drop the label' },
    },
  },
  {
    words: ['keys', 'purge'],
    summary:
      'Remove the records of keys revoked or expired longer ago than --older-than: they no longer count towards a store\'s bound nor show in keys list; their keys stay refused (401). Every instance forgets them.',
    usage: '--older-than <duration> [--dry-run]',
    options: {
      'older-than': { type: 'string', value: 'duration', help: 'the retention: remove keys revoked or expired at least this long ago, e.g. 30d; 0: all of them' },
      'dry-run': { type: 'boolean', help: 'count the records that would be removed; remove nothing' },
    },
  },
  {
    words: ['limits', 'show'],
    summary: "Show a caller's rate-limit windows (units used and remaining, reset times) and bans, charging nothing.",
    usage: '(--key-id <keyId> | --account <id> | --address <ip>)',
    options: OWNER_OPTIONS,
  },
  {
    words: ['limits', 'reset'],
    summary:
      "Clear a caller's windows and bans: full quotas again, bans lifted. For a key or an account: the account's windows (shared by all its keys) and the bans of all its keys.",
    usage: '(--key-id <keyId> | --account <id> | --address <ip>)',
    options: OWNER_OPTIONS,
  },
  {
    words: ['migrate'],
    summary:
      'Create the PostgreSQL tables, or bring them up to date for this release (the example servers do it at start-up too). Needs a role that may create tables; no other command changes the schema, and each refuses a database that needs this. Redis needs no migration.',
    usage: '',
    options: {},
  },
];

/** Whose rate limits `limits show|reset` read or clear. */
export type LimitsOwner = { keyId: string } | { accountId: string } | { clientAddress: string };

/** The shape of a managed key of any prefix (`pet_` and 38 base62 characters): never echoed. */
const MANAGED_KEY_SHAPE = /^[a-z][a-z0-9]{0,15}_[0-9A-Za-z]{38}$/;

/** A command line, understood. */
export type Command =
  | { kind: 'help'; text: string }
  | { kind: 'version' }
  | { kind: 'keys issue'; json: boolean; accountId: string; plan: PlanName; limits?: PlanLimits; name?: string; expiresInMs?: number }
  | { kind: 'keys rotate'; json: boolean; keyId: string; graceMs?: number }
  | { kind: 'keys revoke'; json: boolean; keyId: string }
  | { kind: 'keys list'; json: boolean; accountId?: string; limit?: number; after?: string }
  | { kind: 'keys show'; json: boolean; keyId: string }
  | {
      kind: 'keys update';
      json: boolean;
      keyId: string;
      change: { plan?: PlanName; limits?: PlanLimits | null; name?: string | null };
    }
  | { kind: 'keys purge'; json: boolean; olderThanMs: number; dryRun: boolean }
  | { kind: 'limits show' | 'limits reset'; json: boolean; owner: LimitsOwner }
  | { kind: 'migrate'; json: boolean };

/** What `petstore --help` prints. */
export function mainHelp(): string {
  const width = Math.max(...COMMANDS.map((command) => command.words.join(' ').length));
  return [
    'petstore: the managed API keys and rate limits of the petstore API, in its PostgreSQL or Redis',
    '',
    'Usage:',
    ...COMMANDS.map((command) => `  petstore ${command.words.join(' ').padEnd(width)} ${command.usage}`.trimEnd()),
    '',
    'Every command takes --json (one JSON object on stdout instead of a table) and --help (its own help).',
    `Plans: ${PLAN_NAMES.join(', ')}. Durations: a number and a unit, e.g. 90s, 30m, 12h, 30d (or 0).`,
    '',
    ...ENVIRONMENT_HELP,
    '',
    ...EXIT_HELP,
  ].join('\n');
}

const ENVIRONMENT_HELP = [
  'Environment (as the example servers read it):',
  '  PETSTORE_DATABASE_URL  PostgreSQL, e.g. postgres://user:pass@127.0.0.1:5432/petstore: the keys live there',
  '                         (in the tables petstore migrate creates), and the rate limits unless',
  '                         PETSTORE_REDIS_URL is set too',
  '  PETSTORE_REDIS_URL     Redis, e.g. redis://127.0.0.1:6379: the rate limits live there, and the keys too',
  '                         unless PETSTORE_DATABASE_URL is set',
];

const EXIT_HELP = [
  'Exit status: 0 done; 1 not done: no such key, a revoked key, or the store failed; 2 usage error or missing',
  'environment. PostgreSQL tables missing or behind this release: 1, naming petstore migrate. A failure prints',
  'one line on stderr and nothing on stdout.',
];

/** What `petstore <words> --help` prints. */
export function commandHelp(command: CommandSpec): string {
  const options: Array<[string, string]> = Object.entries(command.options).map(([name, spec]) => [
    `--${name}${spec.value !== undefined ? ` <${spec.value}>` : ''}`,
    spec.help,
  ]);
  options.push(['--json', JSON_OPTION.help], ['-h, --help', 'show this help']);
  const width = Math.max(...options.map(([flag]) => flag.length));
  return [
    `petstore ${command.words.join(' ')} ${command.usage}`.trimEnd(),
    '',
    command.summary,
    '',
    'Options:',
    ...options.map(([flag, help]) => `  ${flag.padEnd(width)}  ${help}`),
    '',
    ...ENVIRONMENT_HELP,
    '',
    ...EXIT_HELP,
  ].join('\n');
}

/** The help of a group (`petstore keys --help`): its commands' usage lines. */
function groupHelp(group: string): string {
  const commands = COMMANDS.filter((command) => command.words[0] === group);
  return [
    'Usage:',
    ...commands.map((command) => `  petstore ${command.words.join(' ')} ${command.usage}`),
    '',
    `petstore ${group} <command> --help shows one command's options; petstore --help shows everything.`,
  ].join('\n');
}

const GROUPS = [...new Set(COMMANDS.map((command) => command.words[0]))];

/**
 * Understands a command line (without `node` and the script).
 * @throws UsageError with the one line to print, when it is not a command of {@link COMMANDS} with valid
 *   options and values
 */
export function parseCommand(args: readonly string[]): Command {
  const [group, action] = args;
  if (group === undefined) throw new UsageError('no command given; see petstore --help');
  if (group === '--help' || group === '-h' || group === 'help') return { kind: 'help', text: mainHelp() };
  if (group === '--version' || group === '-v') return { kind: 'version' };
  if (!GROUPS.includes(group)) throw new UsageError(`unknown command "${group}"; the commands are ${GROUPS.join(', ')} (see petstore --help)`);
  const single = COMMANDS.find((command) => command.words.length === 1 && command.words[0] === group);
  if (single !== undefined) return parseOptions(single, args.slice(1));
  const actions = COMMANDS.filter((command) => command.words[0] === group).map((command) => command.words[1]);
  if (action === '--help' || action === '-h') return { kind: 'help', text: groupHelp(group) };
  if (action === undefined) throw new UsageError(`petstore ${group} needs one of: ${actions.join(', ')} (see petstore ${group} --help)`);
  const spec = COMMANDS.find((command) => command.words[0] === group && command.words[1] === action);
  // As git and npm say it: the group, the word, and what the group takes.
  if (spec === undefined) throw new UsageError(`unknown ${group} command "${action}"; commands: ${actions.join(', ')} (see petstore ${group} --help)`);
  return parseOptions(spec, args.slice(2));
}

/** The options and positional of `spec`'s command line (`args`: what follows its words). */
function parseOptions(spec: CommandSpec, args: readonly string[]): Command {
  // Messages begin with the command's words (after the `petstore:` of every failure line); hints give it whole.
  const name = spec.words.join(' ');

  let values: Record<string, string | boolean | undefined>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({
      args: args as string[],
      options: {
        ...Object.fromEntries(Object.entries(spec.options).map(([option, { type }]) => [option, { type }])),
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      allowPositionals: true,
      strict: true,
    }));
  } catch (error) {
    throw new UsageError(`${name}: ${describeParseError(error)} (see petstore ${name} --help)`);
  }
  if (values['help'] === true) return { kind: 'help', text: commandHelp(spec) };
  const expected = spec.positional === undefined ? 0 : 1;
  if (positionals.length > expected) {
    throw new UsageError(`${name}: unexpected argument "${positionals[expected]}"${expected === 0 ? '' : ` after the ${spec.positional}`} (see petstore ${name} --help)`);
  }
  if (positionals.length < expected) throw new UsageError(`${name}: the ${spec.positional} is missing: petstore ${name} ${spec.usage}`);
  const json = values['json'] === true;
  const text = (option: string) => values[option] as string | undefined;
  const keyId = positionals[0] as string;
  for (const given of [keyId, text('key-id'), text('after')]) {
    // A secret pasted where its keyId belongs: refused without echoing it (the line may end up in a log).
    if (given !== undefined && MANAGED_KEY_SHAPE.test(given)) {
      throw new UsageError(`${name}: that is an API key, not a keyId (key_…); find the keyId with petstore keys list`);
    }
  }

  switch (name) {
    case 'keys issue': {
      const accountId = required(name, 'account', text('account'));
      const plan = planOf(name, required(name, 'plan', text('plan')));
      const limits = text('limits') === undefined ? undefined : limitsOf(name, text('limits') as string);
      const expiresInMs = text('expires-in') === undefined ? undefined : durationOf(name, 'expires-in', text('expires-in') as string, { allowZero: false });
      return {
        kind: 'keys issue',
        json,
        accountId,
        plan,
        ...(limits !== undefined ? { limits } : {}),
        ...(text('name') !== undefined ? { name: text('name') as string } : {}),
        ...(expiresInMs !== undefined ? { expiresInMs } : {}),
      };
    }
    case 'keys rotate': {
      const graceMs = text('grace') === undefined ? undefined : durationOf(name, 'grace', text('grace') as string, { allowZero: true });
      return { kind: 'keys rotate', json, keyId, ...(graceMs !== undefined ? { graceMs } : {}) };
    }
    case 'keys revoke':
      return { kind: 'keys revoke', json, keyId };
    case 'keys show':
      return { kind: 'keys show', json, keyId };
    case 'keys list': {
      const limitText = text('limit');
      let limit: number | undefined;
      if (limitText !== undefined) {
        limit = /^\d+$/.test(limitText) ? Number(limitText) : Number.NaN;
        if (!(limit >= 1 && limit <= 1000)) throw new UsageError(`${name}: --limit must be a whole number from 1 to 1000, not "${limitText}"`);
      }
      return {
        kind: 'keys list',
        json,
        ...(text('account') !== undefined ? { accountId: text('account') as string } : {}),
        ...(limit !== undefined ? { limit } : {}),
        ...(text('after') !== undefined ? { after: text('after') as string } : {}),
      };
    }
    case 'migrate':
      return { kind: 'migrate', json };
    case 'keys purge': {
      const olderThanMs = durationOf(name, 'older-than', required(name, 'older-than', text('older-than')), { allowZero: true });
      return { kind: 'keys purge', json, olderThanMs, dryRun: values['dry-run'] === true };
    }
    case 'keys update': {
      if (text('limits') !== undefined && values['clear-limits'] === true) throw new UsageError(`${name}: give --limits or --clear-limits, not both`);
      if (text('name') !== undefined && values['clear-name'] === true) throw new UsageError(`${name}: give --name or --clear-name, not both`);
      const change: Extract<Command, { kind: 'keys update' }>['change'] = {};
      if (text('plan') !== undefined) change.plan = planOf(name, text('plan') as string);
      if (text('limits') !== undefined) change.limits = limitsOf(name, text('limits') as string);
      if (values['clear-limits'] === true) change.limits = null;
      if (text('name') !== undefined) change.name = text('name') as string;
      if (values['clear-name'] === true) change.name = null;
      if (Object.keys(change).length === 0) {
        throw new UsageError(`${name}: nothing to change; give --plan, --limits, --clear-limits, --name or --clear-name`);
      }
      return { kind: 'keys update', json, keyId, change };
    }
    default: {
      const given = (['key-id', 'account', 'address'] as const).filter((option) => text(option) !== undefined);
      if (given.length !== 1) {
        throw new UsageError(`${name}: give exactly one of --key-id, --account, --address${given.length > 1 ? `, not ${given.map((option) => `--${option}`).join(' and ')}` : ''}`);
      }
      const value = text(given[0] as string) as string;
      if (value === '') throw new UsageError(`${name}: --${given[0]} must not be empty`);
      let owner: LimitsOwner;
      if (given[0] === 'key-id') owner = { keyId: value };
      else if (given[0] === 'account') owner = { accountId: value };
      else {
        if (isIP(value) === 0) throw new UsageError(`${name}: --address must be an IPv4 or IPv6 address, not "${value}"`);
        owner = { clientAddress: value };
      }
      return { kind: spec.words[1] === 'show' ? 'limits show' : 'limits reset', json, owner };
    }
  }
}

/** One line for an error of `parseArgs`. */
function describeParseError(error: unknown): string {
  const code = (error as { code?: unknown }).code;
  const message = error instanceof Error ? error.message : String(error);
  const option = /'(-{1,2}[^' ]+)/.exec(message)?.[1];
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return `unknown option ${option ?? message}`;
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    if (/does not take an argument/.test(message)) return `${option} takes no value`;
    return `${option} needs a value`;
  }
  return message.split('\n')[0] as string;
}

function required(name: string, option: string, value: string | undefined): string {
  if (value === undefined) throw new UsageError(`${name}: --${option} is required`);
  return value;
}

function planOf(name: string, text: string): PlanName {
  if (!isPlanName(text)) throw new UsageError(`${name}: --plan must be one of ${PLAN_NAMES.join(', ')}, not "${text}"`);
  return text;
}

/** `<perMinute>:<perDay>`, whole numbers ≥ 0. */
function limitsOf(name: string, text: string): PlanLimits {
  const match = /^(\d{1,15}):(\d{1,15})$/.exec(text.trim());
  if (match === null) throw new UsageError(`${name}: --limits must be <perMinute>:<perDay>, whole numbers, e.g. 600:50000, not "${text}"`);
  return { requestsPerMinute: Number(match[1]), requestsPerDay: Number(match[2]) };
}

/**
 * A duration (`90s`, `30m`, `12h`, `30d`, `1.5h`; what the `ms` package reads) in whole milliseconds. A number
 * without a unit is refused (`--grace 30` is more likely meant as minutes than milliseconds), except `0`.
 */
function durationOf(name: string, option: string, text: string, { allowZero }: { allowZero: boolean }): number {
  const trimmed = text.trim();
  const refuse = (why: string) => new UsageError(`${name}: --${option} ${why}, not "${text}"`);
  if (trimmed === '0') {
    if (allowZero) return 0;
    throw refuse('must be longer than 0');
  }
  if (/^[\d.]+$/.test(trimmed)) throw refuse('needs a unit, e.g. 30m, 12h or 30d');
  const value = trimmed === '' ? undefined : (ms(trimmed as ms.StringValue) as number | undefined);
  if (value === undefined || !Number.isFinite(value)) throw refuse('must be a duration such as 90s, 30m, 12h or 30d');
  if (value < 0) throw refuse('must not be negative');
  if (!Number.isSafeInteger(value)) throw refuse('must be a whole number of milliseconds');
  if (value === 0 && !allowZero) throw refuse('must be longer than 0');
  return value;
}
