/**
 * The block cache of the Redis rate-limit store (its `blockCache` option): callers Redis answered "blocked" are
 * answered from this process's memory for at most `maxAgeMs`, then one consume asks Redis again (a refresh) while
 * the caller's other consumes wait for its answer.
 */
import { isPetstoreError, windowStartMs, type ConsumeRequest, type ConsumeResult, type RateLimitAlgorithm, type WindowUsage } from '@petstore/core';
import { LRUCache } from 'lru-cache';
import type { PolicyArguments } from './consume-batches.js';

/** Default `blockCache.maxKeys`: records whose blocked callers one process remembers. */
export const DEFAULT_BLOCK_CACHE_MAX_KEYS = 10_000;

/** Default `blockCache.maxAgeMs`: how long one process answers a blocked caller from memory before asking Redis again. */
export const DEFAULT_BLOCK_CACHE_MAX_AGE_MS = 1000;

/** What one process knows of one blocked ban subject of a record. */
interface BlockedSubject {
  /** End of the subject's ban (decision clock, Unix epoch ms); 0: refused for lack of room, without a ban policy. */
  bannedUntilMs: number;
  /** When Redis last answered for this subject (decision clock, Unix epoch ms). */
  checkedAtMs: number;
  /** Settles once the refresh under way has its answer (and has remembered it); undefined when none is out. */
  refreshed: Promise<void> | undefined;
}

/** What one process knows of one record with blocked subjects. */
interface BlockedRecord {
  /** The policy of the answers below: a request under another policy goes to Redis. */
  policy: PolicyArguments;
  /** The record's windows as Redis last answered them, for any of its subjects. */
  windows: WindowUsage[];
  /**
   * The cost of the request those windows answered: a sliding or gcra window's `retryAtMs` is when that cost fits
   * again, so it blocks only requests that cost at least as much.
   */
  cost: number;
  /** Each window's algorithm, in request order (sliding and gcra usage drains as time passes). */
  algorithms: readonly RateLimitAlgorithm[];
  /** Redis's clock minus this process's clock at that answer (`'server'` mode). */
  offsetMs: number;
  subjects: Map<string, BlockedSubject>;
}

/** What memory says of one consume: its answer, a refresh under way to wait for, a refresh to make, or nothing. */
type Known =
  | { kind: 'answer'; result: ConsumeResult }
  | { kind: 'wait'; refreshed: Promise<void> }
  | { kind: 'refresh'; subject: BlockedSubject }
  | { kind: 'unknown' };

/** Asks Redis to decide one consume. */
export type AskRedis = () => Promise<ConsumeResult>;

/** The block cache of one store; see {@link createBlockCache}. */
export interface BlockCache {
  /** Decides `request` from memory where it can, else by `ask` (Redis), learning from every answer Redis gives. */
  consume(key: string, policy: PolicyArguments, request: ConsumeRequest, ask: AskRedis): Promise<ConsumeResult>;
  /** Forgets everything known of `key` (after a reset). */
  forget(key: string): void;
}

/**
 * The block cache of one store, or `undefined` when `option` is `false`. `time` is the store's: in `'server'` mode
 * the age of an answer is counted on this process's clock moved by Redis's offset at that answer, in `'request'`
 * mode on the requests' clock.
 * @throws TypeError when `option` is malformed.
 */
export function createBlockCache(option: { maxKeys?: number; maxAgeMs?: number } | false, time: 'server' | 'request'): BlockCache | undefined {
  if (option === false) return undefined;
  if (typeof option !== 'object' || option === null) {
    throw new TypeError(`blockCache must be { maxKeys?, maxAgeMs? } or false, got ${String(option)}`);
  }
  const { maxKeys = DEFAULT_BLOCK_CACHE_MAX_KEYS, maxAgeMs = DEFAULT_BLOCK_CACHE_MAX_AGE_MS } = option;
  if (!Number.isSafeInteger(maxKeys) || maxKeys < 1) throw new TypeError(`blockCache.maxKeys must be a whole number >= 1, got ${String(maxKeys)}`);
  if (!Number.isSafeInteger(maxAgeMs) || maxAgeMs < 1) throw new TypeError(`blockCache.maxAgeMs must be a whole number of ms >= 1, got ${String(maxAgeMs)}`);
  // maxSize with a size of 1 per entry bounds the count as `max` would, without allocating every slot up front.
  const records = new LRUCache<string, BlockedRecord>({ maxSize: maxKeys, sizeCalculation: () => 1 });

  /** Now on the clock the record's answers were given on. */
  const decisionClockMs = (record: BlockedRecord, request: ConsumeRequest) => (time === 'server' ? Date.now() + record.offsetMs : request.nowMs);

  function forgetSubject(key: string, record: BlockedRecord, banSubject: string): void {
    record.subjects.delete(banSubject);
    if (record.subjects.size === 0 && records.peek(key) === record) records.delete(key);
  }

  /** What memory says of `request`. */
  function lookup(key: string, policy: PolicyArguments, request: ConsumeRequest): Known {
    const record = records.get(key);
    if (record === undefined || !samePolicy(record.policy, policy)) return { kind: 'unknown' };
    const subject = record.subjects.get(request.banSubject);
    if (subject === undefined) return { kind: 'unknown' };
    if (subject.refreshed !== undefined) return { kind: 'wait', refreshed: subject.refreshed };
    const nowMs = decisionClockMs(record, request);
    if (nowMs < subject.checkedAtMs) {
      forgetSubject(key, record, request.banSubject); // a clock that went back: ask Redis
      return { kind: 'unknown' };
    }
    const result = blockedAnswer(record, subject, request, nowMs);
    if (result === undefined) {
      if (subject.bannedUntilMs > 0) forgetSubject(key, record, request.banSubject); // the ban ended
      return { kind: 'unknown' };
    }
    return nowMs - subject.checkedAtMs < maxAgeMs ? { kind: 'answer', result } : { kind: 'refresh', subject };
  }

  /** Learns from Redis's answer: a blocked subject is remembered, an admitted one forgotten. */
  function remember(key: string, policy: PolicyArguments, request: ConsumeRequest, result: ConsumeResult): void {
    const blockedNow = !result.allowed && (result.reason === 'banned' || request.ban === undefined);
    let record = records.peek(key);
    if (record !== undefined && !samePolicy(record.policy, policy)) {
      records.delete(key); // what was known under another policy
      record = undefined;
    }
    if (record === undefined) {
      if (!blockedNow) return;
      const algorithms = request.windows.map((window) => window.algorithm ?? 'fixed');
      record = { policy, windows: result.windows, cost: request.cost, algorithms, offsetMs: 0, subjects: new Map() };
      records.set(key, record);
    }
    record.windows = result.windows;
    record.cost = request.cost;
    if (time === 'server') record.offsetMs = result.nowMs - Date.now();
    if (!blockedNow) {
      forgetSubject(key, record, request.banSubject);
      return;
    }
    const bannedUntilMs = result.allowed || result.reason !== 'banned' ? 0 : result.bannedUntilMs;
    const subject = record.subjects.get(request.banSubject);
    if (subject === undefined) record.subjects.set(request.banSubject, { bannedUntilMs, checkedAtMs: result.nowMs, refreshed: undefined });
    else {
      subject.bannedUntilMs = bannedUntilMs;
      subject.checkedAtMs = result.nowMs;
    }
  }

  async function askAndRemember(key: string, policy: PolicyArguments, request: ConsumeRequest, ask: AskRedis): Promise<ConsumeResult> {
    const result = await ask();
    remember(key, policy, request, result);
    return result;
  }

  /**
   * Asks Redis again for a blocked subject whose answer is `maxAgeMs` old. Hand-off: the subject's other consumes
   * wait on `refreshed`, which settles after the answer is remembered (or the refresh failed), never before.
   */
  async function refresh(key: string, subject: BlockedSubject, policy: PolicyArguments, request: ConsumeRequest, ask: AskRedis): Promise<ConsumeResult> {
    let settle = () => {};
    subject.refreshed = new Promise<void>((resolve) => (settle = resolve));
    try {
      return await askAndRemember(key, policy, request, ask);
    } catch (error) {
      const fromMemory = answerWhileUnavailable(key, subject, policy, request, error);
      if (fromMemory === undefined) throw error;
      return fromMemory;
    } finally {
      subject.refreshed = undefined;
      settle();
    }
  }

  /**
   * While Redis is unavailable, the block this process knows answers as long as it lasts, and counts as checked
   * now: Redis is asked again `maxAgeMs` later. Undefined: the failure stands.
   */
  function answerWhileUnavailable(key: string, subject: BlockedSubject, policy: PolicyArguments, request: ConsumeRequest, error: unknown): ConsumeResult | undefined {
    const record = records.peek(key);
    if (!isPetstoreError(error) || error.code !== 'service_unavailable' || record === undefined) return undefined;
    if (!samePolicy(record.policy, policy) || record.subjects.get(request.banSubject) !== subject) return undefined;
    const nowMs = decisionClockMs(record, request);
    const result = blockedAnswer(record, subject, request, nowMs);
    if (result !== undefined) subject.checkedAtMs = nowMs;
    return result;
  }

  return {
    async consume(key, policy, request, ask) {
      let known = lookup(key, policy, request);
      if (known.kind === 'wait') {
        // Hand-off: the refresh under way answers first; this consume then reads what it left. It waits once: a
        // refresh started meanwhile is not waited for, this consume asks Redis itself.
        await known.refreshed;
        known = lookup(key, policy, request);
        if (known.kind === 'wait') known = { kind: 'unknown' };
      }
      switch (known.kind) {
        case 'answer':
          return known.result;
        case 'refresh':
          return refresh(key, known.subject, policy, request, ask);
        default:
          return askAndRemember(key, policy, request, ask);
      }
    },
    forget(key) {
      records.delete(key);
    },
  };
}

function samePolicy(a: PolicyArguments, b: PolicyArguments): boolean {
  return a === b || (a[0] === b[0] && a[2] === b[2]);
}

/**
 * `windows` as they stand at `nowMs`: a window whose whole quota is back since (its `resetAtMs`) reads as empty,
 * with its new reset (a gcra window's is now: it holds nothing).
 */
function windowsAt(windows: WindowUsage[], algorithms: readonly RateLimitAlgorithm[], nowMs: number): WindowUsage[] {
  return windows.map((window, index) => {
    if (nowMs < window.resetAtMs) return window;
    const { name, limit, windowMs } = window;
    const resetAtMs = algorithms[index] === 'gcra' ? nowMs : windowStartMs(nowMs, windowMs) + windowMs;
    return { name, limit, windowMs, used: 0, remaining: limit, resetAtMs };
  });
}

/**
 * Whether `window` (as Redis answered a request of `answeredCost`) still refuses `cost` at `nowMs`: a fixed window
 * while less than `cost` is left in it; a sliding or gcra window, whose usage drains, only before its `retryAtMs`
 * and for a cost at least that of the answer (a cheaper request may fit sooner: Redis decides it).
 */
function refuses(window: WindowUsage, isDraining: boolean, answeredCost: number, cost: number, nowMs: number): boolean {
  if (!isDraining) return window.remaining < cost;
  return window.retryAtMs !== undefined && nowMs < window.retryAtMs && cost >= answeredCost;
}

/** The answer from memory while `subject` is still blocked for `request` at `nowMs`; undefined once it is not. */
function blockedAnswer(record: BlockedRecord, subject: BlockedSubject, request: ConsumeRequest, nowMs: number): ConsumeResult | undefined {
  const windows = windowsAt(record.windows, record.algorithms, nowMs);
  if (subject.bannedUntilMs > 0) {
    return nowMs < subject.bannedUntilMs ? { allowed: false, reason: 'banned', nowMs, windows, bannedUntilMs: subject.bannedUntilMs } : undefined;
  }
  const refused = windows.some((window, index) => refuses(window, record.algorithms[index] !== 'fixed', record.cost, request.cost, nowMs));
  return refused ? { allowed: false, reason: 'rate_limited', nowMs, windows } : undefined;
}
