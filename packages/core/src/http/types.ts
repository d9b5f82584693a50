import type { PetstoreLogger } from './events.js';

/**
 * The transport-neutral request and response of the pipeline. Adapters translate their framework's request
 * into a {@link PetstoreRequest} and write the {@link PetstoreResponse} back, and do nothing else.
 */

/** Header values by lowercase name, as Node's `IncomingHttpHeaders` holds them. */
export type PetstoreHeaders = Readonly<Record<string, string | readonly string[] | undefined>>;

/** The outcome of reading a streamed body with a limit. */
export type BodyReadResult =
  | { ok: true; bytes: Uint8Array }
  | { ok: false; reason: 'too_large' | 'unreadable' };

/**
 * The request body as the adapter has it.
 *
 * - `none`: the request has no body.
 * - `bytes`: the raw body (a string is taken as UTF-8 text).
 * - `stream`: not read yet; the pipeline calls `read(limitBytes)` only when the operation takes a body, after
 *   auth and rate limiting. `read` answers `too_large` as soon as more than `limitBytes` arrive.
 * - `parsed`: the host already parsed JSON (e.g. Express's `express.json()`); the pipeline validates the value.
 * - `unreadable`: the host's own body parser failed: `too_large` → 413, `unsupported_encoding` (a content
 *   coding it could not decode) → 415, `malformed` → 400 `invalid_json`.
 *
 * `bytes`, `parsed` and `unreadable` are bodies the host has read: any content coding (gzip …) is taken as
 * removed by the host. For `stream`, the core reads the raw bytes and refuses a content coding other than
 * `identity` with 415.
 */
export type PetstoreRequestBody =
  | { kind: 'none' }
  | { kind: 'bytes'; bytes: Uint8Array | string }
  | { kind: 'stream'; read(limitBytes: number): Promise<BodyReadResult> }
  | { kind: 'parsed'; value: unknown }
  | { kind: 'unreadable'; reason: 'too_large' | 'unsupported_encoding' | 'malformed' };

/**
 * A plain HTTP request.
 *
 * - `method`: e.g. `GET` (case-insensitive).
 * - `path`: the path below the API prefix, e.g. `/categories` for `/v1/categories`; a query string is ignored.
 * - `mountPath`: where the API is mounted, the part of the URL's path above `path` (`/v1`, `/api/petstore`; `''` at
 *   the root). The description's default server, the reference page's requests and the traced route follow it.
 *   Default: the petstore's `prefix` option. The adapters, `petstore.fetch` and `petstoreNodeHandler` set it.
 * - `headers`: by lowercase name. A header sent several times is an array (or one comma-joined string): several
 *   `Authorization` headers count as an invalid key, several `Content-Type` headers as an invalid content
 *   type. Node's `request.headers` keeps only the first of these; `nodeRequestHeaders` (in
 *   `@petstore/core/node`) restores them from `rawHeaders`.
 * - `body`: see {@link PetstoreRequestBody}; default `none`.
 * - `clientAddress`: the client's IP address, for the anonymous rate limit.
 * - `logger`: a pino-style logger for this request (Fastify's `request.log`); events are logged through it.
 * - `signal`: aborted when the client goes away before the answer is sent; handed to host handlers
 *   (`HostOperationContext.signal`). `nodePetstoreRequest` and the Fetch entry set it.
 * - `headersIncomplete`: `true` when the server dropped header fields past its limit, so `headers` may lack
 *   a second `Authorization` or `Content-Type`; the API then answers 431 `header_fields_too_large` and runs
 *   nothing. Node 20 drops fields past `server.maxHeadersCount` without a word (Node 22 and later answer 431
 *   themselves); `nodeHeadersCutOff` (in `@petstore/core/node`) tells.
 */
export interface PetstoreRequest {
  method: string;
  path: string;
  mountPath?: string | undefined;
  headers: PetstoreHeaders;
  body?: PetstoreRequestBody;
  clientAddress?: string | undefined;
  logger?: PetstoreLogger | undefined;
  headersIncomplete?: boolean | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * A plain HTTP response: `status`, headers by lowercase name, and the body as JSON text (absent for HEAD).
 * Every response the API writes a body for carries `content-type: application/json; charset=utf-8`, and every
 * response after rate limiting has run carries the rate-limit headers (a 503 from a failing rate-limit store
 * does not).
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#headers
 */
export interface PetstoreResponse {
  status: number;
  headers: Record<string, string>;
  body: string | undefined;
}
