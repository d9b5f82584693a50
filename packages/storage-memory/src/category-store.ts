import { PetstoreError, type Category, type CategoryPage, type CategoryStore, type IdempotentCreateRequest, type IdempotentCreateResult, type NewCategory } from '@petstore/core';
import { randomBytes } from 'node:crypto';
import { LRUCache } from 'lru-cache';

/** Options of {@link memoryCategoryStore}. */
export interface MemoryCategoryStoreOptions {
  /**
   * Most categories held. A create beyond it is refused with `storage_full` (507) and writes nothing: a
   * category is data, so it is never evicted. Default 10,000.
   * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#errors
   */
  maxCategories?: number;
  /**
   * Most idempotency records held (one per create sent with an `Idempotency-Key`, kept for the request's
   * `retentionMs`). Past it the least recently used record is dropped first, and a retry with its key would
   * create again. Default 100,000 (about 200 bytes each).
   */
  maxIdempotencyKeys?: number;
}

/** A {@link CategoryStore} in process memory. */
export interface MemoryCategoryStore extends CategoryStore {
  /**
   * Every category in id order (one frozen array until the next create), or the page asked for: at most
   * `page.limit`, ids above `page.after`, found by binary search (a page costs its size, not the list's).
   */
  list(page?: CategoryPage): Promise<readonly Category[]>;
  /**
   * `"0"` while empty; then the last id handed out, in decimal, and this store's random epoch (`"3@k2Xw…"`): it
   * changes exactly when a category is created, and a restarted process (a new store) never answers a version an
   * earlier one answered for another list.
   */
  listVersion(): Promise<string>;
  create(newCategory: NewCategory): Promise<Category>;
  createIdempotent(newCategory: NewCategory, request: IdempotentCreateRequest): Promise<IdempotentCreateResult>;
}

/** Default of {@link MemoryCategoryStoreOptions.maxCategories}. */
export const DEFAULT_MAX_CATEGORIES = 10_000;

/** Default of {@link MemoryCategoryStoreOptions.maxIdempotencyKeys}. */
export const DEFAULT_MAX_IDEMPOTENCY_KEYS = 100_000;

/**
 * A category store in process memory, bounded by `maxCategories`. Ids start at 1 and increase by 1 per
 * create (a safe integer, the contract's int64). Records are frozen, so callers cannot alter stored data; `list()`
 * answers one frozen array until the next create, and `listVersion()` the last id handed out with the store's epoch. `createIdempotent` looks up the key's record and creates and
 * records in one synchronous step, so it is atomic; records expire after the request's `retentionMs` and are
 * bounded by `maxIdempotencyKeys`.
 *
 * @throws TypeError when `maxCategories` or `maxIdempotencyKeys` is not a whole number ≥ 1.
 */
export function memoryCategoryStore(options: MemoryCategoryStoreOptions = {}): MemoryCategoryStore {
  const maxCategories = options.maxCategories ?? DEFAULT_MAX_CATEGORIES;
  if (!Number.isSafeInteger(maxCategories) || maxCategories < 1) {
    throw new TypeError(`maxCategories must be a whole number >= 1, got ${String(maxCategories)}`);
  }
  const maxIdempotencyKeys = options.maxIdempotencyKeys ?? DEFAULT_MAX_IDEMPOTENCY_KEYS;
  if (!Number.isSafeInteger(maxIdempotencyKeys) || maxIdempotencyKeys < 1) {
    throw new TypeError(`maxIdempotencyKeys must be a whole number >= 1, got ${String(maxIdempotencyKeys)}`);
  }
  // maxSize, with a size of 1 per entry, bounds the entry count as `max` would, but allocates as entries come:
  // `max` makes lru-cache allocate its arrays for every entry when the cache is created (BENCHMARKS.md,
  // "Memory store").
  const idempotency = new LRUCache<string, { fingerprint: string; category: Category }>({ maxSize: maxIdempotencyKeys, sizeCalculation: () => 1 });
  // Only set() and rvalues() are used, never get(): recency order stays insertion order, i.e. id order.
  const records = new LRUCache<number, Category>({ maxSize: maxCategories, sizeCalculation: () => 1 });
  let lastId = 0;
  // Ids start again at 1 in a new store (a restarted process): the epoch keeps its versions apart from the last one's,
  // so a client's ETag of the old list never matches a new one.
  const epoch = randomBytes(12).toString('base64url');
  // Made once per create, not per read: the core compares it with the version of the list it keeps, and the same
  // flat string compares at once.
  let version = '0';
  // The list as of the last create, frozen: reads between writes share one array, and the pipeline then
  // reuses the JSON it wrote for it (see CategoryStore.list) instead of serialising the same list again.
  let snapshot: readonly Category[] | undefined;
  function all(): readonly Category[] {
    if (snapshot === undefined) {
      const categories: Category[] = [];
      for (const category of records.rvalues()) if (category !== undefined) categories.push(category);
      snapshot = Object.freeze(categories);
    }
    return snapshot;
  }
  return {
    backend: 'memory',
    async list(page?: CategoryPage) {
      const categories = all();
      if (page === undefined) return categories;
      const after = page.after ?? 0;
      // The first index whose id is above `after` (ids ascend).
      let low = 0;
      let high = categories.length;
      while (low < high) {
        const middle = (low + high) >>> 1;
        if ((categories[middle] as Category).id <= after) low = middle + 1;
        else high = middle;
      }
      return categories.slice(low, page.limit === undefined ? undefined : low + page.limit);
    },
    async listVersion() {
      return version;
    },
    async create(newCategory: NewCategory) {
      return create(newCategory);
    },
    async createIdempotent(newCategory: NewCategory, request: IdempotentCreateRequest): Promise<IdempotentCreateResult> {
      const recorded = idempotency.get(request.key);
      if (recorded !== undefined) {
        return recorded.fingerprint === request.fingerprint ? { outcome: 'replayed', category: recorded.category } : { outcome: 'mismatch' };
      }
      const category = create(newCategory);
      idempotency.set(request.key, { fingerprint: request.fingerprint, category }, { ttl: request.retentionMs });
      return { outcome: 'created', category };
    },
  };

  function create(newCategory: NewCategory): Category {
    if (records.size >= maxCategories) {
      throw new PetstoreError(
        'storage_full',
        `The category store is full (${maxCategories} categories); nothing was created.`,
      );
    }
    lastId += 1;
    version = `${lastId}@${epoch}`;
    const category: Category = Object.freeze({
      id: lastId,
      name: newCategory.name,
      ...(newCategory.description !== undefined ? { description: newCategory.description } : {}),
    });
    records.set(category.id, category);
    snapshot = undefined;
    return category;
  }
}
