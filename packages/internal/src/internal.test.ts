import { afterEach, describe, expect, it, vi } from 'vitest';
import { assertWhole, cachePerPolicy, createTurnBatches, hex, storedKeyText } from './index.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('createTurnBatches', () => {
  it('sends the items of one turn as one batch per group, at the end of the turn', () => {
    vi.useFakeTimers({ toFake: ['setImmediate'] });
    const sent: string[][] = [];
    const add = createTurnBatches<string>(10, (batch) => void sent.push(batch));
    add('a');
    add('b', 7);
    add('c');
    expect(sent).toEqual([]);
    vi.runAllTimers();
    expect(sent).toEqual([['a', 'c'], ['b']]);
    add('d');
    vi.runAllTimers();
    expect(sent).toEqual([['a', 'c'], ['b'], ['d']]);
  });

  it('sends a full batch at once and the rest at the end of the turn', () => {
    vi.useFakeTimers({ toFake: ['setImmediate'] });
    const sent: number[][] = [];
    const add = createTurnBatches<number>(2, (batch) => void sent.push(batch));
    for (const item of [1, 2, 3]) add(item);
    expect(sent).toEqual([[1, 2]]);
    vi.runAllTimers();
    expect(sent).toEqual([[1, 2], [3]]);
  });
});

describe('createTurnBatches with holdWhileSending', () => {
  it('holds a batch while a call is in flight, with the items of the turns after, and sends it once none is', async () => {
    vi.useFakeTimers({ toFake: ['setImmediate'] });
    const sent: string[][] = [];
    const answers: Array<() => void> = [];
    const add = createTurnBatches<string>(
      3,
      (batch) => {
        sent.push(batch);
        return new Promise<void>((resolve) => answers.push(resolve));
      },
      { holdWhileSending: true },
    );
    add('a');
    vi.runAllTimers();
    expect(sent).toEqual([['a']]);
    // Two more turns while 'a' is in flight: held, as one batch.
    add('b');
    vi.runAllTimers();
    add('c');
    vi.runAllTimers();
    expect(sent).toEqual([['a']]);
    // A full batch goes at once all the same, and is waited for too.
    for (const item of ['d', 'e', 'f']) add(item, 1);
    expect(sent).toEqual([['a'], ['d', 'e', 'f']]);
    answers[0]?.();
    await Promise.resolve();
    expect(sent).toHaveLength(2);
    answers[1]?.();
    await vi.waitFor(() => expect(sent).toEqual([['a'], ['d', 'e', 'f'], ['b', 'c']]));
    // Nothing in flight once that is answered: the next turn's batch goes at its end.
    answers[2]?.();
    await Promise.resolve();
    add('g');
    vi.runAllTimers();
    expect(sent.at(-1)).toEqual(['g']);
  });

  it('sends the held batch when the call in flight fails, too', async () => {
    vi.useFakeTimers({ toFake: ['setImmediate'] });
    const sent: string[][] = [];
    let fail: (error: Error) => void = () => undefined;
    const add = createTurnBatches<string>(
      10,
      (batch) => {
        sent.push(batch);
        return sent.length === 1 ? new Promise<void>((_, reject) => (fail = reject)) : Promise.resolve();
      },
      { holdWhileSending: true },
    );
    add('a');
    vi.runAllTimers();
    add('b');
    vi.runAllTimers();
    expect(sent).toEqual([['a']]);
    fail(new Error('the store went away'));
    await vi.waitFor(() => expect(sent).toEqual([['a'], ['b']]));
  });
});

describe('cachePerPolicy', () => {
  it('builds a frozen pair once, an unfrozen one each time', () => {
    const build = vi.fn((windows: readonly { limit: number }[], ban: { durationMs: number } | undefined) => ({ windows, ban }));
    const policyOf = cachePerPolicy(build);
    const frozen = Object.freeze([Object.freeze({ limit: 1 })]);
    const ban = Object.freeze({ durationMs: 5 });
    expect(policyOf(frozen, undefined)).toBe(policyOf(frozen, undefined));
    expect(policyOf(frozen, ban)).toBe(policyOf(frozen, ban));
    expect(policyOf(frozen, ban)).not.toBe(policyOf(frozen, undefined));
    expect(build).toHaveBeenCalledTimes(2);
    const unfrozen = [{ limit: 1 }];
    policyOf(unfrozen, undefined);
    policyOf(unfrozen, undefined);
    expect(build).toHaveBeenCalledTimes(4);
  });
});

describe('storedKeyText', () => {
  it('keeps well-formed keys and escapes NUL, U+FFFD and lone surrogates, distinct keys staying distinct', () => {
    expect(storedKeyText('account:acct_1')).toBe('account:acct_1');
    expect(storedKeyText('anon:😀')).toBe('anon:😀');
    expect(storedKeyText('anon:a\0b')).toBe('anon:a\uFFFD0000b');
    expect(storedKeyText('\uFFFD')).toBe('\uFFFDFFFD');
    expect(storedKeyText('x\uD800')).toBe('x\uFFFDD800');
    expect(storedKeyText('\uDC00y')).toBe('\uFFFDDC00y');
    expect(storedKeyText('\uFFFD0000')).not.toBe(storedKeyText('\0'));
  });
});

describe('hex and assertWhole', () => {
  it('writes the bytes of a view, not of its whole buffer', () => {
    const buffer = new Uint8Array([0, 1, 0xab, 0xff, 9]);
    expect(hex(buffer.subarray(1, 4))).toBe('01abff');
  });

  it('refuses a number that is not a safe integer at least min, naming it', () => {
    expect(() => assertWhole(3, 'cost', 1)).not.toThrow();
    expect(() => assertWhole(0, 'cost', 1)).toThrow(new TypeError('cost must be a whole number >= 1, got 0'));
    expect(() => assertWhole(1.5, 'limit', 0)).toThrow(TypeError);
    expect(() => assertWhole(Number.NaN, 'limit', 0)).toThrow(TypeError);
  });
});
