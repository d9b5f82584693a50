/**
 * Per-call cancellation (`signal`) and per-attempt timeouts (`attemptTimeoutMs`, and the `retry.maxElapsedMs`
 * budget bounding attempts). Waits between attempts run on the scripted client's fake clock, attempt timers on
 * vitest's fake timers: no test waits for real time to pass.
 */
import { tcpTestServer } from '../test-support/tcp-test-server.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_ATTEMPT_TIMEOUT_MS, createPetstoreClient } from './client.js';
import type { PetstoreFetch } from './fetch-types.js';
import { errorAnswer, fakeTime, rateLimitHeaders, rejection, type ScriptStep, scriptedClient as setup } from '../test-support/scripted-fetch.js';

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
    const { client, requests, requested, time } = setup([neverAnswers, ok], { attemptTimeoutMs: 60_000 });
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
    const { client, requests, requested, time } = setup([step, created], { attemptTimeoutMs: 60_000 });
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
    // Counted just before and after the abort, with no turn of the event loop between (the rejection settles in
    // microtasks): other code of this worker cannot arm or fire a timer meanwhile, so the one cleared is the wait's.
    const timersBefore = vi.getTimerCount();
    controller.abort();
    expect(await pending).toMatchObject({ code: 'aborted', attempts: 1 });
    expect(vi.getTimerCount()).toBe(timersBefore - 1);
    expect(aborted.requests).toHaveLength(1);
  });
});

describe('attemptTimeoutMs', () => {
  /**
   * Attempt timers on vitest's fake timers; waits between attempts stay on the scripted client's fake clock. The
   * tests advance by the attempts' own time, never `runAllTimers`: files share a worker (isolate: false), and a
   * timer another file left armed (undici's keep-alive tick re-arms itself) would run forever on a fake clock.
   */
  const fakeTimers = () => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });

  it('a GET that never answers is aborted once attemptTimeoutMs has passed, not before, and retried', async () => {
    fakeTimers();
    const { client, requests, requested, time } = setup([neverAnswers, ok], { attemptTimeoutMs: 3_000, random: () => 0 });
    const listed = client.listCategories();
    await requested(1);
    await vi.advanceTimersByTimeAsync(2_999);
    expect(requests).toHaveLength(1);
    expect(requests[0]?.init.signal?.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    await expect(listed).resolves.toEqual([]);
    expect(requests).toHaveLength(2);
    const [first, second] = requests.map((request) => request.init.signal);
    expect(first?.aborted).toBe(true);
    expect(first?.reason).toBeInstanceOf(DOMException);
    expect((first?.reason as DOMException).name).toBe('TimeoutError');
    expect(second?.aborted).toBe(false);
    expect(time.sleeps).toEqual([0]);
  });

  it('the last attempt timing out rejects with timeout, status 0 and the attempts', async () => {
    fakeTimers();
    const { client, requests } = setup([neverAnswers], { attemptTimeoutMs: 1_000, retry: { maxAttempts: 2 } });
    const pending = rejection(client.listCategories());
    await vi.advanceTimersByTimeAsync(2 * 1_000); // two attempts, each aborted at its 1,000 ms
    const error = await pending;
    expect(error).toMatchObject({ code: 'timeout', status: 0, attempts: 2 });
    expect(error.message).toContain('timed out after 1000 ms');
    expect((error.cause as DOMException).name).toBe('TimeoutError');
    expect(requests).toHaveLength(2);
  });

  it.each(abortBehaviours)('a timed-out attempt is told by the signal, whatever the fetch does: it %s', async (_, step) => {
    fakeTimers();
    const { client } = setup([step], { attemptTimeoutMs: 1_000, retry: { maxAttempts: 1 } });
    const pending = rejection(client.listCategories());
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await pending).toMatchObject({ code: 'timeout', attempts: 1 });
  });

  it('covers reading the body, not only the headers', async () => {
    fakeTimers();
    const slowBody: ScriptStep = { status: 200, headers: rateLimitHeaders(60, 59, 1_800_000_060), bodyHangs: true };
    const { client, requests } = setup([slowBody], { attemptTimeoutMs: 1_000, retry: { maxAttempts: 1 } });
    const pending = rejection(client.listCategories());
    await vi.advanceTimersByTimeAsync(1_000);
    expect(await pending).toMatchObject({ code: 'timeout', status: 0, attempts: 1 });
    expect(requests[0]?.init.signal?.aborted).toBe(true);
    expect(client.lastRateLimit).toEqual({ limit: 60, remaining: 59, resetAtSeconds: 1_800_000_060 });
  });

  it('a create that times out is retried with the same Idempotency-Key: if the first was executed, the server replays it', async () => {
    fakeTimers();
    const { client, requests } = setup([neverAnswers, created], { attemptTimeoutMs: 1_000 });
    const pending = client.createCategory({ name: 'Dogs' });
    await vi.advanceTimersByTimeAsync(1_000);
    await expect(pending).resolves.toEqual({ id: 1, name: 'Dogs' });
    expect(requests).toHaveLength(2);
    expect(requests[0]?.init.signal?.aborted).toBe(true);
    const [first, second] = requests.map((request) => request.init.headers['idempotency-key']);
    expect(first).toMatch(/^"[0-9a-f-]{36}"$/);
    expect(second).toBe(first);
  });

  it('an aborted create is not retried; calling again with the same idempotencyKey sends that key again', async () => {
    const { client, requests, requested } = setup([neverAnswers, created], { attemptTimeoutMs: 60_000 });
    const controller = new AbortController();
    const pending = rejection(client.createCategory({ name: 'Dogs' }, { signal: controller.signal, idempotencyKey: 'create-dogs-1' }));
    await requested(1);
    controller.abort();
    expect(await pending).toMatchObject({ code: 'aborted', attempts: 1 });
    expect(requests).toHaveLength(1);
    await expect(client.createCategory({ name: 'Dogs' }, { idempotencyKey: 'create-dogs-1' })).resolves.toEqual({ id: 1, name: 'Dogs' });
    expect(requests.map((request) => request.init.headers['idempotency-key'])).toEqual(['"create-dogs-1"', '"create-dogs-1"']);
  });

  it(`defaults to ${DEFAULT_ATTEMPT_TIMEOUT_MS} ms`, async () => {
    expect(DEFAULT_ATTEMPT_TIMEOUT_MS).toBe(10_000);
    fakeTimers();
    const { client } = setup([neverAnswers], { retry: { maxAttempts: 1 } });
    let settled = false;
    const pending = rejection(client.listCategories()).finally(() => (settled = true));
    await vi.advanceTimersByTimeAsync(9_999);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await pending).toMatchObject({ code: 'timeout', attempts: 1 });
  });

  it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY, '1000'])('rejects attemptTimeoutMs %s with a RangeError naming it', (attemptTimeoutMs) => {
    const options = { baseUrl: 'http://api.test/v1', apiKey: 'k', attemptTimeoutMs: attemptTimeoutMs as number };
    expect(() => createPetstoreClient(options)).toThrow(RangeError);
    expect(() => createPetstoreClient(options)).toThrow(/attemptTimeoutMs/);
  });

  it('accepts any finite attemptTimeoutMs > 0', () => {
    for (const attemptTimeoutMs of [0.5, 1, 2 ** 40]) {
      expect(() => createPetstoreClient({ baseUrl: 'http://api.test/v1', apiKey: 'k', attemptTimeoutMs })).not.toThrow();
    }
  });
});

describe('the retry.maxElapsedMs budget bounds attempts', () => {
  it('an attempt gets no more than the budget: a slow first attempt ends the call with timeout, not retried', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const { client, requests, requested } = setup([neverAnswers, ok], { retry: { maxElapsedMs: 4_000 } }); // attemptTimeoutMs: the 10 s default
    let settled = false;
    const pending = rejection(client.listCategories()).finally(() => (settled = true));
    await requested(1);
    await vi.advanceTimersByTimeAsync(3_999);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const error = await pending;
    expect(error).toMatchObject({ code: 'timeout', status: 0, attempts: 1 });
    expect(error.message).toContain("ran out of the call's 4000 ms budget");
    expect(requests).toHaveLength(1);
    expect(requests[0]?.init.signal?.aborted).toBe(true);
  });

  it('a retry gets only what is left of the budget', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    // The first answer takes 9 600 ms of the 10 000 ms budget; the retry (after a 0 ms wait) has 400 ms left.
    const slow503 = { ...errorAnswer(503, 'service_unavailable'), takesMs: 9_600 };
    const { client, requests, requested, time } = setup([slow503, neverAnswers, ok], { retry: { maxElapsedMs: 10_000 }, random: () => 0 });
    let settled = false;
    const pending = rejection(client.listCategories()).finally(() => (settled = true));
    await requested(2);
    await vi.advanceTimersByTimeAsync(399);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await pending).toMatchObject({ code: 'timeout', attempts: 2 });
    expect(time.sleeps).toEqual([0]);
    expect(requests).toHaveLength(2);
  });
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

  it('an attempt that times out rejects with timeout, its fetch signal aborted, and closes its connection', async ({ onTestFinished }) => {
    const server = await silentServer();
    onTestFinished(server.stop);
    const signals: Array<AbortSignal | undefined> = [];
    const fetch: PetstoreFetch = (url, init) => {
      signals.push(init.signal);
      return globalThis.fetch(url, init);
    };
    const client = createPetstoreClient({ baseUrl: server.baseUrl, apiKey: 'k', fetch, attemptTimeoutMs: 5_000, retry: { maxAttempts: 1 } });
    // The attempt's timer on fake timers, armed once the request is on the wire; sockets stay real.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const pending = rejection(client.listCategories());
    await server.received;
    await vi.advanceTimersByTimeAsync(5_000);
    const error = await pending;
    expect(error).toMatchObject({ code: 'timeout', attempts: 1 });
    expect((error.cause as DOMException).name).toBe('TimeoutError');
    expect(signals).toHaveLength(1);
    expect(signals[0]?.aborted).toBe(true);
    await server.closed;
  });
});
