/**
 * Content-type check and JSON decoding of request bodies (SPEC §7: invalid JSON or a missing JSON content
 * type give 400). The core owns this so every adapter gives identical answers.
 */
import contentType from 'content-type';
import { PetstoreError } from '../errors.js';
import type { PetstoreHeaders, PetstoreRequestBody } from './types.js';

/** Default request body limit: 1 MiB. */
export const DEFAULT_BODY_LIMIT_BYTES = 1_048_576;

/** First value of a header, or `undefined`. */
export function headerValue(headers: PetstoreHeaders, name: string): string | undefined {
  const value = headers[name];
  return typeof value === 'string' ? value : value?.[0];
}

/**
 * Requires `Content-Type: application/json`, with or without parameters (e.g. `; charset=utf-8`),
 * case-insensitive.
 * @throws PetstoreError `invalid_content_type` when the header is missing, malformed, or another type.
 */
export function assertJsonContentType(headers: PetstoreHeaders): void {
  const header = headerValue(headers, 'content-type');
  if (header === undefined || header.trim() === '') {
    throw new PetstoreError('invalid_content_type', 'The request needs the header Content-Type: application/json.');
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
      throw new PetstoreError('invalid_json', 'The request body is not valid JSON.');
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
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new PetstoreError('invalid_json', 'The request body is not valid JSON.');
  }
}

function tooLarge(limitBytes: number): PetstoreError {
  return new PetstoreError('payload_too_large', `The request body is larger than the limit of ${limitBytes} bytes.`);
}

function emptyBody(): PetstoreError {
  return new PetstoreError('invalid_json', 'The request body is empty; send a JSON object (a NewCategory).');
}
