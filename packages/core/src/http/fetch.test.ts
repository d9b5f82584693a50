import { describe, expect, it } from 'vitest';
import { readWebStream } from './fetch.js';
import { FREE_KEY, testPetstore } from '../../test-support/petstore.js';

const AUTH = { authorization: `Bearer ${FREE_KEY}` };

/** A request body stream of `chunkCount` chunks of `chunkBytes` bytes; counts chunks pulled and cancellation. */
function countingStream(chunkCount: number, chunkBytes: number) {
  const progress = { pulled: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (progress.pulled === chunkCount) return controller.close();
      progress.pulled++;
      controller.enqueue(new Uint8Array(chunkBytes).fill(0x61));
    },
    cancel() {
      progress.cancelled = true;
    },
  });
  return { stream, progress };
}

/** `RequestInit` with `duplex`, which Node needs for a stream body but the DOM typings lack. */
function streamingInit(init: RequestInit, body: ReadableStream<Uint8Array>): RequestInit {
  return { ...init, body, duplex: 'half' } as RequestInit;
}

describe('petstore.fetch', () => {
  it('answers GET /v1/categories with 200, a JSON array and the rate-limit headers', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.fetch(new Request('http://x/v1/categories', { headers: AUTH }));
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(response.headers.get('x-ratelimit-limit')).toBe('60');
    expect(response.headers.get('x-ratelimit-remaining')).toBe('59');
    expect(await response.json()).toEqual([]);
  });

  it('creates a category from a JSON body with 201', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.fetch(
      new Request('http://x/v1/categories', {
        method: 'POST',
        headers: { ...AUTH, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'Dogs', description: 'Loyal' }),
      }),
    );
    expect(response.status).toBe(201);
    const created = (await response.json()) as { id: number };
    expect(created).toEqual({ id: expect.any(Number), name: 'Dogs', description: 'Loyal' });
    const list = await petstore.fetch(new Request('http://x/v1/categories', { headers: AUTH }));
    expect(await list.json()).toEqual([created]);
  });

  it('answers a text body sent without Content-Type with 400 invalid_content_type', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.fetch(
      new Request('http://x/v1/categories', { method: 'POST', headers: AUTH, body: '{"name":"Dogs"}' }),
    );
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ code: 'invalid_content_type', status: 400 });
  });

  it.each(['http://x/categories', 'http://x/v10/categories', 'http://x/v2/categories', 'http://x/'])(
    'answers %s, outside /v1, with a 404 Error body',
    async (url) => {
      const { petstore } = testPetstore();
      const response = await petstore.fetch(new Request(url, { headers: AUTH }));
      expect(response.status).toBe(404);
      expect(response.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await response.json()).toEqual({ code: 'not_found', message: expect.any(String), status: 404 });
      // Not part of the API: nothing is charged, so no rate-limit headers.
      expect(response.headers.get('x-ratelimit-limit')).toBeNull();
    },
  );

  it('serves a configured prefix', async () => {
    const { petstore } = testPetstore({ prefix: '/api/pets/v1' });
    expect(petstore.prefix).toBe('/api/pets/v1');
    expect((await petstore.fetch(new Request('http://x/api/pets/v1/categories', { headers: AUTH }))).status).toBe(200);
    expect((await petstore.fetch(new Request('http://x/v1/categories', { headers: AUTH }))).status).toBe(404);
  });

  it('answers a streamed body over the limit with 413, and stops reading it', async () => {
    const { petstore, categories } = testPetstore({ bodyLimitBytes: 1024 });
    const { stream, progress } = countingStream(1000, 256);
    const request = new Request(
      'http://x/v1/categories',
      streamingInit({ method: 'POST', headers: { ...AUTH, 'content-type': 'application/json' } }, stream),
    );
    const response = await petstore.fetch(request);
    expect(response.status).toBe(413);
    expect(await response.json()).toMatchObject({ code: 'payload_too_large', status: 413 });
    expect(progress.pulled).toBeLessThan(20);
    expect(categories.records).toHaveLength(0);
  });

  it('charges anonymous requests to the given client address', async () => {
    const { petstore } = testPetstore();
    const first = await petstore.fetch(new Request('http://x/v1/categories'), { clientAddress: '203.0.113.9' });
    expect(first.status).toBe(401);
    expect(first.headers.get('www-authenticate')).toBe('Bearer realm="petstore"');
    expect(first.headers.get('x-ratelimit-remaining')).toBe('29');
    const other = await petstore.fetch(new Request('http://x/v1/categories'), { clientAddress: '203.0.113.10' });
    expect(other.headers.get('x-ratelimit-remaining')).toBe('29');
    const again = await petstore.fetch(new Request('http://x/v1/categories'), { clientAddress: '203.0.113.9' });
    expect(again.headers.get('x-ratelimit-remaining')).toBe('28');
  });

  it('answers HEAD without a body', async () => {
    const { petstore } = testPetstore();
    const response = await petstore.fetch(new Request('http://x/v1/categories', { method: 'HEAD', headers: AUTH }));
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('');
  });

  it("passes the query string and the percent-decoded petId to a host handler", async () => {
    const seen: Array<{ params: unknown; query: Record<string, string> }> = [];
    const { petstore } = testPetstore({
      handlers: {
        getPetById: ({ params, query }) => {
          seen.push({ params, query: Object.fromEntries(query) });
          return { body: { id: 7 }, headers: { 'x-pet-source': 'host' } };
        },
      },
    });
    const response = await petstore.fetch(new Request('http://x/v1/pets/%37?fields=name&q=a%20b', { headers: AUTH }));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ id: 7 });
    expect(response.headers.get('x-pet-source')).toBe('host');
    expect(response.headers.get('deprecation')).toBe('@1767225600');
    expect(seen).toEqual([{ params: { petId: '7' }, query: { fields: 'name', q: 'a b' } }]);
  });

  it('answers the query string of the prefix itself like the bare prefix', async () => {
    const { petstore } = testPetstore();
    expect((await petstore.fetch(new Request('http://x/v1?x=1', { headers: AUTH }))).status).toBe(404);
  });
});

describe('readWebStream', () => {
  it('joins the chunks of a stream within the limit', async () => {
    const { stream } = countingStream(4, 3);
    const read = await readWebStream(stream, 12);
    expect(read).toEqual({ ok: true, bytes: new Uint8Array(12).fill(0x61) });
  });

  it('answers too_large and cancels the stream once more than the limit arrives', async () => {
    const { stream, progress } = countingStream(1000, 3);
    expect(await readWebStream(stream, 10)).toEqual({ ok: false, reason: 'too_large' });
    expect(progress.pulled).toBe(4);
    expect(progress.cancelled).toBe(true);
  });

  it('answers unreadable for a stream that errors', async () => {
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        controller.error(new Error('connection reset'));
      },
    });
    expect(await readWebStream(stream, 10)).toEqual({ ok: false, reason: 'unreadable' });
  });
});
