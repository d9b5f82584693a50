import { createPetstore, isPetstoreError, staticApiKeys } from '@petstore/core';
import { describe, expect, it } from 'vitest';
import { memoryCategoryStore } from './category-store.js';
import { memoryRateLimitStore } from './rate-limit-store.js';

describe('memoryCategoryStore', () => {
  it('assigns increasing ids from 1 and lists in id order', async () => {
    const store = memoryCategoryStore();
    const dogs = await store.create({ name: 'Dogs', description: 'Canine breeds' });
    const cats = await store.create({ name: 'Cats' });
    expect(dogs).toEqual({ id: 1, name: 'Dogs', description: 'Canine breeds' });
    expect(cats).toEqual({ id: 2, name: 'Cats' });
    expect('description' in cats).toBe(false);
    expect(await store.list()).toEqual([dogs, cats]);
  });

  it('lists one frozen array until the next create', async () => {
    const store = memoryCategoryStore();
    await store.create({ name: 'Dogs' });
    const first = await store.list();
    expect(Object.isFrozen(first)).toBe(true);
    expect(await store.list()).toBe(first);
    await store.create({ name: 'Cats' });
    const second = await store.list();
    expect(second).not.toBe(first);
    expect(second.map((category) => category.name)).toEqual(['Dogs', 'Cats']);
    expect(first.map((category) => category.name)).toEqual(['Dogs']);
  });

  it('gives distinct ids to parallel creates, all listed', async () => {
    const store = memoryCategoryStore();
    const created = await Promise.all(Array.from({ length: 250 }, (_, i) => store.create({ name: `c${i}` })));
    expect(new Set(created.map((category) => category.id)).size).toBe(250);
    expect((await store.list()).map((category) => category.id)).toEqual(
      Array.from({ length: 250 }, (_, i) => i + 1),
    );
  });

  it('refuses creates beyond maxCategories with storage_full and writes nothing', async () => {
    const store = memoryCategoryStore({ maxCategories: 2 });
    await store.create({ name: 'a' });
    await store.create({ name: 'b' });
    const failure = await store.create({ name: 'c' }).catch((error: unknown) => error);
    expect(isPetstoreError(failure) && failure.code).toBe('storage_full');
    expect((await store.list()).map((category) => category.name)).toEqual(['a', 'b']);
    expect((await store.create({ name: 'd' }).catch(() => null))).toBeNull();
  });

  it('hands out records that cannot alter the store', async () => {
    const store = memoryCategoryStore();
    const created = await store.create({ name: 'Dogs' });
    expect(() => {
      (created as { name: string }).name = 'Wolves';
    }).toThrow(TypeError);
    expect((await store.list())[0]?.name).toBe('Dogs');
  });
});

describe('memoryCategoryStore after a restart', () => {
  it("never tags another list with an earlier process's ETag: a new store's versions are its own", async () => {
    const serve = (categories: ReturnType<typeof memoryCategoryStore>) => {
      const petstore = createPetstore({
        apiKeys: staticApiKeys([{ key: 'reader-key', plan: 'pro' }]),
        categories,
        rateLimit: { store: memoryRateLimitStore() },
      });
      return (headers: Record<string, string> = {}) =>
        petstore.handle({ method: 'GET', path: '/categories', headers: { authorization: 'Bearer reader-key', ...headers } });
    };
    const before = memoryCategoryStore();
    await before.create({ name: 'Dogs' });
    const etag = (await serve(before)()).headers['etag'] as string;
    expect(etag).toMatch(/^"[\w-]{22}"$/);
    // The process restarts: a new store, whose first category has id 1 again.
    const after = memoryCategoryStore();
    await after.create({ name: 'Cats' });
    const answer = await serve(after)({ 'if-none-match': etag });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body as string)).toEqual([{ id: 1, name: 'Cats' }]);
    expect(answer.headers['etag']).not.toBe(etag);
    // Empty stores answer the same version: their lists are the same.
    expect(await memoryCategoryStore().listVersion()).toBe(await memoryCategoryStore().listVersion());
  });
});
