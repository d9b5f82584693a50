/**
 * Coalescing of consumes into script calls: the consumes a process starts within one turn of its event loop
 * go to Redis as one call of the consume script (rate-limit-script.ts), which decides them in order, each
 * exactly as if it came alone, so a command's fixed cost is paid once per batch (BENCHMARKS.md, section
 * "Scale-out: K app processes on one Redis").
 */
import { ReplyError, type Cluster, type Redis } from 'ioredis';
import calculateSlot from 'cluster-key-slot';
import { createTurnBatches } from '@petstore/internal';
import { CONSUME_LUA } from './rate-limit-script.js';
import { NotARecordError, RedisTimeoutError, type WithDeadline } from './redis-call.js';

/** Name under which the consume script is defined on the client (`client.defineCommand`). */
export const CONSUME_COMMAND = 'petstoreRateLimitConsume';

/**
 * Most consumes in one call: bounds how long one script holds Redis (each consume adds to its run time) and
 * how many arguments one command carries.
 */
export const MAX_BATCH_SIZE = 64;

/**
 * The script arguments that describe one policy (see rate-limit-script.ts), built once per policy, and the numbers
 * the script answers per window of a consume under it (not sent): 1 when every window is fixed (its used count),
 * else 3 (each window's used count, reset and retry).
 */
export type PolicyArguments = readonly [signature: string, format: string, numbers: string, numbersPerWindow: 1 | 3];

/** What the script decided for one consume. */
export interface ConsumeDecision {
  /** When it was decided, Unix epoch ms: Redis's clock in `'server'` mode, else the consume's own nowMs. */
  nowMs: number;
  /** 0 allowed, 1 rate limited, 2 banned. */
  outcome: 0 | 1 | 2;
  bannedUntilMs: number;
  /**
   * The used count of each window, in request order; under a policy with a sliding or gcra window, three numbers
   * per window: used, reset (Unix epoch ms) and retry (Unix epoch ms, -1: none).
   */
  used: number[];
}

const WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value';

/** The script's answer (after its clock) when the batch's deadline had passed: nothing read or written. */
const EXPIRED = -1;

/** One consume of a batch: the key, its policy, its cost (units), its ban subject and (request mode) its time. */
interface Pending {
  redisKey: string;
  policy: PolicyArguments;
  windowCount: number;
  cost: number;
  banSubject: string;
  nowMs: number;
  resolve(decision: ConsumeDecision): void;
  reject(error: unknown): void;
}

type ScriptCall = (numberOfKeys: number, ...args: string[]) => Promise<number[]>;

/**
 * The consume path of one store: `consume(redisKey, policy, windowCount, cost, banSubject, nowMs)` answers the
 * decision of that consume, or rejects with the call's failure (every consume of a failed call rejects with it),
 * or, for that consume alone, with Redis's `WRONGTYPE` error when the key holds a value of another type, or a
 * {@link NotARecordError} when it holds a string that is not a record.
 *
 * On a `Cluster` client the consumes are batched per hash slot (a script's keys must share one), computed
 * on the full key (the client's own `keyPrefix` first), as ioredis routes it.
 *
 * Each call carries its deadline (when it is sent, plus `callTimeoutMs`: the instant the caller answers it 503) on
 * Redis's clock, and a script that runs past it charges nothing (a call held by a paused or overloaded Redis, or in
 * ioredis's offline queue). The offset of Redis's clock is taken from the last reply (its `TIME` minus this
 * process's clock when the reply came: an offset that errs only early, by the reply's travel). A batch Redis finds
 * expired while this process still waits (the clocks disagreed: the first call, a host clock that jumped, a blocked
 * event loop) is sent once more, with the offset of that reply, within the time left.
 */
export function createConsumeBatches(client: Redis | Cluster, time: 'server' | 'request', callTimeoutMs: number, withDeadline: WithDeadline) {
  client.defineCommand(CONSUME_COMMAND, { lua: CONSUME_LUA });
  const script = (client as unknown as Record<string, ScriptCall>)[CONSUME_COMMAND] as ScriptCall;
  const clientPrefix = client.options.keyPrefix ?? '';
  const slotOf = client.isCluster ? (redisKey: string) => calculateSlot(clientPrefix + redisKey) : () => 0;
  /** Redis's clock minus this process's (ms), from the last reply; 0 until one came. */
  let offsetMs = 0;
  /** Batches waiting for the end of this turn, by hash slot. */
  const addToBatch = createTurnBatches<Pending>(MAX_BATCH_SIZE, (batch) => send(batch));

  /**
   * Sends `batch`, whose caller gives up at `deadlineAtMs` (this process's clock, Unix epoch ms); `retried`: the
   * second try after an expired answer.
   */
  function send(batch: Pending[], deadlineAtMs = Date.now() + callTimeoutMs, retried = false): void {
    const policyNumbers = new Map<PolicyArguments, number>();
    const policyArgs: string[] = [];
    const itemArgs: string[] = [];
    const keys: string[] = [];
    for (const item of batch) {
      let number = policyNumbers.get(item.policy);
      if (number === undefined) {
        number = policyNumbers.size + 1;
        policyNumbers.set(item.policy, number);
        policyArgs.push(item.policy[0], item.policy[1], item.policy[2]);
      }
      keys.push(item.redisKey);
      itemArgs.push(String(number), String(item.cost), item.banSubject);
      if (time === 'request') itemArgs.push(String(item.nowMs));
    }
    const deadlineMs = String(deadlineAtMs + offsetMs);
    const call = script.call(client, keys.length, ...keys, time, deadlineMs, String(policyNumbers.size), ...policyArgs, ...itemArgs);
    withDeadline(call, retried ? Math.max(1, deadlineAtMs - Date.now()) : callTimeoutMs).then(
      (reply) => {
        const receivedAtMs = Date.now();
        offsetMs = (reply[0] as number) - receivedAtMs;
        if (reply[1] === EXPIRED) {
          if (!retried && receivedAtMs < deadlineAtMs) send(batch, deadlineAtMs, true);
          else for (const item of batch) item.reject(new RedisTimeoutError(callTimeoutMs));
          return;
        }
        let offset = 1;
        for (const item of batch) {
          const outcome = reply[offset] as number;
          const width = item.windowCount * item.policy[3];
          const used = reply.slice(offset + 2, offset + 2 + width);
          // Redis's own error, as a lone GET of the key would have raised it.
          if (outcome === 3) item.reject(new ReplyError(WRONGTYPE) as Error);
          else if (outcome === 4) item.reject(new NotARecordError(item.redisKey));
          else {
            const nowMs = time === 'server' ? (reply[0] as number) : item.nowMs;
            item.resolve({ nowMs, outcome: outcome as 0 | 1 | 2, bannedUntilMs: reply[offset + 1] as number, used });
          }
          offset += 2 + width;
        }
      },
      (error: unknown) => {
        for (const item of batch) item.reject(error);
      },
    );
  }

  return (redisKey: string, policy: PolicyArguments, windowCount: number, cost: number, banSubject: string, nowMs: number): Promise<ConsumeDecision> =>
    new Promise((resolve, reject) => {
      addToBatch({ redisKey, policy, windowCount, cost, banSubject, nowMs, resolve, reject }, slotOf(redisKey));
    });
}
