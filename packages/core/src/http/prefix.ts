/**
 * Where the API lives in a server's URL space: the one notion of "under the prefix" shared by the Fetch
 * entry and the Node layer.
 */

import { errorBody } from '../errors.js';
import type { PetstoreResponse } from './types.js';

/** Where the API is mounted unless told otherwise: every path of the service is under `/v1`. */
export const DEFAULT_PREFIX = '/v1';

// RFC 9112 §3.2.2: absolute-form is `scheme://authority` followed by the path and query.
const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/**
 * The origin form (`/path?query`) of a request target (RFC 9112 §3.2): an absolute-form target
 * (`http://host:port/v1/categories`, which a server must accept, RFC 9112 §3.2.2) loses its scheme and
 * authority; an origin-form target is returned as it is; anything else (`*`) is returned unchanged, and no
 * operation matches it.
 */
export function originFormTarget(target: string): string {
  if (target.charCodeAt(0) === 0x2f /* / */) return target;
  const match = ABSOLUTE_FORM.exec(target);
  if (match === null) return target;
  const rest = target.slice(match[0].length);
  return rest.charCodeAt(0) === 0x2f ? rest : `/${rest}`;
}

/**
 * The part of an origin-form target below `prefix` (`/categories?x=1` for `/v1/categories?x=1`), or
 * `undefined` when the target is not under it.
 *
 * Under the prefix means: the prefix itself, or the prefix followed by `/` or `?` — as every router reads a
 * mount path — or by percent-encoding that does not decode (`/v1%c0%afcategories`, an overlong encoding of
 * `/`; `/v1%zz`). Such a target has no well-defined path, so no router can place it; since it begins with the
 * API's prefix it is answered by the API (404, counted, with the rate-limit headers), not by a framework's
 * generic error. A well-formed escape (`/v1%2fcategories`) is a different path segment, outside the prefix.
 *
 * @param prefix `''` (everything is under it) or a path starting with `/` and not ending with `/`.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#overview
 */
export function pathBelowPrefix(target: string, prefix: string): string | undefined {
  if (prefix === '') return target;
  if (!target.startsWith(prefix)) return undefined;
  const next = target.charCodeAt(prefix.length);
  if (Number.isNaN(next)) return '/';
  if (next === 0x2f /* / */) return target.slice(prefix.length);
  if (next === 0x3f /* ? */) return `/${target.slice(prefix.length)}`;
  if (next === 0x25 /* % */ && !decodes(firstSegment(target, prefix.length))) return target.slice(prefix.length);
  return undefined;
}

/** The path segment of `target` from `start` to the next `/` or `?` (or the end). */
function firstSegment(target: string, start: number): string {
  let end = start;
  while (end < target.length && target[end] !== '/' && target[end] !== '?') end++;
  return target.slice(start, end);
}

function decodes(text: string): boolean {
  try {
    decodeURIComponent(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * The answer for a path outside the prefix, where a server has nothing else to serve: 404 with the Error body
 * and no rate-limit headers (the request is not the API's, so it is not counted).
 */
export function notFoundOutsideThePrefix(): PetstoreResponse {
  return {
    status: 404,
    headers: { 'content-type': 'application/json; charset=utf-8' },
    body: JSON.stringify(errorBody('not_found', 'There is no operation at this path.')),
  };
}
