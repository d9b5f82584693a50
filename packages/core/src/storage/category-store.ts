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
 * Where categories live. Implement it over your own database; `@petstore/storage-memory`,
 * `@petstore/storage-redis` and `@petstore/storage-postgres` have one.
 *
 * - `list()` answers every category, in ascending `id` order. When it answers a frozen array, the library
 *   may reuse the JSON it wrote for that same array object, so answer a frozen array only while its records
 *   stay as they are (frozen records, and a new array after a change), or an unfrozen one.
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
  list(): Promise<readonly Category[]>;
  create(newCategory: NewCategory): Promise<Category>;
  createIdempotent(newCategory: NewCategory, request: IdempotentCreateRequest): Promise<IdempotentCreateResult>;
}
