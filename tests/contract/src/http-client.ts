/**
 * The client side of the contract suite: requests over a real socket (http-request.ts), and the assertions every
 * answer of the API must satisfy (docs/http-api.md: the Error body, the rate-limit headers).
 */
import { expect } from 'vitest';
import { httpRequest, type HttpAnswer } from './http-request.js';
import type { RunningServer } from './servers.js';

/** One answer, read completely: status, headers, and the body as text ('' when there is none). */
export type Answer = HttpAnswer;

/** Options of {@link call}. */
export interface CallOptions {
  method?: string;
  /** API key sent as `Authorization: Bearer <key>`. */
  apiKey?: string;
  /** Other headers (e.g. a raw `authorization`, or `content-type`). */
  headers?: Record<string, string>;
  /** JSON value sent with `Content-Type: application/json`. */
  json?: unknown;
  /** Raw body, sent with the Content-Type given in `headers`, or none. */
  body?: string | Uint8Array<ArrayBuffer>;
}

/** Sends one request to `server` and reads the whole answer. */
export async function call(server: RunningServer, path: string, options: CallOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(options.headers ?? {})) headers[name.toLowerCase()] = value;
  if (options.apiKey !== undefined) headers['authorization'] = `Bearer ${options.apiKey}`;
  let body = options.body;
  if (options.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.json);
  }
  return httpRequest(`${server.origin}${path}`, { method: options.method ?? 'GET', headers, body });
}

/** The answer's body parsed as JSON. */
export function jsonOf(answer: Answer): unknown {
  return JSON.parse(answer.text) as unknown;
}

/** A whole number header value. */
export function intHeader(answer: Answer, name: string): number {
  const value = answer.headers.get(name);
  expect(value, `header ${name}`).toMatch(/^\d+$/);
  return Number(value);
}

/**
 * Asserts the three X-RateLimit-* headers (docs/http-api.md, "Headers"): whole numbers, remaining ≤ limit, and a reset in Unix
 * seconds after the server's `now` (its fake clock) and no later than a day after it. Two assertions, not one per
 * fact: the suites call this for almost every answer.
 * @returns the three values.
 */
export function expectRateLimitHeaders(answer: Answer, server: RunningServer) {
  const texts = {
    limit: answer.headers.get('x-ratelimit-limit'),
    remaining: answer.headers.get('x-ratelimit-remaining'),
    reset: answer.headers.get('x-ratelimit-reset'),
  };
  const wholeNumber = expect.stringMatching(/^\d+$/);
  expect(texts, 'the X-RateLimit-* headers').toEqual({ limit: wholeNumber, remaining: wholeNumber, reset: wholeNumber });
  const [limit, remaining, reset] = [Number(texts.limit), Number(texts.remaining), Number(texts.reset)];
  const nowSeconds = server.clock.now() / 1000;
  expect(
    { remainingAtMostLimit: remaining <= limit, resetAfterNow: reset > nowSeconds, resetWithinADay: reset <= Math.ceil(nowSeconds) + 86_400 },
    `limit ${limit}, remaining ${remaining}, reset ${reset}, the server's now ${nowSeconds} s`,
  ).toEqual({ remainingAtMostLimit: true, resetAfterNow: true, resetWithinADay: true });
  return { limit, remaining, reset };
}

/** Asserts a JSON content type. */
export function expectJsonContentType(answer: Answer): void {
  expect(answer.headers.get('content-type')).toMatch(/^application\/json(;|$)/);
}

/**
 * Asserts an error answer of the API: the status, a JSON content type, a JSON body with exactly `code` (`code` when
 * given), a non-empty `message` and `status` (equal to the HTTP status), and the rate-limit headers.
 */
export function expectError(answer: Answer, server: RunningServer, status: number, code?: string): void {
  expect(answer.status, answer.text).toBe(status);
  expect({ contentType: answer.headers.get('content-type'), body: jsonOf(answer) }, answer.text).toEqual({
    contentType: expect.stringMatching(/^application\/json(;|$)/),
    body: { code: code ?? expect.any(String), message: expect.stringMatching(/\S/), status },
  });
  expectRateLimitHeaders(answer, server);
}

/** Asserts a 429 answer: `rate_limited` Error body, and `Retry-After` a whole number of seconds ≥ 1. */
export function expectRateLimited(answer: Answer, server: RunningServer): number {
  expectError(answer, server, 429, 'rate_limited');
  const retryAfter = intHeader(answer, 'retry-after');
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  return retryAfter;
}

/** Seconds from the server's now to the end of the fixed window of `windowMs` holding it, rounded up. */
export function secondsToWindowEnd(server: RunningServer, windowMs: number): number {
  const now = server.clock.now();
  const end = (Math.floor(now / windowMs) + 1) * windowMs;
  return Math.ceil((end - now) / 1000);
}
