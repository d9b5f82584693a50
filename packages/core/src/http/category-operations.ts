/**
 * The categories operations, step 8 of the pipeline for `listCategories` and `createCategory` (see
 * pipeline.ts): the list, with the JSON of a frozen list reused; the create, with its body checks; and the
 * create with an `Idempotency-Key`, with the keys in flight on this instance.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#operations
 */
import type { Principal } from '../auth/principal.js';
import { PetstoreError } from '../errors.js';
import { parseNewCategory, type Category, type NewCategory } from '../schemas.js';
import { errorAnswer, jsonAnswer, textAnswer } from './answers.js';
import { assertJsonContentType, assertSupportedCodings, readJsonBody } from './body.js';
import { newCategoryFingerprint, readIdempotencyKey, scopedIdempotencyKey } from './idempotency.js';
import type { ResolvedOptions } from './petstore-options.js';
import type { PetstoreRequest, PetstoreRequestBody, PetstoreResponse } from './types.js';

/** The categories operations of one petstore. Both reject with a PetstoreError for a request they refuse. */
export interface CategoryOperations {
  listCategories(request: PetstoreRequest, headers: Record<string, string>): Promise<PetstoreResponse>;
  createCategory(request: PetstoreRequest, principal: Principal, headers: Record<string, string>): Promise<PetstoreResponse>;
}

const NO_BODY: PetstoreRequestBody = Object.freeze({ kind: 'none' });

export function createCategoryOperations({ categories, bodyLimitBytes, retentionMs }: ResolvedOptions): CategoryOperations {
  // The JSON of the last frozen list: a store that answers the same frozen array between writes (the memory
  // store does) has it serialised once, not per request (see CategoryStore.list). A frozen array stays frozen,
  // so the same array object needs no other check. The saving grows with the list; measured with
  // benchmarks/src/pipeline-bench.ts against the server CPU per request of BENCHMARKS.md, section "HTTP: GET
  // /v1/categories, authenticated, three categories".
  let lastList: readonly Category[] | undefined;
  let lastListJson = '';
  const listJson = (list: readonly Category[]): string => {
    if (list === lastList) return lastListJson;
    const json = JSON.stringify(list);
    if (Object.isFrozen(list)) {
      lastList = list;
      lastListJson = json;
    }
    return json;
  };

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
    async listCategories(request, headers) {
      return textAnswer(200, listJson(await categories.list()), headers, request.method);
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
