import type { Category, NewCategory } from '../schemas.js';

/**
 * Where categories live. Implement it over your own database; `@petstore/storage-memory` has one in memory.
 *
 * - `list()` answers every category, in ascending `id` order. When it answers a frozen array, the library
 *   may reuse the JSON it wrote for that same array object, so answer a frozen array only while its records
 *   stay as they are (frozen records, and a new array after a change), or an unfrozen one.
 * - `create(newCategory)` assigns the id and writes the record in one step, and answers the stored
 *   Category. The id is the contract's int64; this library requires a positive integer that
 *   is a safe JavaScript integer (≤ 2^53 − 1) so it survives JSON in every client. Ids are unique and
 *   increasing. A failed create writes nothing.
 *
 * Errors: throw a `PetstoreError` (e.g. `storage_full`) to answer with its code; anything else becomes a
 * 500 `internal_error` answer without details.
 */
export interface CategoryStore {
  list(): Promise<readonly Category[]>;
  create(newCategory: NewCategory): Promise<Category>;
}
