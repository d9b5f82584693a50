/**
 * Where the stores keep their data: the one naming scheme of `migratePostgres`, `postgresCategoryStore` and
 * `postgresRateLimitStore` (options `schema`, `categoriesTable`, `rateLimitsTable`), checked and quoted.
 */

/** Default of the `schema` option of the stores and of `migratePostgres`. */
export const DEFAULT_SCHEMA = 'public';
/** Default of the `categoriesTable` option of {@link postgresCategoryStore} and `migratePostgres`. */
export const DEFAULT_CATEGORIES_TABLE = 'petstore_categories';
/** Default of the `rateLimitsTable` option of {@link postgresRateLimitStore} and `migratePostgres`. */
export const DEFAULT_RATE_LIMITS_TABLE = 'petstore_rate_limits';
/** The table that records which migrations ran, in the same schema (not configurable). */
export const MIGRATIONS_TABLE = 'petstore_migrations';

/** Suffix of the consume function's name: `<rateLimitsTable>_consume`. */
const CONSUME_FUNCTION_SUFFIX = '_consume';
/** Suffix of the rate-limit table's index on `expires_at_ms`: `<rateLimitsTable>_expires_at_ms`. */
const RATE_LIMIT_INDEX_SUFFIX = '_expires_at_ms';
/** Suffix of the table of idempotency records: `<categoriesTable>_idempotency`. */
const IDEMPOTENCY_TABLE_SUFFIX = '_idempotency';
/** Suffix of that table's index on `expires_at_ms`: `<categoriesTable>_idempotency_exp`. */
const IDEMPOTENCY_INDEX_SUFFIX = '_idempotency_exp';
/** Suffix of the idempotent create function's name: `<categoriesTable>_create_idempotent`. */
const CREATE_IDEMPOTENT_FUNCTION_SUFFIX = '_create_idempotent';

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
const MAX_RATE_LIMITS_TABLE_NAME_LENGTH = MAX_IDENTIFIER_BYTES - Math.max(CONSUME_FUNCTION_SUFFIX.length, RATE_LIMIT_INDEX_SUFFIX.length);

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
 * Options naming the schema and tables, shared by `migratePostgres` and both stores (each store takes the names
 * it uses). Every name is letters, digits and `_`, not starting with a digit: a schema up to 63 characters, a
 * categories table up to 45 and a rate-limit table up to 49 (the names derived from a table add up to 18 and 14
 * characters, and PostgreSQL truncates identifiers past 63 bytes). A bad name is refused with a `TypeError` that
 * names the option.
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
  };
}

/** The qualified, quoted names of the rate-limit table and what is derived from it. */
export interface RateLimitsNames {
  /** The table, unquoted (as recorded in the migrations table). */
  table: string;
  rateLimits: string;
  /** The rate-limit table's index on `expires_at_ms` (unqualified). */
  index: string;
  /** The consume function: `<rateLimitsTable>_consume`. */
  consumeFunction: string;
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
  };
}

/** The migrations table of `options`' schema, qualified and quoted. @throws TypeError naming `schema`. */
export function migrationsTableName(options: PostgresSchemaOptions): string {
  return `${schemaName(options)}."${MIGRATIONS_TABLE}"`;
}
