import { describe, expect, it, vi } from 'vitest';
import { ifNoneMatchMatches, readListQuery } from './category-list.js';
import { FREE_AUTH, ONE_PER_MINUTE_KEY, expectError, parse, request, testPetstore } from '../../test-support/petstore.js';
import { testCategoryStore } from '../../test-support/category-store.js';
import { testRateLimitStore } from '../../test-support/rate-limit-store.js';
import type { CategoryStore } from '../storage/category-store.js';

const ETAG = /^"[A-Za-z0-9_-]{22}"$/;

/** A test store whose list and listVersion calls are counted. */
function countedStore(options: { listVersion?: boolean } = {}) {
  const store = testCategoryStore(options);
  const list = vi.spyOn(store, 'list');
  const listVersion = store.listVersion === undefined ? undefined : vi.spyOn(store as Required<CategoryStore>, 'listVersion');
  return { store, list, listVersion };
}

async function seeded(count: number, options: { listVersion?: boolean } = {}) {
  const counted = countedStore(options);
  for (let i = 1; i <= count; i++) await counted.store.create({ name: `c${i}` });
  counted.list.mockClear();
  const { petstore } = testPetstore({ categories: counted.store });
  const get = (path: string, headers: Record<string, string> = {}, method = 'GET') =>
    petstore.handle(request(path, { ...FREE_AUTH, ...headers }, method));
  return { ...counted, petstore, get };
}

describe('GET /categories: ETag and If-None-Match', () => {
  it('tags the list with a strong ETag that changes when, and only when, a category is created', async () => {
    const { store, get } = await seeded(2);
    const first = await get('/categories');
    expect(first.status).toBe(200);
    expect(first.headers['etag']).toMatch(ETAG);
    expect((await get('/categories')).headers['etag']).toBe(first.headers['etag']);
    await store.create({ name: 'c3' });
    const changed = await get('/categories');
    expect(changed.headers['etag']).toMatch(ETAG);
    expect(changed.headers['etag']).not.toBe(first.headers['etag']);
    expect((parse(changed) as unknown[]).length).toBe(3);
  });

  it('answers a current tag with 304: no body, no Content-Type, the ETag and the rate-limit headers; the request is charged', async () => {
    const { get } = await seeded(2);
    const full = await get('/categories');
    const etag = full.headers['etag'] as string;
    const notModified = await get('/categories', { 'if-none-match': etag });
    expect(notModified.status).toBe(304);
    expect(notModified.body).toBeUndefined();
    expect(notModified.headers['content-type']).toBeUndefined();
    expect(notModified.headers['etag']).toBe(etag);
    expect(Number(notModified.headers['x-ratelimit-remaining'])).toBe(Number(full.headers['x-ratelimit-remaining']) - 1);
  });

  it('compares weakly, reads lists of tags and several header lines, and matches *', async () => {
    const { get } = await seeded(1);
    const etag = (await get('/categories')).headers['etag'] as string;
    for (const value of [`W/${etag}`, `"other", ${etag}`, ` "a" ,, ${etag} , `, '*', ' * ']) {
      expect((await get('/categories', { 'if-none-match': value })).status, value).toBe(304);
    }
    // Several header lines, as nodeRequestHeaders hands them over.
    const twoLines = await get('/categories', { 'if-none-match': ['"other"', etag] as unknown as string });
    expect(twoLines.status).toBe(304);
  });

  it('answers 200 with the list for a stale, foreign or malformed If-None-Match', async () => {
    const { store, get } = await seeded(1);
    const old = (await get('/categories')).headers['etag'] as string;
    await store.create({ name: 'c2' });
    for (const value of [old, '"nope"', old.slice(1, -1), `${old} garbage`, `"a" "b"`, '']) {
      const answer = await get('/categories', { 'if-none-match': value });
      expect(answer.status, value).toBe(200);
      expect((parse(answer) as unknown[]).length).toBe(2);
    }
  });

  it('answers 200 for a malformed If-None-Match even when it holds the current tag', async () => {
    for (const listVersion of [true, false]) {
      const { get } = await seeded(1, { listVersion });
      const etag = (await get('/categories')).headers['etag'] as string;
      for (const value of [`${etag} garbage`, `${etag}, garbage`, `${etag} ${etag}`, `garbage, ${etag}`, `${etag},"unterminated`, `${etag};q=1`]) {
        const answer = await get('/categories', { 'if-none-match': value });
        expect([value, answer.status]).toEqual([value, 200]);
      }
    }
  });

  it('answers 304 without the Link of the page, with or without a list version', async () => {
    for (const listVersion of [true, false]) {
      const { get } = await seeded(5, { listVersion });
      const page = await get('/categories?limit=2');
      expect(page.headers['link']).toBe('<?limit=2&after=2>; rel="next"');
      const notModified = await get('/categories?limit=2', { 'if-none-match': page.headers['etag'] as string });
      expect(notModified.status).toBe(304);
      expect(Object.keys(notModified.headers)).not.toContain('link');
    }
  });

  it('answers a current tag without reading the list, and an unchanged list without reading it again', async () => {
    const { list, listVersion, get } = await seeded(3);
    const first = await get('/categories');
    expect(list).toHaveBeenCalledTimes(1);
    const again = await get('/categories');
    expect(again.body).toBe(first.body);
    expect((await get('/categories', { 'if-none-match': first.headers['etag'] as string })).status).toBe(304);
    expect(list).toHaveBeenCalledTimes(1);
    expect(listVersion).toHaveBeenCalledTimes(3);
  });

  it('reads and tags the list by a hash of the body when the store has no listVersion', async () => {
    const { store, list, get } = await seeded(2, { listVersion: false });
    const first = await get('/categories');
    expect(first.headers['etag']).toMatch(ETAG);
    const notModified = await get('/categories', { 'if-none-match': first.headers['etag'] as string });
    expect(notModified.status).toBe(304);
    expect(notModified.body).toBeUndefined();
    expect(list).toHaveBeenCalledTimes(2);
    await store.create({ name: 'c3' });
    const changed = await get('/categories', { 'if-none-match': first.headers['etag'] as string });
    expect(changed.status).toBe(200);
    expect(changed.headers['etag']).not.toBe(first.headers['etag']);
  });

  it('tags HEAD like GET and answers it with 304 too', async () => {
    const { get } = await seeded(1);
    const etag = (await get('/categories')).headers['etag'] as string;
    const head = await get('/categories', {}, 'HEAD');
    expect(head.status).toBe(200);
    expect(head.headers['etag']).toBe(etag);
    expect((await get('/categories', { 'if-none-match': etag }, 'HEAD')).status).toBe(304);
  });

  it('answers 500 internal_error when the store answers a list version that is not a string of 1 to 128 characters', async () => {
    for (const version of ['', 'x'.repeat(129), 42]) {
      const store = testCategoryStore();
      store.listVersion = async () => version as string;
      const { petstore, internalErrors } = testPetstore({ categories: store });
      expectError(await petstore.handle(request('/categories')), 500, 'internal_error');
      expect(internalErrors).toHaveLength(1);
    }
  });
});

describe('GET /categories: paging', () => {
  it('answers at most limit categories above after, in id order, with a Link to the next page while more remain', async () => {
    const { get } = await seeded(5);
    const first = await get('/categories?limit=2');
    expect((parse(first) as Array<{ id: number }>).map((category) => category.id)).toEqual([1, 2]);
    expect(first.headers['link']).toBe('<?limit=2&after=2>; rel="next"');
    const second = await get('/categories?limit=2&after=2');
    expect((parse(second) as Array<{ id: number }>).map((category) => category.id)).toEqual([3, 4]);
    expect(second.headers['link']).toBe('<?limit=2&after=4>; rel="next"');
    const last = await get('/categories?after=4&limit=2');
    expect((parse(last) as Array<{ id: number }>).map((category) => category.id)).toEqual([5]);
    expect(last.headers['link']).toBeUndefined();
    const exact = await get('/categories?limit=5');
    expect((parse(exact) as unknown[]).length).toBe(5);
    expect(exact.headers['link']).toBeUndefined();
    expect(parse(await get('/categories?after=5'))).toEqual([]);
  });

  it('pages 100 at a time for after alone, and ignores other query parameters', async () => {
    const { get } = await seeded(3);
    expect((parse(await get('/categories?after=1')) as Array<{ id: number }>).map((category) => category.id)).toEqual([2, 3]);
    const unpaged = await get('/categories?page=2&sort=name');
    expect((parse(unpaged) as unknown[]).length).toBe(3);
    expect(unpaged.headers['link']).toBeUndefined();
    expect(unpaged.headers['etag']).toBe((await get('/categories')).headers['etag']);
  });

  it('gives each page its own tag, and answers a page whose tag is current with 304 without reading it', async () => {
    const { list, get } = await seeded(5);
    const tags = new Set<string>();
    for (const path of ['/categories', '/categories?limit=2', '/categories?limit=3', '/categories?limit=2&after=2', '/categories?after=0']) {
      tags.add((await get(path)).headers['etag'] as string);
    }
    expect(tags.size).toBe(5);
    expect((await get('/categories?limit=2&after=002')).headers['etag']).toBe((await get('/categories?limit=2&after=2')).headers['etag']);
    const etag = (await get('/categories?limit=2&after=2')).headers['etag'] as string;
    list.mockClear();
    const notModified = await get('/categories?limit=2&after=2', { 'if-none-match': etag });
    expect(notModified.status).toBe(304);
    expect(list).not.toHaveBeenCalled();
  });

  it.each([
    ['limit=0'],
    ['limit=1001'],
    ['limit=99999'],
    ['limit='],
    ['limit=abc'],
    ['limit=-1'],
    ['limit=1.5'],
    ['limit=%2B5'],
    ['limit=1e2'],
    ['limit=2&limit=3'],
    ['after='],
    ['after=-1'],
    ['after=9007199254740992'],
    ['after=99999999999999999'],
    [`after=${'9'.repeat(10_000)}`],
    ['after=1&after=2'],
    ['after=0x10'],
  ])('refuses ?%s with 400 validation_failed, before any store call', async (query) => {
    const { list, listVersion, get } = await seeded(1);
    listVersion?.mockClear();
    const answer = await get(`/categories?${query}`, { 'if-none-match': '*' });
    expectError(answer, 400, 'validation_failed');
    expect(answer.headers['x-ratelimit-remaining']).toBeDefined();
    expect(list).not.toHaveBeenCalled();
    expect(listVersion).not.toHaveBeenCalled();
  });

  it('accepts the bounds: limit 1 and 1000, after 0 and 2^53 - 1', async () => {
    const { get } = await seeded(2);
    for (const query of ['limit=1', 'limit=1000', 'after=0', `after=${Number.MAX_SAFE_INTEGER}`, 'limit=%31']) {
      expect((await get(`/categories?${query}`)).status, query).toBe(200);
    }
  });
});

describe('GET /categories: the list version read beside the rate-limit charge', () => {
  it('asks for the list version once the key is valid, before the charge has answered, and answers with it', async () => {
    const { store, listVersion } = countedStore();
    await store.create({ name: 'c1' });
    const limits = testRateLimitStore();
    const consume = limits.consume.bind(limits);
    let consumeCalls = 0;
    let release = () => {};
    const charged = new Promise<void>((resolve) => (release = resolve));
    limits.consume = async (key, consumeRequest) => {
      consumeCalls += 1;
      await charged;
      return consume(key, consumeRequest);
    };
    const { petstore } = testPetstore({ categories: store, rateLimit: { store: limits } });
    const answer = petstore.handle(request('/categories'));
    await vi.waitFor(() => expect(consumeCalls).toBe(1));
    expect(listVersion).toHaveBeenCalledTimes(1);
    release();
    const listed = await answer;
    expect(listed.status).toBe(200);
    expect(listed.headers['etag']).toMatch(ETAG);
    expect(parse(listed)).toEqual([{ id: 1, name: 'c1' }]);
    expect(listVersion).toHaveBeenCalledTimes(1);
  });

  it('reads nothing for a request without a valid key; a 429 wastes its read, whose failure is never unhandled', async () => {
    const store = testCategoryStore();
    // A plain function, not a vi.spyOn spy: a spy handles the promises its calls answer.
    const reads: Array<(error: Error) => void> = [];
    store.listVersion = () => new Promise<string>((resolve, reject) => reads.push(reads.length === 0 ? () => resolve('v1') : reject));
    const { petstore } = testPetstore({ categories: store });
    expectError(await petstore.handle(request('/categories', {})), 401, 'unauthorized');
    expectError(await petstore.handle(request('/categories', { authorization: 'Bearer not-a-key' })), 401, 'unauthorized');
    expect(reads).toHaveLength(0);
    const tight = { authorization: `Bearer ${ONE_PER_MINUTE_KEY}` };
    const first = petstore.handle(request('/categories', tight));
    await vi.waitFor(() => expect(reads).toHaveLength(1));
    (reads[0] as (error: Error) => void)(new Error('unused'));
    expect((await first).status).toBe(200);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      expectError(await petstore.handle(request('/categories', tight)), 429, 'rate_limited');
      expect(reads).toHaveLength(2);
      // The refused request's read fails after its 429; nothing awaits it.
      (reads[1] as (error: Error) => void)(new Error('the store is down'));
      // Node reports an unhandled rejection once the microtasks have run: by the second macrotask, it would have.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});

describe('readListQuery', () => {
  it('answers undefined without paging parameters, and the page otherwise', () => {
    expect(readListQuery('/categories')).toBeUndefined();
    expect(readListQuery('/categories?')).toBeUndefined();
    expect(readListQuery('/categories?x=%zz')).toBeUndefined();
    expect(readListQuery('/categories?limit=7')).toEqual({ limit: 7, after: 0 });
    expect(readListQuery('/categories?after=7')).toEqual({ limit: 100, after: 7 });
  });
});

describe('ifNoneMatchMatches', () => {
  it('is false without the header, and for a value over 8192 characters', () => {
    expect(ifNoneMatchMatches(undefined, '"a"')).toBe(false);
    expect(ifNoneMatchMatches(`${' '.repeat(8200)}"a"`, '"a"')).toBe(false);
  });
});
