/**
 * The categories operations, step 8 of the pipeline for `listCategories` and `createCategory` (see
 * pipeline.ts): the list — its paging query, its `ETag` and `If-None-Match` (304), the JSON of the full list kept
 * per list version, the JSON of a frozen list reused; the create, with its body checks; and the create with an
 * `Idempotency-Key`, with the keys in flight on this instance.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#operations
 */
import type { Principal } from '../auth/principal.js';
import { PetstoreError } from '../errors.js';
import { parseNewCategory, type Category, type NewCategory } from '../schemas.js';
import { errorAnswer, jsonAnswer, textAnswer } from './answers.js';
import { bodyEntityTag, ifNoneMatchMatches, listEntityTag, nextPageLink, readListQuery, type ListPageQuery } from './category-list.js';
import { assertJsonContentType, assertSupportedCodings, readJsonBody } from './body.js';
import { newCategoryFingerprint, readIdempotencyKey, scopedIdempotencyKey } from './idempotency.js';
import type { ResolvedOptions } from './petstore-options.js';
import type { PetstoreRequest, PetstoreRequestBody, PetstoreResponse } from './types.js';

/** A list version read started for a list request before it was admitted (see {@link CategoryOperations.startList}). */
export interface ListStart {
  /** The request's paging query, already read (`undefined`: the whole list). */
  page: ListPageQuery | undefined;
  /** The read, checked, its rejection already marked handled (the request may be refused before it is awaited). */
  version: Promise<string>;
  /** The read's place in the order the reads started. */
  readNumber: number;
}

/** The categories operations of one petstore. Both reject with a PetstoreError for a request they refuse. */
export interface CategoryOperations {
  /**
   * Starts the store's list version read for a list request once its key is valid, beside its rate-limit charge;
   * `undefined` (nothing started) for a store without `listVersion` or a paging query that will be refused.
   */
  startList(request: PetstoreRequest): ListStart | undefined;
  /** `start`: the read {@link CategoryOperations.startList} started for this request, if any. */
  listCategories(request: PetstoreRequest, headers: Record<string, string>, start?: ListStart): Promise<PetstoreResponse>;
  createCategory(request: PetstoreRequest, principal: Principal, headers: Record<string, string>): Promise<PetstoreResponse>;
}

const NO_BODY: PetstoreRequestBody = Object.freeze({ kind: 'none' });

/** The longest list version a store may answer, in characters (see CategoryStore.listVersion). */
const MAX_LIST_VERSION_LENGTH = 128;

/** The answer to a list request whose `If-None-Match` names the current tag: 304, no body (RFC 9110 §15.4.5). */
function notModified(headers: Record<string, string>): PetstoreResponse {
  return { status: 304, headers, body: undefined };
}

export function createCategoryOperations({ categories, bodyLimitBytes, retentionMs }: ResolvedOptions): CategoryOperations {
  const listVersion = categories.listVersion?.bind(categories);
  // The JSON of the last frozen list, and its body tag once asked for: a store that answers the same frozen array
  // between writes (the memory store does) has it serialised once, not per request (see CategoryStore.list), and
  // hashed once when it has no list version. A frozen array stays frozen, so the same array object needs no other
  // check.
  let lastFrozen: { list: readonly Category[]; json: string; etag?: string } | undefined;
  const listJson = (list: readonly Category[]): string => {
    if (list === lastFrozen?.list) return lastFrozen.json;
    const json = JSON.stringify(list);
    if (Object.isFrozen(list)) lastFrozen = { list, json };
    return json;
  };
  /** The body tag of a list's JSON; the last frozen list's is kept with it. */
  const tagOf = (json: string): string => {
    if (lastFrozen === undefined || json !== lastFrozen.json) return bodyEntityTag(json);
    lastFrozen.etag ??= bodyEntityTag(json);
    return lastFrozen.etag;
  };

  // The JSON and tag of the full list at one list version: while the store answers that version, the full list is
  // neither read nor serialised again (BENCHMARKS.md, section "List: 100,000 categories"). One entry, the
  // latest version read; a read that started before a newer one was cached does not replace it.
  let fullList: { version: string; json: string; etag: string; readNumber: number } | undefined;
  // Numbers the version reads, in the order they started.
  let versionReads = 0;

  /** The store's list version, checked (see CategoryStore.listVersion). */
  async function readListVersion(read: () => Promise<string>): Promise<string> {
    const version = await read();
    if (typeof version !== 'string' || version.length === 0 || version.length > MAX_LIST_VERSION_LENGTH) {
      throw new TypeError(`CategoryStore.listVersion() must answer a string of 1 to ${MAX_LIST_VERSION_LENGTH} characters`);
    }
    return version;
  }

  /** Starts a version read for a list of `page`, numbered in the order the reads start. */
  function startRead(page: ListPageQuery | undefined, read: () => Promise<string>): ListStart {
    const version = readListVersion(read);
    // Awaited only if the request is admitted (a read started beside the charge); its failure is answered then.
    version.catch(() => undefined);
    return { page, version, readNumber: ++versionReads };
  }

  /** A page of the list: asks for one more than `limit` to tell whether another page follows. */
  async function readPage(page: ListPageQuery, headers: Record<string, string>): Promise<string> {
    const listed = await categories.list({ limit: page.limit + 1, after: page.after });
    if (listed.length <= page.limit) return JSON.stringify(listed);
    const shown = listed.slice(0, page.limit);
    headers['link'] = nextPageLink(page.limit, (shown[shown.length - 1] as Category).id);
    return JSON.stringify(shown);
  }

  /**
   * The list with a list version: the tag comes from the version, read first (a category is visible no later
   * than its version, so the list read after it holds at least what the version promises); a matching
   * `If-None-Match` is answered without reading the list. `read`: the version read, started.
   */
  async function versionedList(request: PetstoreRequest, headers: Record<string, string>, read: ListStart): Promise<PetstoreResponse> {
    const { page, readNumber } = read;
    const version = await read.version;
    const cached = page === undefined && fullList?.version === version ? fullList : undefined;
    const etag = cached?.etag ?? listEntityTag(version, page);
    headers['etag'] = etag;
    if (ifNoneMatchMatches(request.headers['if-none-match'], etag)) return notModified(headers);
    if (page !== undefined) return textAnswer(200, await readPage(page, headers), headers, request.method);
    if (cached !== undefined) return textAnswer(200, cached.json, headers, request.method);
    const json = listJson(await categories.list());
    if (fullList === undefined || fullList.readNumber < readNumber) fullList = { version, json, etag, readNumber };
    return textAnswer(200, json, headers, request.method);
  }

  /**
   * The list without a list version: read and serialised every time (unless the store answers the same frozen
   * array); the tag is a hash of the body.
   */
  async function hashedList(request: PetstoreRequest, page: ListPageQuery | undefined, headers: Record<string, string>): Promise<PetstoreResponse> {
    const json = page === undefined ? listJson(await categories.list()) : await readPage(page, headers);
    const etag = tagOf(json);
    headers['etag'] = etag;
    if (ifNoneMatchMatches(request.headers['if-none-match'], etag)) {
      delete headers['link'];
      return notModified(headers);
    }
    return textAnswer(200, json, headers, request.method);
  }

  // Scoped idempotency keys of the creates this instance is processing: a repeat that arrives meanwhile gets
  // 409. One entry per create in flight, removed when it is answered.
  const createsInFlight = new Set<string>();

  /** The validated NewCategory of a create: Content-Type, codings, the body read within its limit, the schema. */
  async function readNewCategory(request: PetstoreRequest): Promise<NewCategory> {
    const body = request.body ?? NO_BODY;
    assertJsonContentType(request.headers);
    assertSupportedCodings(request.headers, body);
    const json = await readJsonBody(body, request.headers, bodyLimitBytes);
    const parsed = parseNewCategory(json);
    if (!parsed.success) throw new PetstoreError('validation_failed', parsed.message);
    return parsed.value;
  }

  /**
   * A create with an `Idempotency-Key`: 409 while the same key is in flight here; else the store creates and
   * records in one step, or answers the record: a replay (201, the first category, `Idempotent-Replayed: true`)
   * or a mismatch (422). Only a create that succeeded is recorded: a request that failed created nothing and
   * may be retried with its key.
   */
  async function createIdempotently(request: PetstoreRequest, key: string, headers: Record<string, string>): Promise<PetstoreResponse> {
    if (createsInFlight.has(key)) {
      const message = 'A create with this Idempotency-Key is still being processed; retry after 1 second.';
      return errorAnswer('idempotency_key_in_flight', message, headers, request.method, 1);
    }
    createsInFlight.add(key);
    try {
      const newCategory = await readNewCategory(request);
      const result = await categories.createIdempotent(newCategory, { key, fingerprint: newCategoryFingerprint(newCategory), retentionMs });
      if (result.outcome === 'mismatch') {
        const message = 'This Idempotency-Key was used for a create with another body; nothing was created. Send a new key.';
        return errorAnswer('idempotency_key_reused', message, headers, request.method);
      }
      if (result.outcome === 'replayed') headers['idempotent-replayed'] = 'true';
      return jsonAnswer(201, result.category, headers, request.method);
    } finally {
      createsInFlight.delete(key);
    }
  }

  return {
    startList(request) {
      if (listVersion === undefined) return undefined;
      let page: ListPageQuery | undefined;
      try {
        page = readListQuery(request.path);
      } catch {
        return undefined; // refused at step 7, with no store call
      }
      return startRead(page, listVersion);
    },
    async listCategories(request, headers, start) {
      // The query is checked before any store call: a refused page costs nothing (RFC 9110 §13.2.1: a 4xx is
      // answered whatever If-None-Match says).
      if (start !== undefined) return versionedList(request, headers, start);
      const page = readListQuery(request.path);
      return listVersion === undefined ? hashedList(request, page, headers) : versionedList(request, headers, startRead(page, listVersion));
    },
    async createCategory(request, principal, headers) {
      const idempotencyKey = readIdempotencyKey(request.headers);
      if (idempotencyKey === undefined) {
        return jsonAnswer(201, await categories.create(await readNewCategory(request)), headers, request.method);
      }
      return createIdempotently(request, scopedIdempotencyKey(principal.keyId, idempotencyKey), headers);
    },
  };
}
