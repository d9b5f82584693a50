/**
 * The parts of `GET <prefix>/categories` beyond reading the store: the paging query (`limit`, `after`), the
 * entity tag of an answer, `If-None-Match` (RFC 9110 §13.1.2) and the `Link` to the next page (RFC 8288).
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#paging
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#etag-and-if-none-match
 */
import { hash } from 'node:crypto';
import { PetstoreError } from '../errors.js';
import { queryStringOf } from './operations.js';
import type { PetstoreHeaders } from './types.js';

/** The largest `limit` of a page of `GET /categories`: 1000 categories (about 60 KB of JSON at 60 bytes each). */
export const MAX_CATEGORY_PAGE_LIMIT = 1000;

/** The `limit` of a page of `GET /categories` that gives `after` without `limit`: 100 categories. */
export const DEFAULT_CATEGORY_PAGE_LIMIT = 100;

/** A page of the list as the request asked for it: both numbers checked (see {@link readListQuery}). */
export interface ListPageQuery {
  /** 1 to {@link MAX_CATEGORY_PAGE_LIMIT}. */
  limit: number;
  /** A safe integer ≥ 0: only ids above it. */
  after: number;
}

// Digits only (no sign, no exponent, no fraction), at most as many as the largest value has: the length is checked
// before anything is converted, so an oversized value costs one comparison.
const LIMIT_DIGITS = /^[0-9]{1,4}$/;
const AFTER_DIGITS = /^[0-9]{1,16}$/;

const LIMIT_MESSAGE = `limit must be a whole number from 1 to ${MAX_CATEGORY_PAGE_LIMIT}, sent once.`;
const AFTER_MESSAGE = `after must be a whole number from 0 to ${Number.MAX_SAFE_INTEGER} (a category id), sent once.`;

/**
 * The page a request below the prefix asks for, or `undefined` for the whole list (neither `limit` nor `after` in
 * the query). `after` alone asks for a page of {@link DEFAULT_CATEGORY_PAGE_LIMIT}; `limit` alone for the first
 * page. Other query parameters are ignored, as before paging existed.
 * @param path the request's path below the prefix, with its query string (`/categories?limit=10&after=20`)
 * @throws PetstoreError `validation_failed` (400) when `limit` or `after` is sent more than once, is empty, is not
 *   decimal digits, or is out of range (`limit` 1–1000, `after` 0–2^53 − 1).
 */
export function readListQuery(path: string): ListPageQuery | undefined {
  const queryString = queryStringOf(path);
  if (queryString === undefined) return undefined;
  const query = new URLSearchParams(queryString);
  const limits = query.getAll('limit');
  const afters = query.getAll('after');
  if (limits.length === 0 && afters.length === 0) return undefined;
  let limit = DEFAULT_CATEGORY_PAGE_LIMIT;
  if (limits.length > 0) {
    const text = limits[0] as string;
    if (limits.length > 1 || !LIMIT_DIGITS.test(text)) throw new PetstoreError('validation_failed', LIMIT_MESSAGE);
    limit = Number(text);
    if (limit < 1 || limit > MAX_CATEGORY_PAGE_LIMIT) throw new PetstoreError('validation_failed', LIMIT_MESSAGE);
  }
  let after = 0;
  if (afters.length > 0) {
    const text = afters[0] as string;
    if (afters.length > 1 || !AFTER_DIGITS.test(text)) throw new PetstoreError('validation_failed', AFTER_MESSAGE);
    after = Number(text);
    if (!Number.isSafeInteger(after)) throw new PetstoreError('validation_failed', AFTER_MESSAGE);
  }
  return { limit, after };
}

/**
 * The `Link` header of a page after which more categories remain: a reference relative to the request's own URI
 * holding only the query (`<?limit=100&after=42>; rel="next"`), so it resolves under whatever path the API is
 * mounted at (RFC 3986 §5.2, RFC 8288 §3.1).
 */
export function nextPageLink(limit: number, lastId: number): string {
  return `<?limit=${limit}&after=${lastId}>; rel="next"`;
}

/**
 * A strong entity tag (RFC 9110 §8.8.3) of the list answer for the store's list version and the page asked for
 * (`undefined`: the whole list): 22 base64url characters of SHA-256 in double quotes. The page is part of the
 * input, so two pages of one version never share a tag; the version itself is never shown.
 */
export function listEntityTag(version: string, page: ListPageQuery | undefined): string {
  const input = page === undefined ? `v\0${version}` : `v\0${version}\0${page.limit}\0${page.after}`;
  return `"${hash('sha256', input, 'base64url').slice(0, 22)}"`;
}

/** A strong entity tag of a body, for a store without `listVersion`: 22 base64url characters of its SHA-256. */
export function bodyEntityTag(body: string): string {
  return `"${hash('sha256', `b\0${body}`, 'base64url').slice(0, 22)}"`;
}

/** The longest `If-None-Match` read, in characters: past it the header is ignored (no match). */
const MAX_IF_NONE_MATCH_LENGTH = 8192;

// One list element: optional whitespace, an entity-tag (weak or not), optional whitespace, then a comma or the end.
const ENTITY_TAG_ELEMENT = /[ \t]*(?:W\/)?("[\x21\x23-\x7e\x80-\uffff]*")[ \t]*(?:,|$)/y;
const EMPTY_ELEMENT = /[ \t]*,/y;

/**
 * Whether `If-None-Match` names the current representation, whose strong tag is `etag` (RFC 9110 §13.1.2): `*`,
 * or a list of entity tags of which one matches by the weak comparison (`W/"x"` matches `"x"`, §8.8.3.2). Several
 * header lines count as one list. A value that is not such a list (or is longer than 8192 characters) is
 * ignored: no match, so the full answer is sent.
 */
export function ifNoneMatchMatches(value: PetstoreHeaders[string], etag: string): boolean {
  if (value === undefined) return false;
  const text = typeof value === 'string' ? value : value.join(', ');
  if (text.length > MAX_IF_NONE_MATCH_LENGTH) return false;
  if (text.trim() === '*') return true;
  let matched = false;
  let position = 0;
  while (position < text.length) {
    EMPTY_ELEMENT.lastIndex = position;
    if (EMPTY_ELEMENT.test(text)) {
      position = EMPTY_ELEMENT.lastIndex;
      continue;
    }
    ENTITY_TAG_ELEMENT.lastIndex = position;
    const element = ENTITY_TAG_ELEMENT.exec(text);
    if (element === null) return text.slice(position).trim() === '' && matched;
    if (element[1] === etag) matched = true;
    position = ENTITY_TAG_ELEMENT.lastIndex;
  }
  return matched;
}
