import { describe, expect, it } from 'vitest';
import { scriptedClient as setup } from '../test-support/scripted-fetch.js';

const dogs = { id: 1, name: 'Dogs' };
const cats = { id: 2, name: 'Cats' };
const birds = { id: 3, name: 'Birds' };

describe('listCategories: If-None-Match', () => {
  it('sends the last ETag of the URL and answers the kept list on 304', async () => {
    const { client, requests } = setup([
      { status: 200, headers: { etag: '"t1"' }, body: [dogs] },
      { status: 304, headers: { etag: '"t1"' } },
      { status: 200, headers: { etag: '"t2"' }, body: [dogs, cats] },
      { status: 304, headers: { etag: '"t2"' } },
    ]);
    expect(await client.listCategories()).toEqual([dogs]);
    expect(requests[0]?.init.headers['if-none-match']).toBeUndefined();
    const again = await client.listCategories();
    expect(again).toEqual([dogs]);
    expect(requests[1]?.init.headers['if-none-match']).toBe('"t1"');
    again.push(cats); // the caller's copy: the kept answer is not touched
    expect(await client.listCategories()).toEqual([dogs, cats]);
    expect(requests[2]?.init.headers['if-none-match']).toBe('"t1"');
    expect(await client.listCategories()).toEqual([dogs, cats]);
    expect(requests[3]?.init.headers['if-none-match']).toBe('"t2"');
  });

  it('keeps one answer per URL: a page and the full list revalidate apart', async () => {
    const { client, requests } = setup([
      { status: 200, headers: { etag: '"all"' }, body: [dogs, cats] },
      { status: 200, headers: { etag: '"page"' }, body: [dogs] },
      { status: 304 },
    ]);
    await client.listCategories();
    await client.listCategories({ limit: 1 });
    expect(await client.listCategories()).toEqual([dogs, cats]);
    expect(requests.map((request) => [request.url, request.init.headers['if-none-match']])).toEqual([
      ['http://api.test/v1/categories', undefined],
      ['http://api.test/v1/categories?limit=1', undefined],
      ['http://api.test/v1/categories', '"all"'],
    ]);
  });

  it('sends no If-None-Match after an answer without ETag, and refuses a 304 it did not ask for', async () => {
    const { client, requests } = setup([{ status: 200, body: [dogs] }, { status: 304 }]);
    await client.listCategories();
    await expect(client.listCategories()).rejects.toMatchObject({ code: 'invalid_response', status: 304 });
    expect(requests[1]?.init.headers['if-none-match']).toBeUndefined();
  });
});

describe('listCategories: paging', () => {
  it('asks for ?limit=&after= with what is given', async () => {
    const { client, requests } = setup([{ status: 200, body: [cats] }]);
    expect(await client.listCategories({ limit: 1, after: 1 })).toEqual([cats]);
    await client.listCategories({ after: 5 });
    expect(requests.map((request) => request.url)).toEqual([
      'http://api.test/v1/categories?limit=1&after=1',
      'http://api.test/v1/categories?after=5',
    ]);
  });

  it.each([[{ limit: 0 }], [{ limit: 1.5 }], [{ limit: Number.NaN }], [{ after: -1 }], [{ after: 2 ** 53 }]])(
    'refuses %j with a TypeError, sending nothing',
    async (options) => {
      const { client, requests } = setup([{ status: 200, body: [] }]);
      await expect(client.listCategories(options)).rejects.toBeInstanceOf(TypeError);
      expect(requests).toHaveLength(0);
    },
  );
});

describe('listCategoryPages', () => {
  it('follows Link rel="next" page by page until an answer has none', async () => {
    const { client, requests } = setup([
      { status: 200, headers: { link: '<?limit=2&after=2>; rel="next"' }, body: [dogs, cats] },
      { status: 200, headers: { link: '<http://api.test/v1/categories?limit=2&after=3>; title="more"; rel=next' }, body: [birds] },
      { status: 200, body: [] },
    ]);
    const pages = [];
    for await (const page of client.listCategoryPages({ limit: 2 })) pages.push(page);
    expect(pages).toEqual([[dogs, cats], [birds], []]);
    expect(requests.map((request) => request.url)).toEqual([
      'http://api.test/v1/categories?limit=2',
      'http://api.test/v1/categories?limit=2&after=2',
      'http://api.test/v1/categories?limit=2&after=3',
    ]);
  });

  it('asks for 100 at a time by default, and only as far as the loop reads', async () => {
    const { client, requests } = setup([{ status: 200, headers: { link: '<?limit=100&after=1>; rel="next"' }, body: [dogs] }]);
    for await (const page of client.listCategoryPages()) {
      expect(page).toEqual([dogs]);
      break;
    }
    expect(requests.map((request) => request.url)).toEqual(['http://api.test/v1/categories?limit=100']);
  });

  it('ignores links of other relations, and never follows a next link to another origin', async () => {
    const { client, requests } = setup([
      { status: 200, headers: { link: '<?limit=1&after=9>; rel="prev"' }, body: [dogs] },
      { status: 200, headers: { link: '<https://elsewhere.test/steal?after=1>; rel="next"' }, body: [dogs] },
    ]);
    const pages = [];
    for await (const page of client.listCategoryPages({ limit: 1 })) pages.push(page);
    expect(pages).toEqual([[dogs]]);
    const iterator = client.listCategoryPages({ limit: 1 });
    await expect(iterator.next()).rejects.toMatchObject({ code: 'invalid_response' });
    expect(requests.map((request) => new URL(request.url).origin)).toEqual(['http://api.test', 'http://api.test']);
  });

  it('refuses a bad limit from the first next(), sending nothing', async () => {
    const { client, requests } = setup([{ status: 200, body: [] }]);
    const iterator = client.listCategoryPages({ limit: 0 });
    await expect(iterator.next()).rejects.toBeInstanceOf(TypeError);
    expect(requests).toHaveLength(0);
  });
});
