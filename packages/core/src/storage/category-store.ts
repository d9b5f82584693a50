import type { Category, NewCategory } from '../schemas.js';
import type { StoreBackend } from '../diagnostics.js';

/**
 * What the library asks of an idempotent create: the scoped key, the request's fingerprint and how long to keep
 * the record.
 */
export interface IdempotentCreateRequest {
  /**
   * The record's key: 64 lowercase hex characters (SHA-256 of the caller's API key id and the request's
   * `Idempotency-Key`), so another caller's identical key is another record. Opaque to the store.
   */
  key: string;
  /** The request's fingerprint: 64 lowercase hex characters (SHA-256 of the validated NewCategory). */
  fingerprint: string;
  /** How long the record is kept after the create, in ms (the `idempotency.retentionMs` option, 24 h by default). */
  retentionMs: number;
}

/**
 * The outcome of {@link CategoryStore.createIdempotent}:
 * - `created`: no live record had this key; the category was created and recorded with it.
 * - `replayed`: a live record has this key and the same fingerprint; nothing was created, `category` is the
 *   one the first request created.
 * - `mismatch`: a live record has this key with another fingerprint; nothing was created.
 */
export type IdempotentCreateResult =
  | { outcome: 'created'; category: Category }
  | { outcome: 'replayed'; category: Category }
  | { outcome: 'mismatch' };

/**
 * A page of the category list (see {@link CategoryStore.list}): at most `limit` categories (all when absent),
 * with ids above `after` (0 when absent), in ascending id order.
 */
export interface CategoryPage {
  /** Most categories answered: a whole number ≥ 1. Absent: no bound. */
  limit?: number;
  /** Only ids above this one: a safe integer ≥ 0 (an id already seen, typically the last of the previous page). */
  after?: number;
}

/**
 * Where categories live. Implement it over your own database; `@petstore/storage-memory`,
 * `@petstore/storage-redis` and `@petstore/storage-postgres` have one.
 *
 * - `list(page?)` answers the categories in ascending `id` order: every one without `page`; with `page`, at most
 *   `page.limit` of them (every one when absent), only those whose id is above `page.after` (0 when absent). The
 *   library asks for a page of `limit + 1` to tell whether more remain, with `limit` a whole number from 1 to 1001
 *   and `after` a safe integer ≥ 0. A keyset read (`WHERE id > after ORDER BY id LIMIT limit`) makes a page cost
 *   its size, not the table's. When it answers a frozen array, the library may reuse the JSON it wrote for that
 *   same array object, so answer a frozen array only while its records stay as they are (frozen records, and a
 *   new array after a change), or an unfrozen one.
 * - `listVersion()` (optional) answers a token that changes when, and only when, a category is created: two
 *   calls answer the same token exactly when no category was created in between (by any process sharing the
 *   store), and a token never names two different lists over the store's whole life: a store that can start
 *   again or lose its data (a new process, a flushed Redis, tables made anew) adds an epoch to it, so a client's
 *   tag from before never matches another list. 1 to 128 characters, any text; opaque to the library, which never shows it to clients (ETags are
 *   derived from it). A token must be visible no earlier than its category: once `listVersion()` has answered a
 *   token, a `list()` that starts after it answers every category created before that token. With it, the
 *   library answers `If-None-Match` with 304 after reading only the token, and keeps the JSON of the full list
 *   per token, so an unchanged list is not read again; without it, every list is read and serialised and the
 *   ETag is a hash of the body (a 304 then saves the bytes sent, not the work). A token that is not such a
 *   string makes the request fail with 500 `internal_error`.
 * - `create(newCategory)` assigns the id and writes the record in one step, and answers the stored
 *   Category. The id is the contract's int64; this library requires a positive integer that
 *   is a safe JavaScript integer (≤ 2^53 − 1) so it survives JSON in every client. Ids are unique and
 *   increasing. A failed create writes nothing.
 * - `createIdempotent(newCategory, request)` is `create` for a request that carries an `Idempotency-Key`: in ONE
 *   atomic step it looks up the record of `request.key` and either answers it (`replayed`, or `mismatch` for
 *   another fingerprint) or creates the category AND records `{ fingerprint, category }` under the key for
 *   `request.retentionMs`. A crash can never leave a category without its record or a record without its
 *   category; parallel calls with one key create exactly one category (the others answer `replayed`). A failed
 *   create writes neither. After `retentionMs` the record may be gone, and the key creates again. Records must
 *   not grow without bound (expire them; a store in process memory also caps their number).
 *
 * Errors: throw a `PetstoreError` (e.g. `storage_full`) to answer with its code; anything else becomes a
 * 500 `internal_error` answer without details.
 */
export interface CategoryStore {
  /**
   * Optional: the storage system it runs on, in OpenTelemetry `db.system.name` terms (`redis`, `postgresql`;
   * `memory` in process memory), reported on the `petstore:store` diagnostics channel; `custom` when absent.
   */
  readonly backend?: StoreBackend;
  list(page?: CategoryPage): Promise<readonly Category[]>;
  listVersion?(): Promise<string>;
  create(newCategory: NewCategory): Promise<Category>;
  createIdempotent(newCategory: NewCategory, request: IdempotentCreateRequest): Promise<IdempotentCreateResult>;
}
