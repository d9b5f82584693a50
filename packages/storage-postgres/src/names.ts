/**
 * Where the stores keep their data: the one naming scheme of `migratePostgres`, `postgresCategoryStore`,
 * `postgresRateLimitStore` and `postgresApiKeyRecordStore` (options `schema`, `categoriesTable`, `rateLimitsTable`,
 * `apiKeysTable`), checked and quoted.
 */
import { hash } from 'node:crypto';

/** Default of the `schema` option of the stores and of `migratePostgres`. */
export const DEFAULT_SCHEMA = 'public';
/** Default of the `categoriesTable` option of {@link postgresCategoryStore} and `migratePostgres`. */
export const DEFAULT_CATEGORIES_TABLE = 'petstore_categories';
/** Default of the `rateLimitsTable` option of {@link postgresRateLimitStore} and `migratePostgres`. */
export const DEFAULT_RATE_LIMITS_TABLE = 'petstore_rate_limits';
/** Default of the `apiKeysTable` option of {@link postgresApiKeyRecordStore} and `migratePostgres`. */
export const DEFAULT_API_KEYS_TABLE = 'petstore_api_keys';
/** The table that records which migrations ran, in the same schema (not configurable). */
export const MIGRATIONS_TABLE = 'petstore_migrations';

/** Suffix of the consume function's name: `<rateLimitsTable>_consume`. */
const CONSUME_FUNCTION_SUFFIX = '_consume';
/** Suffix of the rate-limit table's batch consume function (migration version 3). */
const CONSUME_MANY_FUNCTION_SUFFIX = '_consume_many';
/** Suffix of the rate-limit table's index on `expires_at_ms`: `<rateLimitsTable>_expires_at_ms`. */
const RATE_LIMIT_INDEX_SUFFIX = '_expires_at_ms';
/** Suffix of the table of idempotency records: `<categoriesTable>_idempotency`. */
const IDEMPOTENCY_TABLE_SUFFIX = '_idempotency';
/** Suffix of that table's index on `expires_at_ms`: `<categoriesTable>_idempotency_exp`. */
const IDEMPOTENCY_INDEX_SUFFIX = '_idempotency_exp';
/** Suffix of the idempotent create function's name: `<categoriesTable>_create_idempotent`. */
const CREATE_IDEMPOTENT_FUNCTION_SUFFIX = '_create_idempotent';
/** Suffix of the one-row table of the list version: `<categoriesTable>_list_version`. */
const LIST_VERSION_TABLE_SUFFIX = '_list_version';
/** Suffix of the function (and of the trigger) that counts the list version up: `<categoriesTable>_list_changed`. */
const LIST_CHANGED_SUFFIX = '_list_changed';

/** Suffix of the API-key table's unique constraint on `digest`: `<apiKeysTable>_digest`. */
const API_KEYS_DIGEST_SUFFIX = '_digest';
/** Suffix of its unique partial index on `previous_digest`: `<apiKeysTable>_previous_digest`. */
const API_KEYS_PREVIOUS_DIGEST_SUFFIX = '_previous_digest';
/** Suffix of its index on `(account_id, key_id)`: `<apiKeysTable>_account`. */
const API_KEYS_ACCOUNT_SUFFIX = '_account';

/** Names the stores use: letters, digits and `_`, not starting with a digit. */
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** PostgreSQL's longest identifier, in bytes; it truncates longer ones (names here are ASCII: a byte each). */
const MAX_IDENTIFIER_BYTES = 63;
/** The longest schema name: nothing is derived from it. */
const MAX_SCHEMA_NAME_LENGTH = MAX_IDENTIFIER_BYTES;
/** The longest categories table name: 45, so that `<table>_create_idempotent` (18 more) stays within 63. */
const MAX_CATEGORIES_TABLE_NAME_LENGTH =
  MAX_IDENTIFIER_BYTES - Math.max(IDEMPOTENCY_TABLE_SUFFIX.length, IDEMPOTENCY_INDEX_SUFFIX.length, CREATE_IDEMPOTENT_FUNCTION_SUFFIX.length);
/** The longest rate-limit table name: 49, so that `<table>_expires_at_ms` (14 more) stays within 63. */
const MAX_RATE_LIMITS_TABLE_NAME_LENGTH = MAX_IDENTIFIER_BYTES - Math.max(CONSUME_FUNCTION_SUFFIX.length, CONSUME_MANY_FUNCTION_SUFFIX.length, RATE_LIMIT_INDEX_SUFFIX.length);

/**
 * The longest API-key table name: 47, so that `<table>_previous_digest` (16 more) stays within 63. (The names
 * PostgreSQL derives itself, such as `<table>_pkey`, it shortens itself.)
 */
const MAX_API_KEYS_TABLE_NAME_LENGTH =
  MAX_IDENTIFIER_BYTES - Math.max(API_KEYS_DIGEST_SUFFIX.length, API_KEYS_PREVIOUS_DIGEST_SUFFIX.length, API_KEYS_ACCOUNT_SUFFIX.length);
/** Of a notification channel name that would be too long: the characters kept before `_<hash>`. */
const CHANNEL_HASH_HEX_LENGTH = 16;

/**
 * Checks a schema or table name and answers it double-quoted for SQL (case is kept: `Pets` is `"Pets"`).
 * @param option the option that gave the name, named in the error (`schema`, `categoriesTable`, …)
 * @param maxLength the longest name allowed, in characters: 63 less the longest suffix of a name derived from it
 *   (so that no identifier is truncated by PostgreSQL)
 * @throws TypeError naming `option` when it is not 1–`maxLength` letters, digits or `_` starting with a letter or `_`.
 */
function quotedName(name: string, option: string, maxLength: number): string {
  if (typeof name !== 'string' || !NAME.test(name) || name.length > maxLength) {
    throw new TypeError(`${option} must be 1-${maxLength} letters, digits or _ (not starting with a digit), got ${JSON.stringify(name)}`);
  }
  return `"${name}"`;
}

/**
 * Options naming the schema and tables, shared by `migratePostgres` and the stores (each store takes the names
 * it uses). Every name is letters, digits and `_`, not starting with a digit: a schema up to 63 characters, a
 * categories table up to 45, a rate-limit table up to 49 and an API-key table up to 47 (the names derived from a
 * table add up to 18, 14 and 16 characters, and PostgreSQL truncates identifiers past 63 bytes). A bad name is
 * refused with a `TypeError` that names the option.
 */
export interface PostgresSchemaOptions {
  /** The schema holding the tables (and the migrations table). Default `public` ({@link DEFAULT_SCHEMA}). */
  schema?: string;
  /**
   * The categories table; its idempotency records are in `<categoriesTable>_idempotency`, created with the function
   * `<categoriesTable>_create_idempotent`. Default `petstore_categories` ({@link DEFAULT_CATEGORIES_TABLE}).
   */
  categoriesTable?: string;
  /**
   * The rate-limit table; its consume function is `<rateLimitsTable>_consume`. Default `petstore_rate_limits`
   * ({@link DEFAULT_RATE_LIMITS_TABLE}).
   */
  rateLimitsTable?: string;
  /**
   * The table of managed API keys' records. Its unique constraint on `digest` is `<apiKeysTable>_digest`, its
   * indexes `<apiKeysTable>_previous_digest` and `<apiKeysTable>_account`; its changes are notified on the channel
   * {@link postgresApiKeysChannel} names. Default `petstore_api_keys` ({@link DEFAULT_API_KEYS_TABLE}).
   */
  apiKeysTable?: string;
}

/** The schema, quoted. @throws TypeError naming `schema` on a bad name. */
export function schemaName(options: PostgresSchemaOptions): string {
  return quotedName(options.schema ?? DEFAULT_SCHEMA, 'schema', MAX_SCHEMA_NAME_LENGTH);
}

/** The qualified, quoted names of the categories table and what is derived from it. */
export interface CategoriesNames {
  /** The table, unquoted (as recorded in the migrations table). */
  table: string;
  categories: string;
  /** The idempotency records of the categories table: `<categoriesTable>_idempotency`. */
  idempotency: string;
  /** Its index on `expires_at_ms` (unqualified: an index lives in its table's schema). */
  idempotencyIndex: string;
  /** The idempotent create function: `<categoriesTable>_create_idempotent`. */
  createIdempotentFunction: string;
  /** The one-row table of the list version: `<categoriesTable>_list_version`. */
  listVersion: string;
  /** The trigger function that counts the list version up: `<categoriesTable>_list_changed`. */
  listChangedFunction: string;
  /** The statement trigger on the table that calls it (unqualified: a trigger lives on its table). */
  listChangedTrigger: string;
}

/** The names of the categories table of `options`. @throws TypeError naming `schema` or `categoriesTable`. */
export function categoriesNames(options: PostgresSchemaOptions): CategoriesNames {
  const schema = schemaName(options);
  const table = options.categoriesTable ?? DEFAULT_CATEGORIES_TABLE;
  return {
    table,
    categories: `${schema}.${quotedName(table, 'categoriesTable', MAX_CATEGORIES_TABLE_NAME_LENGTH)}`,
    idempotency: `${schema}."${table}${IDEMPOTENCY_TABLE_SUFFIX}"`,
    idempotencyIndex: `"${table}${IDEMPOTENCY_INDEX_SUFFIX}"`,
    createIdempotentFunction: `${schema}."${table}${CREATE_IDEMPOTENT_FUNCTION_SUFFIX}"`,
    listVersion: `${schema}."${table}${LIST_VERSION_TABLE_SUFFIX}"`,
    listChangedFunction: `${schema}."${table}${LIST_CHANGED_SUFFIX}"`,
    listChangedTrigger: `"${table}${LIST_CHANGED_SUFFIX}"`,
  };
}

/** The qualified, quoted names of the rate-limit table and what is derived from it. */
export interface RateLimitsNames {
  /** The table, unquoted (as recorded in the migrations table). */
  table: string;
  rateLimits: string;
  /** The rate-limit table's index on `expires_at_ms` (unqualified). */
  index: string;
  /** The consume function of version 2 (one consume per call): `<rateLimitsTable>_consume`. */
  consumeFunction: string;
  /** The consume function of version 3 (a batch of consumes per call): `<rateLimitsTable>_consume_many`. */
  consumeManyFunction: string;
}

/** The names of the rate-limit table of `options`. @throws TypeError naming `schema` or `rateLimitsTable`. */
export function rateLimitsNames(options: PostgresSchemaOptions): RateLimitsNames {
  const schema = schemaName(options);
  const table = options.rateLimitsTable ?? DEFAULT_RATE_LIMITS_TABLE;
  return {
    table,
    rateLimits: `${schema}.${quotedName(table, 'rateLimitsTable', MAX_RATE_LIMITS_TABLE_NAME_LENGTH)}`,
    index: `"${table}${RATE_LIMIT_INDEX_SUFFIX}"`,
    consumeFunction: `${schema}."${table}${CONSUME_FUNCTION_SUFFIX}"`,
    consumeManyFunction: `${schema}."${table}${CONSUME_MANY_FUNCTION_SUFFIX}"`,
  };
}

/** The migrations table of `options`' schema, qualified and quoted. @throws TypeError naming `schema`. */
export function migrationsTableName(options: PostgresSchemaOptions): string {
  return `${schemaName(options)}."${MIGRATIONS_TABLE}"`;
}

/** The qualified, quoted names of the API-key table and what is derived from it. */
export interface ApiKeysNames {
  /** The table, unquoted (as recorded in the migrations table). */
  table: string;
  apiKeys: string;
  /** Its unique constraint on `digest` (unqualified). */
  digestConstraint: string;
  /** Its unique partial index on `previous_digest` (unqualified). */
  previousDigestIndex: string;
  /** Its index on `(account_id, key_id)` (unqualified). */
  accountIndex: string;
  /** The notification channel of its changes, unquoted (a string for `pg_notify`; quote it for `LISTEN`). */
  channel: string;
}

/** The names of the API-key table of `options`. @throws TypeError naming `schema` or `apiKeysTable`. */
export function apiKeysNames(options: PostgresSchemaOptions): ApiKeysNames {
  const schema = schemaName(options);
  const table = options.apiKeysTable ?? DEFAULT_API_KEYS_TABLE;
  return {
    table,
    apiKeys: `${schema}.${quotedName(table, 'apiKeysTable', MAX_API_KEYS_TABLE_NAME_LENGTH)}`,
    digestConstraint: `"${table}${API_KEYS_DIGEST_SUFFIX}"`,
    previousDigestIndex: `"${table}${API_KEYS_PREVIOUS_DIGEST_SUFFIX}"`,
    accountIndex: `"${table}${API_KEYS_ACCOUNT_SUFFIX}"`,
    channel: postgresApiKeysChannel(options),
  };
}

/**
 * The LISTEN/NOTIFY channel on which `postgresApiKeyRecordStore` announces the changes of an API-key table:
 * `<schema>.<apiKeysTable>` (e.g. `public.petstore_api_keys`), so that stores of different tables in one database
 * hear only their own. When that is longer than PostgreSQL's 63 bytes (a channel name is an identifier), its first
 * 46 characters, `_`, and 16 hex characters of the SHA-256 of the whole name: still one channel per table. In
 * `psql`, `LISTEN "public.petstore_api_keys";` shows the notifications (their payload: the affected digests, hex,
 * separated by `,`).
 *
 * @throws TypeError naming `schema` or `apiKeysTable` when it is not a plain name.
 */
export function postgresApiKeysChannel(options: Pick<PostgresSchemaOptions, 'schema' | 'apiKeysTable'> = {}): string {
  schemaName(options);
  const table = options.apiKeysTable ?? DEFAULT_API_KEYS_TABLE;
  quotedName(table, 'apiKeysTable', MAX_API_KEYS_TABLE_NAME_LENGTH);
  const qualified = `${options.schema ?? DEFAULT_SCHEMA}.${table}`;
  if (qualified.length <= MAX_IDENTIFIER_BYTES) return qualified;
  const kept = MAX_IDENTIFIER_BYTES - 1 - CHANNEL_HASH_HEX_LENGTH;
  return `${qualified.slice(0, kept)}_${hash('sha256', qualified, 'hex').slice(0, CHANNEL_HASH_HEX_LENGTH)}`;
}
