/**
 * The rate-limit record as the consume script packs it into one string value (layout: `rateLimitRedisKey`'s
 * TSDoc and rate-limit-script.ts), decoded for `peek`.
 */
import type { BanState, RateLimitState, WindowCounter } from '@petstore/core';

/**
 * Decodes one packed record into the core's `RateLimitState`.
 *
 * @throws Error when `value` is not a record in that layout (too short, a signature that is not
 *   `[[name, limit, windowMs(, algorithm)], …]` for n windows, bytes left over).
 */
export function decodeRateLimitRecord(value: Buffer): RateLimitState {
  const n = value.readUInt8(0);
  const signatureLength = value.readUInt32LE(1);
  const signatureStart = 5 + 16 * n;
  const bansStart = signatureStart + signatureLength;
  if (bansStart > value.length) throw new Error('truncated record');
  const windows = JSON.parse(value.toString('utf8', signatureStart, bansStart)) as unknown;
  if (!Array.isArray(windows) || windows.length !== n) throw new Error('not a record signature');
  // The previous counts of the sliding windows follow the signature, in window order.
  let offset = bansStart;
  const counters: Array<[string, WindowCounter]> = windows.map((window: unknown, i) => {
    if (!Array.isArray(window) || typeof window[0] !== 'string' || typeof window[1] !== 'number' || typeof window[2] !== 'number') {
      throw new Error('not a record signature');
    }
    const [name, limit, windowMs, algorithm] = window as [string, number, number, unknown];
    const counter: WindowCounter = { startMs: value.readDoubleLE(5 + 8 * i), count: value.readDoubleLE(5 + 8 * (n + i)), limit, windowMs };
    if (algorithm === 'sliding') {
      counter.algorithm = algorithm;
      counter.previousCount = value.readDoubleLE(offset);
      offset += 8;
    } else if (algorithm === 'gcra') counter.algorithm = algorithm;
    else if (algorithm !== undefined) throw new Error('not a record signature');
    return [name, counter];
  });
  const bans: Array<[string, BanState]> = [];
  while (offset < value.length) {
    const rejectedStartMs = value.readDoubleLE(offset);
    const rejectedCount = value.readDoubleLE(offset + 8);
    const bannedUntilMs = value.readDoubleLE(offset + 16);
    const subjectLength = value.readUInt32LE(offset + 24);
    const subjectEnd = offset + 28 + subjectLength;
    if (subjectEnd > value.length) throw new Error('truncated record');
    const subject = value.toString('utf8', offset + 28, subjectEnd);
    bans.push([subject, { rejected: rejectedCount > 0 ? { startMs: rejectedStartMs, count: rejectedCount } : undefined, bannedUntilMs }]);
    offset = subjectEnd;
  }
  // Object.fromEntries defines own properties, also for a name or subject '__proto__'.
  return { counters: Object.fromEntries(counters), bans: Object.fromEntries(bans) };
}
