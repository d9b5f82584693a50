/**
 * An in-process test client: calls `petstore.handle` directly, no HTTP, no sockets.
 */
import type { PetstoreRequestBody } from '../http/types.js';
import type { Petstore } from '../http/pipeline.js';

/** An answer as the test client returns it: status, lowercase headers, and the parsed JSON body. */
export interface TestAnswer<T = unknown> {
  status: number;
  headers: Record<string, string>;
  body: T;
}

/** Options of {@link testClient}. */
export interface TestClientOptions {
  /** Sent as `Authorization: Bearer <apiKey>` on every request. */
  apiKey?: string;
  /** The client address for the anonymous rate limit. Default `127.0.0.1`. */
  clientAddress?: string;
}

/**
 * A typed client for one petstore, without HTTP — the same answers the adapters would send.
 *
 * ```ts
 * const client = testClient(petstore, { apiKey: 'k' });
 * const { status, body } = await client.createCategory({ name: 'Dogs' });
 * ```
 */
export function testClient(petstore: Petstore, options: TestClientOptions = {}) {
  const baseHeaders: Record<string, string> = options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {};
  async function request<T = unknown>(
    method: string,
    path: string,
    init: { headers?: Record<string, string>; body?: string } = {},
  ): Promise<TestAnswer<T>> {
    const body: PetstoreRequestBody = init.body === undefined ? { kind: 'none' } : { kind: 'bytes', bytes: init.body };
    const answer = await petstore.handle({
      method,
      path,
      headers: { ...baseHeaders, ...init.headers },
      body,
      clientAddress: options.clientAddress ?? '127.0.0.1',
    });
    return {
      status: answer.status,
      headers: answer.headers,
      body: (answer.body === undefined ? undefined : JSON.parse(answer.body)) as T,
    };
  }
  return {
    /** Any request: `path` below the prefix (e.g. `/categories`), headers by lowercase name, raw body text. */
    request,
    /** `GET /categories`. */
    listCategories: () => request<unknown[]>('GET', '/categories'),
    /** `POST /categories` with a JSON body; `newCategory` is sent as JSON as given. */
    createCategory: (newCategory: unknown) =>
      request('POST', '/categories', {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(newCategory),
      }),
  };
}

/** The client returned by {@link testClient}. */
export type TestClient = ReturnType<typeof testClient>;
