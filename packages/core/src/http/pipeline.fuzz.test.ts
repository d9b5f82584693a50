/**
 * Property-based fuzzing of `handle`: generated requests — well-formed ones, and hostile methods, paths,
 * headers and bodies (see test-support/fuzz-arbitraries.ts) — sent to a petstore on in-test stores. Whatever the request:
 *
 * 1. `handle` answers (never throws) and never with a 5xx: the memory stores do not fail, and both host
 *    operations have handlers;
 * 2. every answer is JSON; an error answer has exactly the Error body `{ code, message, status }`, its status
 *    the answer's and its code one of the closed set (HEAD answers have no body);
 * 3. every answer carries the three `X-RateLimit-*` headers as whole numbers;
 * 4. a category is created by a 201 answer, exactly one, and by nothing else;
 * 5. no API key or other credential of the request comes back in a header or the body.
 *
 * What a request costs is not asserted here (no test times anything): the benchmark's hostile-bodies section
 * measures the server CPU of every hostile body and holds the worst under its budget (`npm run bench`).
 *
 * After each property, the outcomes seen are checked to include every kind of answer the checks above
 * distinguish, so no check is left unexercised by the generators.
 */
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { staticApiKeys } from '../auth/api-key.js';
import { ERROR_CODES, ERROR_STATUS, PetstoreError, type ErrorCode } from '../errors.js';
import { testRateLimitStore } from '../../test-support/rate-limit-store.js';
import {
  ENTERPRISE_KEY,
  HOSTILE_SHAPES,
  MEBIBYTE,
  VALID_KEYS,
  anyCase,
  buildRequest,
  byteLengthOf,
  countFor,
  hostileBodyCase,
  shapeNamed,
  streamOf,
  type BuiltRequest,
} from '../../test-support/fuzz-arbitraries.js';
import type { HostOperationHandler } from './host-operations.js';
import { FREE_KEY, ONE_PER_MINUTE_KEY, testPetstore, type TestPetstore } from '../../test-support/petstore.js';
import type { PetstoreRequest, PetstoreResponse } from './types.js';

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
const RATE_LIMIT_HEADERS = ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset'] as const;
const WHOLE_NUMBER = /^(0|[1-9][0-9]*)$/;
/** Stands for a missing header in a failed match. */
const MISSING = '(missing)';
/** Answers given before the body is looked at: a `stream` body must not have been read for them. */
const BEFORE_BODY = [401, 404, 405, 410, 417, 429];

/** Handlers for both host operations, so that no answer is a 501. Odd pet ids are not found. */
const HOST_HANDLERS: { getPetById: HostOperationHandler; listStoreOrders: HostOperationHandler } = {
  getPetById: ({ params }) => {
    const id = Number(params['petId']);
    if (id % 2 === 1) throw new PetstoreError('not_found', 'There is no pet with this id.');
    return { body: { id, name: 'Rex' } };
  },
  // A Content-Type of its own, which the library's must replace.
  listStoreOrders: () => ({ body: [{ id: 1, status: 'placed' }], headers: { 'Content-Type': 'text/plain', 'X-Orders': '1' } }),
};

/**
 * A fresh petstore on 2026-01-01: an Enterprise key with limits no run reaches, the Free key, a key allowed
 * one request per minute, and a small anonymous allowance with quick bans, so that 429 answers happen too.
 */
function fuzzPetstore(): TestPetstore {
  return testPetstore({
    apiKeys: staticApiKeys([
      { key: ENTERPRISE_KEY, plan: 'enterprise', limits: { requestsPerMinute: 1_000_000, requestsPerDay: 100_000_000 } },
      { key: FREE_KEY, plan: 'free' },
      { key: ONE_PER_MINUTE_KEY, plan: 'enterprise', limits: { requestsPerMinute: 1, requestsPerDay: 100 } },
    ]),
    rateLimit: {
      store: testRateLimitStore(),
      anonymous: { requestsPerMinute: 3, requestsPerDay: 100 },
      ban: { rejectedThreshold: 2, intervalMs: 60_000, durationMs: 15 * 60_000 },
    },
    handlers: HOST_HANDLERS,
    // A sunset the clock jumps can reach, so that 410 answers happen too.
    deprecations: { getPetById: { deprecatedAtMs: Date.UTC(2026, 0, 1), sunsetAtMs: Date.UTC(2027, 0, 1) } },
  });
}

/** What an answer was, for the tally of outcomes: its status, and its error code when it has a body. */
type Outcome = string;

/** Sends one request and checks every invariant on its answer; returns the outcomes it showed. */
async function sendAndCheck(store: TestPetstore, built: BuiltRequest): Promise<Outcome[]> {
  const before = store.categories.records.map((category) => ({ ...category }));
  // A rejection fails the property: `handle` must answer.
  const response = await store.petstore.handle(built.request);
  return checkAnswer(store, built, response, before);
}

/**
 * Checks every invariant on one answer, then asserts once that none failed (an `expect` per invariant and request
 * cost more than the rest of the fuzzing). Each failed invariant is a line naming it and what the answer had.
 */
function checkAnswer(
  store: TestPetstore,
  built: BuiltRequest,
  response: PetstoreResponse,
  before: readonly object[],
): Outcome[] {
  const { status, headers, body } = response;
  const head = /^head$/i.test(built.request.method);
  const outcomes: Outcome[] = [head ? `HEAD ${status}` : String(status)];
  const problems: string[] = [];
  const check = (holds: boolean, problem: () => string) => {
    if (!holds) problems.push(problem());
  };
  const show = (value: unknown) => JSON.stringify(value)?.slice(0, 200) ?? String(value);

  // 1. No server error, and nothing reported as an internal error.
  check(Number.isInteger(status) && status >= 200 && status <= 499, () => `status ${status} is not 2xx-4xx`);
  check(store.internalErrors.length === 0, () => `internal errors: ${show(store.internalErrors.map(String))}`);

  // 2. JSON, no body for HEAD; error answers have exactly the Error body.
  check(headers['content-type'] === JSON_CONTENT_TYPE, () => `content-type ${show(headers['content-type'])}`);
  if (head) {
    check(body === undefined, () => `a HEAD answer has a body: ${show(body)}`);
  } else if (typeof body !== 'string') {
    check(false, () => `an answer to a method other than HEAD has no body (${typeof body})`);
  } else {
    const value = JSON.parse(body) as unknown;
    if (status >= 400) {
      const error = value as Record<string, unknown>;
      const code = error['code'];
      check(Object.keys(error).sort().join() === 'code,message,status', () => `Error body fields: ${show(Object.keys(error))}`);
      check(error['status'] === status, () => `Error body status ${show(error['status'])}, answer status ${status}`);
      check((ERROR_CODES as readonly unknown[]).includes(code), () => `Error body code ${show(code)} is not one of the closed set`);
      check(ERROR_STATUS[code as ErrorCode] === status, () => `code ${show(code)} answered with status ${status}`);
      check(typeof error['message'] === 'string' && error['message'].trim() !== '', () => `Error body message ${show(error['message'])}`);
      outcomes.push(`${status} ${String(code)}`);
    }
  }
  // The headers that go with some errors.
  const header = (name: string) => headers[name] ?? MISSING;
  if (status === 401) check(/^Bearer realm="petstore"/.test(header('www-authenticate')), () => `WWW-Authenticate of a 401: ${header('www-authenticate')}`);
  if (status === 405) check(/^[A-Z]+(, [A-Z]+)*$/.test(header('allow')), () => `Allow of a 405: ${header('allow')}`);
  if (status === 415) check(headers['accept-encoding'] === 'identity', () => `Accept-Encoding of a 415: ${header('accept-encoding')}`);
  if (status === 429) check(/^[1-9][0-9]*$/.test(header('retry-after')), () => `Retry-After of a 429: ${header('retry-after')}`);

  // 3. The rate-limit headers, as whole numbers.
  for (const name of RATE_LIMIT_HEADERS) check(WHOLE_NUMBER.test(header(name)), () => `${name}: ${header(name)}`);

  // 4. One category per 201, none otherwise, the others untouched; the 201 answers the category stored.
  const records = store.categories.records;
  check(records.length === before.length + (status === 201 ? 1 : 0), () => `${records.length - before.length} categories stored by a ${status}`);
  check(isDeepStrictEqual(records.slice(0, before.length), before), () => `categories stored before changed: ${show(records.slice(0, before.length))}`);
  if (status === 201) {
    check(isDeepStrictEqual(JSON.parse(body as string), records.at(-1)), () => `the 201 answered ${show(body)}, the store holds ${show(records.at(-1))}`);
    outcomes.push(`201 from ${built.request.body?.kind ?? 'no body'}`);
  }

  // 5. No credential echoed, in a header name, a header value or the body.
  const secrets = [...VALID_KEYS, ...built.secrets];
  for (const text of [...Object.entries(headers).flat(), body ?? '']) {
    check(!secrets.some((secret) => text.includes(secret)), () => `a credential appears in the answer: ${text.slice(0, 200)}`);
  }

  // A streamed body is read at most once, with the body limit, and only once the request was admitted and routed.
  check(built.reads.length <= 1, () => `the body was read ${built.reads.length} times`);
  if (built.reads.length === 1) {
    check(built.reads[0] === store.petstore.bodyLimitBytes, () => `limit passed to read: ${show(built.reads)}`);
    check(!BEFORE_BODY.includes(status), () => `a ${status} after the body was read`);
    outcomes.push('stream read');
  }
  expect(problems, `${built.request.method} ${built.request.path} answered ${status}`).toEqual([]);
  return outcomes;
}

function expectSeen(seen: ReadonlySet<Outcome>, expected: readonly Outcome[]): void {
  const missing = expected.filter((outcome) => !seen.has(outcome));
  expect(missing, `outcomes the generators never produced (seen: ${[...seen].sort().join(', ')})`).toEqual([]);
}

/** One step of a sequence: a request, sent once or (a client retrying) several times in a row. */
const step = fc.record({
  fuzzCase: anyCase,
  times: fc.oneof({ weight: 4, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.integer({ min: 2, max: 5 }) }),
});

describe('handle, fuzzed', () => {
  it('answers every generated request sequence within the invariants', { timeout: 60_000 }, async () => {
    const seen = new Set<Outcome>();
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 4 }), async (steps) => {
        const store = fuzzPetstore();
        for (const { fuzzCase, times } of steps) {
          store.clock.advance(fuzzCase.advanceMs);
          for (let time = 0; time < times; time++) {
            for (const outcome of await sendAndCheck(store, buildRequest(fuzzCase))) seen.add(outcome);
          }
        }
      }),
      { numRuns: 250 },
    );
    expectSeen(seen, [
      '200',
      'HEAD 200',
      '201',
      '201 from bytes',
      '201 from stream',
      '201 from parsed',
      '400 invalid_json',
      '400 invalid_content_type',
      '400 validation_failed',
      '401 unauthorized',
      '404 not_found',
      '405 method_not_allowed',
      '410 gone',
      '413 payload_too_large',
      '415 unsupported_encoding',
      '417 expectation_failed',
      '429 rate_limited',
      '429 temporarily_banned',
      'HEAD 401',
      'HEAD 404',
      'stream read',
    ]);
  });

  it('answers creates with hostile bodies of up to 256 KiB within the invariants', { timeout: 60_000 }, async () => {
    const seen = new Set<Outcome>();
    await fc.assert(
      fc.asyncProperty(hostileBodyCase, async (fuzzCase) => {
        for (const outcome of await sendAndCheck(fuzzPetstore(), buildRequest(fuzzCase))) seen.add(outcome);
      }),
      { numRuns: 120 },
    );
    expectSeen(seen, ['201', '400 invalid_json', '400 validation_failed', 'stream read']);
  });

  // One body of about 1 MiB (the default limit, so it is read in full) per hostile shape, and what it answers.
  const ONE_MIB_ANSWERS: Readonly<Record<string, readonly [number, ErrorCode | undefined]>> = {
    'long name': [400, 'validation_failed'],
    'combining marks': [400, 'validation_failed'],
    'emoji sequences': [400, 'validation_failed'],
    'long description': [400, 'validation_failed'],
    'many keys': [400, 'invalid_json'],
    'deep arrays': [400, 'invalid_json'],
    'deep objects': [400, 'invalid_json'],
    'closers before openers': [400, 'invalid_json'],
    'long array': [400, 'validation_failed'],
    'long number': [400, 'validation_failed'],
    'long top-level number': [400, 'validation_failed'],
    'escaped quotes': [400, 'validation_failed'],
    'brackets in a string': [400, 'validation_failed'],
    'escaped combining marks': [400, 'validation_failed'],
    'escaped control characters': [400, 'validation_failed'],
    'unclosed string': [400, 'invalid_json'],
    'whitespace padding': [201, undefined],
    'invalid UTF-8': [400, 'invalid_json'],
  };
  const ONE_MIB_CASES = HOSTILE_SHAPES.flatMap((shape) =>
    (['bytes', 'stream'] as const).map((kind) => ({ name: shape.name, kind, shape })),
  );

  it.each(ONE_MIB_CASES)('answers a 1 MiB body of $name ($kind) as expected, within the invariants', async ({ name, kind, shape }) => {
    const content = shape.build(countFor(shape, MEBIBYTE));
    const size = byteLengthOf(content);
    expect(size).toBeGreaterThan(MEBIBYTE - 64);
    expect(size).toBeLessThanOrEqual(MEBIBYTE);
    const bytes = typeof content === 'string' ? new TextEncoder().encode(content) : content;
    const reads: number[] = [];
    const request: PetstoreRequest = {
      method: 'POST',
      path: '/categories',
      headers: { authorization: `Bearer ${ENTERPRISE_KEY}`, 'content-type': 'application/json', 'content-length': String(size) },
      body: kind === 'bytes' ? { kind: 'bytes', bytes } : streamOf(bytes, reads),
      clientAddress: '203.0.113.7',
    };
    const store = fuzzPetstore();
    const outcomes = await sendAndCheck(store, { request, size, reads, secrets: [] });
    // A shape missing from the table expects status 0, which no answer has.
    const [status, code] = ONE_MIB_ANSWERS[name] ?? [0, undefined];
    expect(outcomes).toContain(code === undefined ? String(status) : `${status} ${code}`);
  });

  it('answers a valid body just over 1 MiB with 413, creating nothing', async () => {
    const padding = shapeNamed('whitespace padding');
    const text = padding.build(countFor(padding, MEBIBYTE) + 1) as string;
    const size = byteLengthOf(text);
    expect(size).toBeGreaterThan(MEBIBYTE);
    const reads: number[] = [];
    const request: PetstoreRequest = {
      method: 'POST',
      path: '/categories',
      headers: { authorization: `Bearer ${ENTERPRISE_KEY}`, 'content-type': 'application/json' },
      body: streamOf(new TextEncoder().encode(text), reads),
    };
    const outcomes = await sendAndCheck(fuzzPetstore(), { request, size, reads, secrets: [] });
    expect(outcomes).toContain('413 payload_too_large');
  });
});
