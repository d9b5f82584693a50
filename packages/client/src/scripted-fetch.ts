/**
 * Test support (not exported by the package): a fetch that plays a script of answers and failures, and a
 * fake clock whose `sleep` moves time instead of waiting.
 */
import { createPetstoreClient, type PetstoreClientOptions } from './client.js';
import { isPetstoreClientError, type PetstoreClientError } from './errors.js';
import type { PetstoreFetch, PetstoreFetchInit, PetstoreFetchResponse } from './fetch-types.js';

/** One scripted step: an answer, or a rejection of fetch itself (no answer received). */
export type ScriptStep =
  | { status: number; headers?: Record<string, string>; body?: unknown; bodyError?: unknown; takesMs?: number }
  | { reject: unknown; takesMs?: number };

/** A request the scripted fetch received, with the fake time at which it was sent. */
export interface RecordedRequest {
  url: string;
  init: PetstoreFetchInit;
  atMs: number;
}

/** A clock at `startMs` that only moves when `sleep` is called (or a step takes time). */
export function fakeTime(startMs = 1_800_000_000_000) {
  let nowMs = startMs;
  const sleeps: number[] = [];
  return {
    sleeps,
    now: () => nowMs,
    sleep: async (ms: number) => {
      sleeps.push(ms);
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

/** An Error body answer (SPEC §2) with the given status and extra headers. */
export function errorAnswer(status: number, code: string, headers: Record<string, string> = {}): ScriptStep {
  return { status, headers: { 'content-type': 'application/json', ...headers }, body: { code, message: `${code} message`, status } };
}

/**
 * A fetch answering each call with the next step of `script` (the last step repeats when the script runs
 * out). Bodies that are not strings are sent as JSON.
 */
export function scriptedFetch(script: ScriptStep[], time?: { now(): number; advance(ms: number): void }) {
  const requests: RecordedRequest[] = [];
  const fetch: PetstoreFetch = async (url, init) => {
    requests.push({ url, init, atMs: time?.now() ?? 0 });
    const step = script[Math.min(requests.length - 1, script.length - 1)];
    if (step === undefined) throw new Error('empty script');
    if (step.takesMs !== undefined) time?.advance(step.takesMs);
    if ('reject' in step) throw step.reject;
    const headers = new Map(Object.entries(step.headers ?? {}).map(([name, value]) => [name.toLowerCase(), value]));
    const response: PetstoreFetchResponse = {
      status: step.status,
      headers: { get: (name) => headers.get(name.toLowerCase()) ?? null },
      text: async () => {
        if (step.bodyError !== undefined) throw step.bodyError;
        return typeof step.body === 'string' ? step.body : step.body === undefined ? '' : JSON.stringify(step.body);
      },
    };
    return response;
  };
  return { fetch, requests };
}

/** The rejection of the global fetch (undici) for a refused connection. */
export function undiciConnectError(code: string): TypeError {
  return new TypeError('fetch failed', { cause: Object.assign(new Error(`connect ${code} 127.0.0.1:9`), { code, syscall: 'connect' }) });
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
 * start; `apiKey` is `secret-key`.
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
  return { client, time, requests: server.requests, sentAt: () => server.requests.map((r) => r.atMs - startMs) };
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
