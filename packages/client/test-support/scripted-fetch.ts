/**
 * Test support for this package's own tests (outside src/, not published): a fetch that plays a script of
 * answers and failures, and a fake clock whose `sleep` moves time instead of waiting.
 */
import { createPetstoreClient, type PetstoreClientOptions } from '../src/client.js';
import { isPetstoreClientError, type PetstoreClientError } from '../src/errors.js';
import type { PetstoreFetch, PetstoreFetchInit, PetstoreFetchResponse } from '../src/fetch-types.js';

/**
 * One scripted step: an answer, a rejection of fetch itself (no answer received), or a fetch that never
 * answers.
 *
 * - `bodyHangs`: the headers arrive but the body never does; reading it rejects when the signal aborts.
 * - `hang: 'until-aborted'`: no answer; the fetch rejects when its `init.signal` aborts, with `abortError`
 *   when given (e.g. node-fetch's AbortError) and the signal's reason otherwise, as the global fetch does.
 * - `hang: 'forever'`: no answer and no rejection, whatever the signal does (a fetch that ignores it).
 */
export type ScriptStep =
  | { status: number; headers?: Record<string, string>; body?: unknown; bodyError?: unknown; bodyHangs?: boolean; takesMs?: number }
  | { reject: unknown; takesMs?: number }
  | { hang: 'until-aborted'; abortError?: unknown }
  | { hang: 'forever' };

/** A request the scripted fetch received, with the fake time at which it was sent. */
export interface RecordedRequest {
  url: string;
  init: PetstoreFetchInit;
  atMs: number;
}

/**
 * A clock at `startMs` that only moves when `sleep` is called (or a step takes time). `sleeps` records each
 * wait's ms, `sleepSignals` the signal each wait was given.
 */
export function fakeTime(startMs = 1_800_000_000_000) {
  let nowMs = startMs;
  const sleeps: number[] = [];
  const sleepSignals: Array<AbortSignal | undefined> = [];
  return {
    sleeps,
    sleepSignals,
    now: () => nowMs,
    sleep: async (ms: number, signal?: AbortSignal) => {
      sleeps.push(ms);
      sleepSignals.push(signal);
      nowMs += ms;
    },
    advance: (ms: number) => {
      nowMs += ms;
    },
  };
}

/** Rate-limit headers as the server sends them. */
export function rateLimitHeaders(limit: number, remaining: number, resetAtSeconds: number): Record<string, string> {
  return {
    'x-ratelimit-limit': String(limit),
    'x-ratelimit-remaining': String(remaining),
    'x-ratelimit-reset': String(resetAtSeconds),
  };
}

/** An Error body answer with the given status and extra headers. */
export function errorAnswer(status: number, code: string, headers: Record<string, string> = {}): ScriptStep {
  return { status, headers: { 'content-type': 'application/json', ...headers }, body: { code, message: `${code} message`, status } };
}

/** A promise that rejects with `error` (the signal's reason by default) when `signal` aborts, and never settles otherwise. */
function rejectOnAbort(signal: AbortSignal | undefined, error?: unknown): Promise<never> {
  return new Promise((_, reject) => {
    const fail = () => reject(error ?? signal?.reason);
    if (signal?.aborted) fail();
    else signal?.addEventListener('abort', fail, { once: true });
  });
}

/**
 * A fetch answering each call with the next step of `script` (the last step repeats when the script runs
 * out). Bodies that are not strings are sent as JSON. `requested(n)` resolves once `n` requests were sent.
 */
export function scriptedFetch(script: ScriptStep[], time?: { now(): number; advance(ms: number): void }) {
  const requests: RecordedRequest[] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const fetch: PetstoreFetch = async (url, init) => {
    requests.push({ url, init, atMs: time?.now() ?? 0 });
    for (const waiter of waiters.filter((w) => w.count <= requests.length)) waiter.resolve();
    const step = script[Math.min(requests.length - 1, script.length - 1)];
    if (step === undefined) throw new Error('empty script');
    if ('hang' in step) return step.hang === 'forever' ? new Promise<never>(() => {}) : rejectOnAbort(init.signal, step.abortError);
    if (step.takesMs !== undefined) time?.advance(step.takesMs);
    if ('reject' in step) throw step.reject;
    const headers = new Map(Object.entries(step.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]));
    const response: PetstoreFetchResponse = {
      status: step.status,
      headers: { get: (name) => headers.get(name.toLowerCase()) ?? null },
      text: async () => {
        if (step.bodyHangs) return rejectOnAbort(init.signal);
        if (step.bodyError !== undefined) throw step.bodyError;
        return typeof step.body === 'string' ? step.body : step.body === undefined ? '' : JSON.stringify(step.body);
      },
    };
    return response;
  };
  const requested = (count: number) =>
    new Promise<void>((resolve) => {
      if (requests.length >= count) resolve();
      else waiters.push({ count, resolve });
    });
  return { fetch, requests, requested };
}

/** The rejection of the global fetch (undici) for a refused connection. */
export function undiciConnectError(code: string): TypeError {
  return new TypeError('fetch failed', { cause: Object.assign(new Error(`connect ${code} 127.0.0.1:9`), { code, syscall: 'connect' }) });
}

/**
 * What the global fetch (undici) rejects with when the connection drops after the request was sent: the peer
 * closed it (`close`: a `SocketError` 'other side closed', code `UND_ERR_SOCKET`) or reset it (`reset`:
 * `read ECONNRESET`).
 */
export function undiciDroppedError(how: 'close' | 'reset'): TypeError {
  const cause =
    how === 'close'
      ? Object.assign(new Error('other side closed'), { name: 'SocketError', code: 'UND_ERR_SOCKET' })
      : Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET', errno: -104, syscall: 'read' });
  return new TypeError('fetch failed', { cause });
}

/**
 * What node-fetch v3 rejects with when the connection drops after the request was sent: a `FetchError` with
 * code `ECONNRESET`, 'socket hang up' when the peer closed it (`close`), 'read ECONNRESET' when it reset it.
 */
export function nodeFetchDroppedError(how: 'close' | 'reset'): Error {
  const reason = how === 'close' ? 'socket hang up' : 'read ECONNRESET';
  return Object.assign(new Error(`request to http://127.0.0.1:9/v1/categories failed, reason: ${reason}`), {
    name: 'FetchError',
    type: 'system',
    code: 'ECONNRESET',
    errno: 'ECONNRESET',
  });
}

/** node-fetch v3's `FetchError` for a system error: the code is on the error itself. */
export function nodeFetchSystemError(code: string): Error {
  return Object.assign(new Error(`request to http://127.0.0.1:9/v1/categories failed, reason: ${code}`), {
    name: 'FetchError',
    type: 'system',
    code,
    errno: code,
  });
}

/**
 * A client on a scripted fetch and a fake clock. `sentAt()` gives each request's send time relative to the
 * start; `requested(n)` resolves once `n` requests were sent; `apiKey` is `secret-key`.
 */
export function scriptedClient(script: ScriptStep[], options: Partial<PetstoreClientOptions> = {}) {
  const time = fakeTime();
  const server = scriptedFetch(script, time);
  const client = createPetstoreClient({
    baseUrl: 'http://api.test/v1',
    apiKey: 'secret-key',
    fetch: server.fetch,
    sleep: time.sleep,
    now: time.now,
    ...options,
  });
  const startMs = time.now();
  return {
    client,
    time,
    requests: server.requests,
    requested: server.requested,
    sentAt: () => server.requests.map((r) => r.atMs - startMs),
  };
}

/** Resolves with the PetstoreClientError a promise rejects with; fails the test on anything else. */
export async function rejection(promise: Promise<unknown>): Promise<PetstoreClientError> {
  const error: unknown = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!isPetstoreClientError(error)) throw new Error(`expected a PetstoreClientError, got ${String(error)}`);
  return error;
}
