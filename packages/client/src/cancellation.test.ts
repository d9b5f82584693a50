/**
 * Per-call cancellation (`signal`) and per-attempt timeouts (`timeoutMs`, and the `retry.maxElapsedMs`
 * budget bounding attempts). Waits between attempts run on the fake clock; the attempt timers are real but
 * tiny (tens of ms), or run on vitest's fake timers where a test needs the default 10 s.
 */
import { tcpTestServer } from './tcp-test-server.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_TIMEOUT_MS, createPetstoreClient } from './client.js';
import type { PetstoreFetch } from './fetch-types.js';
import { errorAnswer, fakeTime, rateLimitHeaders, rejection, type ScriptStep, scriptedClient as setup } from './scripted-fetch.js';

const ok: ScriptStep = { status: 200, body: [] };
const created: ScriptStep = { status: 201, body: { id: 1, name: 'Dogs' } };
const neverAnswers: ScriptStep = { hang: 'until-aborted' };

/** What node-fetch v3 rejects with when its signal aborts: its own AbortError, not a DOMException. */
function nodeFetchAbortError(): Error {
  return Object.assign(new Error('The operation was aborted.'), { name: 'AbortError', type: 'aborted' });
}

/** The ways a fetch can end an aborted request: the global fetch's, node-fetch's, an odd error, or never. */
const abortBehaviours: Array<[string, ScriptStep]> = [
  ['rejects with the signal reason (global fetch)', neverAnswers],
  ["rejects with node-fetch's AbortError", { hang: 'until-aborted', abortError: nodeFetchAbortError() }],
  ['rejects with an unrelated TypeError', { hang: 'until-aborted', abortError: new TypeError('terminated') }],
  ['ignores the signal and never settles', { hang: 'forever' }],
];

afterEach(() => {
  vi.useRealTimers();
});

describe('signal', () => {
  it('an already aborted signal rejects with aborted and sends nothing', async () => {
    const { client, requests } = setup([ok]);
    const controller = new AbortController();
    const reason = new Error('user went away');
    controller.abort(reason);
    const listed = await rejection(client.listCategories({ signal: controller.signal }));
    expect(listed).toMatchObject({ code: 'aborted', status: 0, attempts: 0 });
    expect(listed.cause).toBe(reason);
    const createdError = await rejection(client.createCategory({ name: 'Dogs' }, { signal: controller.signal }));
    expect(createdError).toMatchObject({ code: 'aborted', attempts: 0 });
    expect(createdError.cause).toBe(reason);
    expect(requests).toHaveLength(0);
  });

  it('aborting during an attempt aborts its fetch and rejects at once with aborted; a GET is not retried', async () => {
    const { client, requests, requested, time } = setup([neverAnswers, ok], { timeoutMs: 60_000 });
    const controller = new AbortController();
    const pending = rejection(client.listCategories({ signal: controller.signal }));
    await requested(1);
    const fetchSignal = requests[0]?.init.signal;
    expect(fetchSignal?.aborted).toBe(false);
    const reason = new Error('navigated away');
    controller.abort(reason);
    const error = await pending;
    expect(error).toMatchObject({ code: 'aborted', status: 0, attempts: 1 });
    expect(error.cause).toBe(reason);
    expect(fetchSignal?.aborted).toBe(true);
    expect(fetchSignal?.reason).toBe(reason);
    expect(requests).toHaveLength(1);
    expect(time.sleeps).toEqual([]);
  });

  it.each(abortBehaviours)('an aborted attempt is told by the signal, whatever the fetch does: it %s', async (_, step) => {
    // A create misread as a network error would be retried (creates are, with their Idempotency-Key), after a wait.
    const { client, requests, requested, time } = setup([step, created], { timeoutMs: 60_000 });
    const controller = new AbortController();
    const pending = rejection(client.createCategory({ name: 'Dogs' }, { signal: controller.signal }));
    await requested(1);
    const reason = new Error('cancelled by the user'); // any reason: not necessarily an AbortError
    controller.abort(reason);
    const error = await pending;
    expect(error).toMatchObject({ code: 'aborted', attempts: 1 });
    expect(error.cause).toBe(reason);
    expect(requests).toHaveLength(1);
    expect(time.sleeps).toEqual([]);
  });

  it('aborting during the Retry-After wait ends it at once, with no further attempt; the sleep got the signal', async () => {
    const sleeps: Array<{ ms: number; signal: AbortSignal | undefined }> = [];
    let sleeping!: () => void;
    const asleep = new Promise<void>((resolve) => (sleeping = resolve));
    // A sleep that never ends on its own, even when the signal aborts: the client must stop waiting itself.
    const sleep = (ms: number, signal?: AbortSignal) => {
      sleeps.push({ ms, signal });
      sleeping();
      return new Promise<void>(() => {});
    };
    const { client, requests } = setup([errorAnswer(429, 'rate_limited', { 'retry-after': '2' }), ok], { sleep, random: () => 0 });
    const controller = new AbortController();
    const pending = rejection(client.listCategories({ signal: controller.signal }));
    await asleep;
    const reason = new Error('shutting down');
    controller.abort(reason);
    const error = await pending;
    expect(error).toMatchObject({ code: 'aborted', status: 0, attempts: 1 });
    expect(error.cause).toBe(reason);
    expect(sleeps).toEqual([{ ms: 2000, signal: controller.signal }]);
    expect(requests).toHaveLength(1);
  });

  it('passes the call signal to the sleep of a retry that goes ahead', async () => {
    const { client, time } = setup([errorAnswer(429, 'rate_limited', { 'retry-after': '1' }), ok]);
    const controller = new AbortController();
    await expect(client.listCategories({ signal: controller.signal })).resolves.toEqual([]);
    expect(time.sleepSignals).toEqual([controller.signal]);
  });

  it('the default sleep waits on a timer, and an abort clears that timer at once', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const time = fakeTime();
    const script = [errorAnswer(429, 'rate_limited', { 'retry-after': '5' }), ok];
    const waited = setup(script, { sleep: undefined, now: time.now });
    const done = waited.client.listCategories();
    await vi.advanceTimersByTimeAsync(4999);
    expect(waited.requests).toHaveLength(1);
    await vi.advanceTimersByTimeAsync(1);
    await expect(done).resolves.toEqual([]);
    expect(waited.requests).toHaveLength(2);

    const aborted = setup(script, { sleep: undefined, now: time.now });
    const controller = new AbortController();
    const pending = rejection(aborted.client.listCategories({ signal: controller.signal }));
    await vi.advanceTimersByTimeAsync(1000);
    expect(vi.getTimerCount()).toBe(1); // the 5 s wait
    controller.abort();
    expect(await pending).toMatchObject({ code: 'aborted', attempts: 1 });
    expect(vi.getTimerCount()).toBe(0);
    expect(aborted.requests).toHaveLength(1);
  });
});

describe('timeoutMs', () => {
  it('a GET that never answers is aborted after timeoutMs and retried', async () => {
    const { client, requests, time } = setup([neverAnswers, ok], { timeoutMs: 30, random: () => 0 });
    const startedAt = performance.now();
    await expect(client.listCategories()).resolves.toEqual([]);
    expect(performance.now() - startedAt).toBeGreaterThanOrEqual(25);
    expect(requests).toHaveLength(2);
    const [first, second] = requests.map((request) => request.init.signal);
    expect(first?.aborted).toBe(true);
    expect(first?.reason).toBeInstanceOf(DOMException);
    expect((first?.reason as DOMException).name).toBe('TimeoutError');
    expect(second?.aborted).toBe(false);
    expect(time.sleeps).toEqual([0]);
  });

  it('the last attempt timing out rejects with timeout, status 0 and the attempts', async () => {
    const { client, requests } = setup([neverAnswers], { timeoutMs: 20, retry: { maxAttempts: 2 } });
    const error = await rejection(client.listCategories());
    expect(error).toMatchObject({ code: 'timeout', status: 0, attempts: 2 });
    expect((error.cause as DOMException).name).toBe('TimeoutError');
    expect(requests).toHaveLength(2);
  });

  it.each(abortBehaviours)('a timed-out attempt is told by the signal, whatever the fetch does: it %s', async (_, step) => {
    const { client } = setup([step], { timeoutMs: 20, retry: { maxAttempts: 1 } });
    expect(await rejection(client.listCategories())).toMatchObject({ code: 'timeout', attempts: 1 });
  });

  it('covers reading the body, not only the headers', async () => {
    const slowBody: ScriptStep = { status: 200, headers: rateLimitHeaders(60, 59, 1_800_000_060), bodyHangs: true };
    const { client, requests } = setup([slowBody], { timeoutMs: 30, retry: { maxAttempts: 1 } });
    expect(await rejection(client.listCategories())).toMatchObject({ code: 'timeout', status: 0, attempts: 1 });
    expect(requests[0]?.init.signal?.aborted).toBe(true);
    expect(client.lastRateLimit).toEqual({ limit: 60, remaining: 59, resetAtSeconds: 1_800_000_060 });
  });

  it('a create that times out is retried with the same Idempotency-Key: if the first was executed, the server replays it', async () => {
    const { client, requests } = setup([neverAnswers, created], { timeoutMs: 30 });
    await expect(client.createCategory({ name: 'Dogs' })).resolves.toEqual({ id: 1, name: 'Dogs' });
    expect(requests).toHaveLength(2);
    expect(requests[0]?.init.signal?.aborted).toBe(true);
    const [first, second] = requests.map((request) => request.init.headers['idempotency-key']);
    expect(first).toMatch(/^"[0-9a-f-]{36}"$/);
    expect(second).toBe(first);
  });

  it('an aborted create is not retried; calling again with the same idempotencyKey sends that key again', async () => {
    const { client, requests, requested } = setup([neverAnswers, created], { timeoutMs: 60_000 });
    const controller = new AbortController();
    const pending = rejection(client.createCategory({ name: 'Dogs' }, { signal: controller.signal, idempotencyKey: 'create-dogs-1' }));
    await requested(1);
    controller.abort();
    expect(await pending).toMatchObject({ code: 'aborted', attempts: 1 });
    expect(requests).toHaveLength(1);
    await expect(client.createCategory({ name: 'Dogs' }, { idempotencyKey: 'create-dogs-1' })).resolves.toEqual({ id: 1, name: 'Dogs' });
    expect(requests.map((request) => request.init.headers['idempotency-key'])).toEqual(['"create-dogs-1"', '"create-dogs-1"']);
  });

  it(`defaults to ${DEFAULT_TIMEOUT_MS} ms`, async () => {
    expect(DEFAULT_TIMEOUT_MS).toBe(10_000);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { client } = setup([neverAnswers], { retry: { maxAttempts: 1 } });
    let settled = false;
    const pending = rejection(client.listCategories()).finally(() => (settled = true));
    await vi.advanceTimersByTimeAsync(9_999);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await pending).toMatchObject({ code: 'timeout', attempts: 1 });
  });

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, '1000'])('rejects timeoutMs %s with a RangeError naming it', (timeoutMs) => {
    expect(() => createPetstoreClient({ baseUrl: 'http://api.test/v1', apiKey: 'k', timeoutMs: timeoutMs as number })).toThrow(RangeError);
    expect(() => createPetstoreClient({ baseUrl: 'http://api.test/v1', apiKey: 'k', timeoutMs: timeoutMs as number })).toThrow(/timeoutMs/);
  });

  it('accepts any finite timeoutMs > 0', () => {
    for (const timeoutMs of [0.5, 1, 2 ** 40]) {
      expect(() => createPetstoreClient({ baseUrl: 'http://api.test/v1', apiKey: 'k', timeoutMs })).not.toThrow();
    }
  });
});

describe('the retry.maxElapsedMs budget bounds attempts', () => {
  it('an attempt gets no more than the budget: a slow first attempt ends the call with timeout, not retried', async () => {
    const { client, requests } = setup([neverAnswers, ok], { retry: { maxElapsedMs: 40 } }); // timeoutMs: the 10 s default
    const error = await rejection(client.listCategories());
    expect(error).toMatchObject({ code: 'timeout', status: 0, attempts: 1 });
    expect(requests).toHaveLength(1);
    expect(requests[0]?.init.signal?.aborted).toBe(true);
  }, 2_000);

  it('a retry gets only what is left of the budget', async () => {
    // The first answer takes 960 ms of the 1 000 ms budget; the retry (after a 0 ms wait) has 40 ms left.
    const slow503 = { ...errorAnswer(503, 'service_unavailable'), takesMs: 960 };
    const { client, requests, time } = setup([slow503, neverAnswers, ok], { retry: { maxElapsedMs: 1000 }, random: () => 0 });
    const error = await rejection(client.listCategories());
    expect(error).toMatchObject({ code: 'timeout', attempts: 2 });
    expect(time.sleeps).toEqual([0]);
    expect(requests).toHaveLength(2);
  }, 2_000);
});

describe('with the global fetch over a real socket', () => {
  /**
   * A TCP server that accepts connections and never answers: `received` resolves when request bytes
   * arrive, `closed` when a client hangs up.
   */
  async function silentServer() {
    let gotData!: () => void;
    let hungUp!: () => void;
    const received = new Promise<void>((resolve) => (gotData = resolve));
    const closed = new Promise<void>((resolve) => (hungUp = resolve));
    const server = await tcpTestServer((socket) => {
      socket.on('data', gotData);
      socket.on('close', hungUp);
    });
    return { ...server, received, closed };
  }

  it('aborting a call sent on the wire closes its connection', async ({ onTestFinished }) => {
    const server = await silentServer();
    onTestFinished(server.stop);
    const client = createPetstoreClient({ baseUrl: server.baseUrl, apiKey: 'k' });
    const controller = new AbortController();
    const pending = rejection(client.createCategory({ name: 'Dogs' }, { signal: controller.signal }));
    await server.received;
    controller.abort();
    expect(await pending).toMatchObject({ code: 'aborted', attempts: 1 });
    await server.closed;
  });

  it('an attempt that times out rejects with timeout, its fetch signal aborted', async ({ onTestFinished }) => {
    const server = await silentServer();
    onTestFinished(server.stop);
    const signals: Array<AbortSignal | undefined> = [];
    const fetch: PetstoreFetch = (url, init) => {
      signals.push(init.signal);
      return globalThis.fetch(url, init);
    };
    const client = createPetstoreClient({ baseUrl: server.baseUrl, apiKey: 'k', fetch, timeoutMs: 50, retry: { maxAttempts: 1 } });
    const error = await rejection(client.listCategories());
    expect(error).toMatchObject({ code: 'timeout', attempts: 1 });
    expect((error.cause as DOMException).name).toBe('TimeoutError');
    expect(signals).toHaveLength(1);
    expect(signals[0]?.aborted).toBe(true);
  });
});
