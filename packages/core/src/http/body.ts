/**
 * The checks and decoding of request bodies: content type (400 without `application/json`), transfer and
 * content codings (415 for anything the API does not decode), size (413), JSON (400). The core owns this so
 * every adapter gives identical answers.
 *
 * Every step is bounded by the size of its input, linearly: header values are length-checked before they
 * are parsed, and a body's nesting depth is checked in one pass before `JSON.parse` (whose cost per nesting
 * level is high).
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#bodies
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#input-bounds
 */
import contentType from 'content-type';
import { PetstoreError } from '../errors.js';
import type { PetstoreHeaders, PetstoreRequestBody } from './types.js';

/**
 * Default request body limit: 1 MiB (1,048,576 bytes); larger bodies are answered 413.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#input-bounds
 */
export const DEFAULT_BODY_LIMIT_BYTES = 1_048_576;

/** Longest `Content-Type` value accepted, in characters; longer values are refused before parsing. */
export const MAX_CONTENT_TYPE_LENGTH = 256;

/**
 * Deepest nesting of JSON arrays and objects accepted in a request body (RFC 8259 §9 lets a parser set
 * limits). A NewCategory is a flat object, so the bound only keeps `JSON.parse` cheap: nesting costs it time
 * per level, so a 1 MiB body of brackets would hold the event loop long (the cost with the bound:
 * BENCHMARKS.md, section "Hostile bodies: POST /v1/categories, up to 1 MiB", rows "deep nesting").
 */
export const MAX_JSON_DEPTH = 32;

/**
 * Most object members (`"key": value` pairs, all objects of the body together) accepted in a request body.
 * A NewCategory has at most two; the bound keeps `JSON.parse` cheap: distinct keys cost it time each, so a
 * 1 MiB body of 100,000 keys would hold the event loop long (the cost with the bound:
 * BENCHMARKS.md, section "Hostile bodies: POST /v1/categories, up to 1 MiB", row "100,000 distinct keys").
 */
export const MAX_JSON_MEMBERS = 1000;

/** First value of a header, or `undefined`. */
export function headerValue(headers: PetstoreHeaders, name: string): string | undefined {
  const value = headers[name];
  return typeof value === 'string' ? value : value?.[0];
}

/**
 * Requires `Content-Type: application/json`, with or without parameters (e.g. `; charset=utf-8`),
 * case-insensitive.
 * @throws PetstoreError `invalid_content_type` when the header is missing, sent more than once, longer than
 *   {@link MAX_CONTENT_TYPE_LENGTH}, malformed, or another type.
 */
export function assertJsonContentType(headers: PetstoreHeaders): void {
  const value = headers['content-type'];
  if (typeof value === 'object' && value.length > 1) {
    throw new PetstoreError('invalid_content_type', 'The request has several Content-Type headers; send one: application/json.');
  }
  const header = headerValue(headers, 'content-type');
  if (header === undefined || header.trim() === '') {
    throw new PetstoreError('invalid_content_type', 'The request needs the header Content-Type: application/json.');
  }
  if (header.length > MAX_CONTENT_TYPE_LENGTH) {
    throw new PetstoreError('invalid_content_type', 'The Content-Type header is too long; send application/json.');
  }
  let type: string;
  try {
    type = contentType.parse(header).type;
  } catch {
    throw new PetstoreError('invalid_content_type', 'The Content-Type header is malformed; send application/json.');
  }
  if (type !== 'application/json') {
    throw new PetstoreError('invalid_content_type', 'The request body must be sent as Content-Type: application/json.');
  }
}

/** Longest `Transfer-Encoding` or `Content-Encoding` value read, in characters; longer ones are refused. */
const MAX_CODING_HEADER_LENGTH = 256;

/**
 * Refuses a body the API would have to decode: a transfer coding other than `chunked` alone (RFC 9112 §7;
 * the server has already removed `chunked`), or — for a body the API reads itself (`stream`) — a content
 * coding other than `identity` (RFC 9110 §8.4). A body the host parsed (`parsed`, `bytes`, `unreadable`) is
 * taken as already decoded: host body parsers such as Express's decode gzip/deflate themselves.
 *
 * The answer is 415 with `Accept-Encoding: identity` (RFC 9110 §15.5.16, §12.5.3). For a transfer coding,
 * RFC 9112 §6.1 suggests 501; the API answers 415 too, as the request is at fault and a 5xx would read as a
 * server failure to clients and monitoring.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#codings
 * @throws PetstoreError `unsupported_encoding`
 */
export function assertSupportedCodings(headers: PetstoreHeaders, body: PetstoreRequestBody): void {
  const transfer = codings(headers['transfer-encoding']);
  if (transfer !== undefined && (transfer.length !== 1 || transfer[0] !== 'chunked')) {
    throw unsupportedEncoding('The request body is sent with a transfer coding the API does not decode; send it with Content-Length or Transfer-Encoding: chunked alone.');
  }
  if (body.kind !== 'stream') return;
  const content = codings(headers['content-encoding']);
  if (content !== undefined && content.some((coding) => coding !== 'identity')) {
    throw unsupportedEncoding('The request body is sent with a content coding the API does not decode; send it uncompressed (identity).');
  }
}

/**
 * The codings of a `Transfer-Encoding` / `Content-Encoding` header, lower case, parameters dropped; `undefined`
 * when absent or empty; `['(too long)']` for a value over {@link MAX_CODING_HEADER_LENGTH}.
 */
function codings(value: string | readonly string[] | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const text = typeof value === 'string' ? value : value.join(',');
  if (text.length > MAX_CODING_HEADER_LENGTH) return ['(too long)'];
  const list = text
    .split(',')
    .map((coding) => (coding.split(';')[0] as string).trim().toLowerCase())
    .filter((coding) => coding !== '');
  return list.length === 0 ? undefined : list;
}

function unsupportedEncoding(message: string): PetstoreError {
  return new PetstoreError('unsupported_encoding', message);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Reads, decodes (UTF-8; a BOM is ignored) and parses a JSON request body, enforcing `limitBytes`.
 *
 * @returns the parsed JSON value (plain `JSON.parse`: `__proto__` becomes an ordinary own property, which the
 *   NewCategory schema then rejects as an unknown field; nothing is merged, so nothing is polluted).
 * @throws PetstoreError `payload_too_large` over the limit (also when `Content-Length` announces it);
 *   `invalid_json` when the body is empty, not UTF-8, not JSON, or could not be read.
 */
export async function readJsonBody(
  body: PetstoreRequestBody,
  headers: PetstoreHeaders,
  limitBytes: number,
): Promise<unknown> {
  const declaredLength = Number(headerValue(headers, 'content-length'));
  if (Number.isFinite(declaredLength) && declaredLength > limitBytes) throw tooLarge(limitBytes);

  let bytes: Uint8Array;
  switch (body.kind) {
    case 'parsed':
      return body.value;
    case 'unreadable':
      // The host's own body parser refused the body; its limit may be lower than ours.
      if (body.reason === 'too_large') {
        throw new PetstoreError('payload_too_large', 'The request body is larger than the server accepts.');
      }
      if (body.reason === 'unsupported_encoding') {
        throw unsupportedEncoding('The request body is sent with a content coding the server does not decode.');
      }
      throw new PetstoreError('invalid_json', 'The request body could not be read: it is not valid JSON, or its content coding does not decode.');
    case 'none':
      throw emptyBody();
    case 'bytes':
      bytes = typeof body.bytes === 'string' ? new TextEncoder().encode(body.bytes) : body.bytes;
      if (bytes.byteLength > limitBytes) throw tooLarge(limitBytes);
      break;
    case 'stream': {
      const read = await body.read(limitBytes);
      if (!read.ok) {
        if (read.reason === 'too_large') throw tooLarge(limitBytes);
        throw new PetstoreError('invalid_json', 'The request body could not be read completely.');
      }
      bytes = read.bytes;
      break;
    }
  }

  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new PetstoreError('invalid_json', 'The request body is not valid UTF-8 text.');
  }
  if (text.trim() === '') throw emptyBody();
  const exceeded = exceededJsonBound(text);
  if (exceeded === 'depth') {
    throw new PetstoreError('invalid_json', `The request body nests arrays or objects more than ${MAX_JSON_DEPTH} levels deep; it was not parsed.`);
  }
  if (exceeded === 'members') {
    throw new PetstoreError('invalid_json', `The request body has more than ${MAX_JSON_MEMBERS} object members; it was not parsed.`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new PetstoreError('invalid_json', 'The request body is not valid JSON.');
  }
}

/**
 * Which bound of a JSON text is exceeded, judged without parsing it: nesting of arrays and objects deeper
 * than {@link MAX_JSON_DEPTH} (`'depth'`), or more than {@link MAX_JSON_MEMBERS} object members (`'members'`,
 * counted by their colons); brackets and colons inside strings do not count. One pass, no allocation; the
 * text need not be valid JSON (`JSON.parse` judges that afterwards).
 */
export function exceededJsonBound(text: string): 'depth' | 'members' | undefined {
  let depth = 0;
  let members = 0;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (inString) {
      if (code === 0x5c /* \ */) index++; // the escaped character cannot end the string
      else if (code === 0x22 /* " */) inString = false;
    } else if (code === 0x22) {
      inString = true;
    } else if (code === 0x5b /* [ */ || code === 0x7b /* { */) {
      if (++depth > MAX_JSON_DEPTH) return 'depth';
    } else if (code === 0x5d /* ] */ || code === 0x7d /* } */) {
      depth--;
    } else if (code === 0x3a /* : */) {
      if (++members > MAX_JSON_MEMBERS) return 'members';
    }
  }
  return undefined;
}

function tooLarge(limitBytes: number): PetstoreError {
  return new PetstoreError('payload_too_large', `The request body is larger than the limit of ${limitBytes} bytes.`);
}

function emptyBody(): PetstoreError {
  return new PetstoreError('invalid_json', 'The request body is empty; send a JSON object (a NewCategory).');
}
