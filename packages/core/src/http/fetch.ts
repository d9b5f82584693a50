/**
 * The Fetch-API entry: `Request` → `Response`, without patching any global.
 */
import type { FetchInfo, Petstore } from './pipeline.js';
import { notFoundOutsideThePrefix, pathBelowPrefix } from './prefix.js';
import type { BodyReadResult, PetstoreRequest, PetstoreRequestBody } from './types.js';

/**
 * Answers a Fetch `Request` through `petstore.handle`. Paths outside `petstore.prefix` (see
 * `pathBelowPrefix`) get a 404 Error body (they are not part of the API, so they carry no rate-limit headers).
 */
export async function handleFetch(
  petstore: Petstore,
  request: Request,
  info: FetchInfo | undefined,
): Promise<Response> {
  const url = new URL(request.url);
  const path = pathBelowPrefix(url.pathname + url.search, petstore.prefix);
  const answer = path === undefined ? notFoundOutsideThePrefix() : await petstore.handle(petstoreRequest(request, path, info));
  return new Response(answer.body ?? null, { status: answer.status, headers: answer.headers });
}

function petstoreRequest(request: Request, path: string, info: FetchInfo | undefined): PetstoreRequest {
  const headers: Record<string, string> = {};
  request.headers.forEach((value, name) => {
    headers[name] = value;
  });
  // `request.body` is only touched when the pipeline reads the body. Touching it starts the body stream, and
  // under Node-based Fetch servers an unread, started stream stalls the connection after an early answer
  // (401, 413, 429 …), so keep-alive breaks.
  const body: PetstoreRequestBody =
    request.method === 'GET' || request.method === 'HEAD'
      ? { kind: 'none' }
      : {
          kind: 'stream',
          read: (limitBytes) =>
            request.body === null ? Promise.resolve({ ok: true, bytes: new Uint8Array(0) }) : readWebStream(request.body, limitBytes),
        };
  return new FetchPetstoreRequest(request, path, headers, body, info);
}

/**
 * The plain request of a Fetch `Request`. `signal` is read from the `Request` only when a host handler asks for
 * it: under @hono/node-server, touching `request.signal` builds the full Request, whose body stream then starts
 * (see above). A class, so the getter lives once on the prototype (see `nodePetstoreRequest` in node.ts: a
 * getter closure per request object kept whole requests alive through young-generation collections).
 */
class FetchPetstoreRequest implements PetstoreRequest {
  readonly method: string;
  readonly clientAddress: string | undefined;
  readonly headersIncomplete: boolean | undefined;
  readonly #request: Request;
  constructor(
    request: Request,
    // With the query string, as the adapters pass it: host handlers read it (HostOperationContext.query).
    readonly path: string,
    readonly headers: Record<string, string>,
    readonly body: PetstoreRequestBody,
    info: FetchInfo | undefined,
  ) {
    this.#request = request;
    this.method = request.method;
    this.clientAddress = info?.clientAddress;
    this.headersIncomplete = info?.headersIncomplete;
  }

  get signal(): AbortSignal {
    return this.#request.signal;
  }
}

/** Reads a web stream into bytes, stopping (and cancelling the stream) once more than `limitBytes` arrive. */
export async function readWebStream(stream: ReadableStream<Uint8Array>, limitBytes: number): Promise<BodyReadResult> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      total += value.byteLength;
      if (total > limitBytes) {
        await reader.cancel().catch(() => undefined);
        return { ok: false, reason: 'too_large' };
      }
      chunks.push(value);
    }
  } catch {
    return { ok: false, reason: 'unreadable' };
  }
  const bytes = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return { ok: true, bytes };
}
