/**
 * An in-test {@link CategoryStore} over an array. For this package's own tests only; not exported.
 */
import type { Category } from '../src/schemas.js';
import type { CategoryStore, IdempotentCreateRequest } from '../src/storage/category-store.js';

/** A {@link CategoryStore} whose records tests can read directly. */
export interface TestCategoryStore extends CategoryStore {
  /** The stored categories, in id order. */
  readonly records: readonly Category[];
  /** Every idempotent create's request, in call order. */
  readonly idempotentRequests: readonly IdempotentCreateRequest[];
}

/**
 * Creates an empty store; ids start at 1 and increase by 1. Idempotency records expire on the system clock.
 * `listVersion: false` leaves out the optional `listVersion()` (the core then tags lists by a hash of the body).
 */
export function testCategoryStore(options: { listVersion?: boolean } = {}): TestCategoryStore {
  const records: Category[] = [];
  const idempotentRequests: IdempotentCreateRequest[] = [];
  const recorded = new Map<string, { fingerprint: string; category: Category; expiresAtMs: number }>();
  const create = (newCategory: Category | Omit<Category, 'id'>): Category => {
    const category: Category = { ...newCategory, id: records.length + 1 };
    records.push(category);
    return { ...category };
  };
  const store: TestCategoryStore = {
    records,
    idempotentRequests,
    list: (page) =>
      Promise.resolve(
        records
          .filter((category) => category.id > (page?.after ?? 0))
          .slice(0, page?.limit)
          .map((category) => ({ ...category })),
      ),
    listVersion: () => Promise.resolve(`${records.length} created`),
    create: (newCategory) => Promise.resolve(create(newCategory)),
    createIdempotent(newCategory, request) {
      idempotentRequests.push(request);
      const found = recorded.get(request.key);
      if (found !== undefined && found.expiresAtMs > Date.now()) {
        return Promise.resolve(found.fingerprint === request.fingerprint ? { outcome: 'replayed', category: { ...found.category } } : { outcome: 'mismatch' });
      }
      const category = create(newCategory);
      recorded.set(request.key, { fingerprint: request.fingerprint, category, expiresAtMs: Date.now() + request.retentionMs });
      return Promise.resolve({ outcome: 'created', category });
    },
  };
  if (options.listVersion === false) delete store.listVersion;
  return store;
}
