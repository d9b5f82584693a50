/**
 * Helpers for adapters on Node's `http` server (Fastify, Express, plain `node:http`).
 *
 * @packageDocumentation
 */
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import getRawBody from 'raw-body';
import type { PetstoreRequestBody } from './http/types.js';

const NO_BODY: PetstoreRequestBody = Object.freeze({ kind: 'none' });

/**
 * The body of a Node request as a lazily read stream: the pipeline reads it only for operations that take a
 * body, after auth and rate limiting, and stops at the limit (then answers 413).
 *
 * A request that announces no body (no `Transfer-Encoding`, and `Content-Length` absent or 0) is `none`.
 * A stream that was already consumed, aborted, or whose length does not match `Content-Length` reads as
 * `unreadable` (→ 400).
 *
 * @param request the Node request (its headers decide whether there is a body)
 * @param stream where to read the body from; default `request`. Fastify passes its (possibly transformed)
 *   payload stream here.
 */
export function nodeRequestBody(request: IncomingMessage, stream: Readable = request): PetstoreRequestBody {
  if (!nodeRequestHasBody(request)) return NO_BODY;
  return {
    kind: 'stream',
    async read(limitBytes) {
      try {
        const bytes = await getRawBody(stream, {
          limit: limitBytes,
          length: request.headers['content-length'],
        });
        return { ok: true, bytes };
      } catch (error) {
        const type = (error as { type?: unknown }).type;
        return { ok: false, reason: type === 'entity.too.large' ? 'too_large' : 'unreadable' };
      }
    },
  };
}

/**
 * True when a Node request carries a body (RFC 9112 §6.3): a `Transfer-Encoding` header, or a
 * `Content-Length` other than 0.
 */
export function nodeRequestHasBody(request: IncomingMessage): boolean {
  if (request.headers['transfer-encoding'] !== undefined) return true;
  const length = request.headers['content-length'];
  return length !== undefined && length !== '0';
}
