/**
 * An in-test {@link CategoryStore} over an array. For this package's own tests only; not exported.
 */
import type { Category } from '../schemas.js';
import type { CategoryStore } from './category-store.js';

/** A {@link CategoryStore} whose records tests can read directly. */
export interface TestCategoryStore extends CategoryStore {
  /** The stored categories, in id order. */
  readonly records: readonly Category[];
}

/** Creates an empty store; ids start at 1 and increase by 1. */
export function testCategoryStore(): TestCategoryStore {
  const records: Category[] = [];
  return {
    records,
    list: () => Promise.resolve(records.map((category) => ({ ...category }))),
    create(newCategory) {
      const category: Category = { id: records.length + 1, ...newCategory };
      records.push(category);
      return Promise.resolve({ ...category });
    },
  };
}
