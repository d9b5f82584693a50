/**
 * Hostile request bodies: POST /v1/categories with bodies of (just under) 1 MiB built to make a server work
 * hard — huge strings of ASCII, emoji or combining marks, JSON escapes, many keys, deep nesting, long arrays,
 * a huge number, duplicate keys, whitespace padding — beside the largest bodies that pass the bounds and a
 * normal small create. For each body: the SERVER's CPU time per request (process CPU over a round, read over
 * IPC, median of the rounds), the answer (status and code) and the wall time per request at the client; and
 * the latency of a normal GET sent on a second connection while the hostile bodies are being sent.
 *
 * Requests are sequential (one at a time per connection); every round visits every server and every body in
 * turn, so drift of a noisy machine spreads over all of them. Servers run in their own processes pinned to
 * core 0, this process to core 1 (taskset), as in the HTTP benchmark.
 */
import { Agent, request } from 'node:http';
import type { ChildProcess } from 'node:child_process';
import { DEFAULT_BODY_LIMIT_BYTES } from '@petstore/core';
import { median, pinSelf, serverStats, startServerProcess, unpinSelf } from './http-bench.js';
import { BENCH_KEY, type ServerName } from './servers.js';

/** The servers measured: our adapters with memory storage. */
export const HOSTILE_SERVERS = ['fastify-petstore', 'express-petstore'] as const satisfies readonly ServerName[];
export type HostileServer = (typeof HOSTILE_SERVERS)[number];

/** What a body is there for: to attack (1 MiB), to pass the bounds at their largest, or to compare with. */
export type BodyKind = 'hostile' | 'largest-passing' | 'normal';

/** One body sent to POST /v1/categories. */
export interface BodyShape {
  name: string;
  kind: BodyKind;
  body: Buffer;
  /** The answer the API documents for this body: `201` or `400 <code>`. */
  expected: string;
}

/** One body's result on one server. */
export interface HostileCell {
  /** Every distinct answer seen (`201`, `400 invalid_json`, `error ECONNRESET`), in order of first sight. */
  answers: string[];
  /** Server CPU time per request, ms: median of the rounds (each round's CPU ÷ its requests). */
  cpuMs: number;
  /** Every round's server CPU ms per request, for the record. */
  cpuRoundsMs: number[];
  /** Wall time per request at the client (request sent → answer read), ms, median of every request. */
  wallMs: number;
  requests: number;
}

/** GET /v1/categories latency, ms: sent one at a time, alone and while hostile bodies are sent. */
export interface ConcurrentGet {
  alone: { p50Ms: number; maxMs: number; requests: number };
  underHostile: { p50Ms: number; maxMs: number; requests: number; hostileRequests: number; maxDuring: string };
  /** Every distinct answer to the GETs (`200` expected), in order of first sight. */
  answers: string[];
}

export interface HostileBenchResult {
  shapes: { name: string; kind: BodyKind; bytes: number; expected: string }[];
  /** cells[server][shape name] */
  cells: Record<HostileServer, Record<string, HostileCell>>;
  concurrent: Record<HostileServer, ConcurrentGet>;
  servers: HostileServer[];
  pinned: boolean;
  rounds: number;
  requestsPerRound: number;
  warmupRequests: number;
  /** The server CPU of reading the stats twice over IPC (median, µs), subtracted from every round. */
  statsOverheadMicros: number;
  /** The hostile (1 MiB) body with the most server CPU per request, over every server. */
  worst: { shape: string; server: HostileServer; cpuMs: number };
  seconds: number;
}

export interface HostileBenchOptions {
  quick: boolean;
}

const LIMIT = DEFAULT_BODY_LIMIT_BYTES;

/** `prefix + unit × n + suffix` with the largest n that keeps the body within `bytes` (UTF-8). */
function fill(prefix: string, unit: string, suffix: string, bytes = LIMIT): Buffer {
  const fixed = Buffer.byteLength(prefix) + Buffer.byteLength(suffix);
  const count = Math.floor((bytes - fixed) / Buffer.byteLength(unit));
  return Buffer.from(prefix + unit.repeat(count) + suffix);
}

const json = (value: unknown) => Buffer.from(JSON.stringify(value));

/**
 * The bodies, in the order of the report. The expected answers are the documented bounds: 1 MiB body, nesting
 * depth 32, 1000 object members, name 1–100 graphemes and ≤ 400 code points, description ≤ 1000 graphemes and
 * ≤ 4000 code points.
 */
export function bodyShapes(): BodyShape[] {
  const family = '\u{1F468}\u200D\u{1F469}\u200D\u{1F467}\u200D\u{1F466}'; // 👨‍👩‍👧‍👦: 7 code points, 1 grapheme
  const astronaut = '\u{1F469}\u{1F3FD}\u200D\u{1F680}'; // 👩🏽‍🚀: 4 code points, 1 grapheme
  const accented = 'e\u0301\u0301\u0301'; // 4 code points, 1 grapheme
  const manyKeys = Array.from({ length: 100_000 }, (_, index) => `"${index.toString(36).padStart(5, '0')}":0`).join(',');
  const invalid = (code: string) => `400 ${code}`;
  const shapes: BodyShape[] = [
    { name: 'normal small create', kind: 'normal', body: json({ name: 'Fish', description: 'Aquatic pets' }), expected: '201' },
    { name: 'name: ASCII (~1,048,000 chars)', kind: 'hostile', body: fill('{"name":"', 'a', '"}'), expected: invalid('validation_failed') },
    { name: 'description: ASCII (~1,048,000 chars)', kind: 'hostile', body: fill('{"name":"x","description":"', 'a', '"}'), expected: invalid('validation_failed') },
    { name: 'name: emoji 😀 (~262,000)', kind: 'hostile', body: fill('{"name":"', '\u{1F600}', '"}'), expected: invalid('validation_failed') },
    { name: 'name: family ZWJ emoji 👨‍👩‍👧‍👦 (~41,900)', kind: 'hostile', body: fill('{"name":"', family, '"}'), expected: invalid('validation_failed') },
    { name: 'name: one letter + ~524,000 × U+0301', kind: 'hostile', body: fill('{"name":"e', '\u0301', '"}'), expected: invalid('validation_failed') },
    { name: 'name: JSON escapes \\u00e9 (~174,700)', kind: 'hostile', body: fill('{"name":"', '\\u00e9', '"}'), expected: invalid('validation_failed') },
    { name: '100,000 distinct keys', kind: 'hostile', body: Buffer.from(`{${manyKeys}}`), expected: invalid('invalid_json') },
    { name: 'deep nesting [[[…]]] (~524,000 levels)', kind: 'hostile', body: Buffer.from('['.repeat(LIMIT / 2) + ']'.repeat(LIMIT / 2)), expected: invalid('invalid_json') },
    { name: 'deep nesting {"a":{"a":…}} (~174,700 levels)', kind: 'hostile', body: nestedObjects(), expected: invalid('invalid_json') },
    { name: 'name: array of 200,000 strings', kind: 'hostile', body: Buffer.from(`{"name":[${Array(200_000).fill('"ab"').join(',')}]}`), expected: invalid('validation_failed') },
    { name: 'name: array of 500,000 numbers', kind: 'hostile', body: Buffer.from(`{"name":[${Array(500_000).fill('0').join(',')}]}`), expected: invalid('validation_failed') },
    { name: 'name: one number of ~1,048,000 digits', kind: 'hostile', body: fill('{"name":', '9', '}'), expected: invalid('validation_failed') },
    { name: '80,000 duplicate "name" keys', kind: 'hostile', body: Buffer.from(`{${Array(80_000).fill('"name":"xyz"').join(',')}}`), expected: invalid('invalid_json') },
    { name: 'whitespace padding around a valid body', kind: 'hostile', body: padded(), expected: '201' },
    { name: 'largest passing: ASCII (100 + 1000 chars)', kind: 'largest-passing', body: json({ name: 'n'.repeat(100), description: 'd'.repeat(1000) }), expected: '201' },
    { name: 'largest passing: emoji 👩🏽‍🚀 (400 + 4000 code points)', kind: 'largest-passing', body: json({ name: astronaut.repeat(100), description: astronaut.repeat(1000) }), expected: '201' },
    { name: 'largest passing: e + 3 × U+0301 (400 + 4000 code points)', kind: 'largest-passing', body: json({ name: accented.repeat(100), description: accented.repeat(1000) }), expected: '201' },
  ];
  for (const shape of shapes) {
    if (shape.body.byteLength > LIMIT) throw new Error(`the body "${shape.name}" is over the limit: ${shape.body.byteLength} bytes`);
  }
  return shapes;
}

/** `{"a":{"a":…null…}}` as deep as fits in the limit. */
function nestedObjects(): Buffer {
  const depth = Math.floor((LIMIT - 4) / 6);
  return Buffer.from('{"a":'.repeat(depth) + 'null' + '}'.repeat(depth));
}

/** A valid small body with half of the rest of the limit in whitespace before it and half after. */
function padded(): Buffer {
  const valid = '{"name":"Padded","description":"between whitespace"}';
  const side = Math.floor((LIMIT - valid.length) / 2);
  const whitespace = ' \n\t\r'.repeat(Math.ceil(side / 4)).slice(0, side);
  return Buffer.from(whitespace + valid + whitespace);
}

interface Answer {
  answer: string;
  ms: number;
}

/** One request, one at a time on `agent`'s connection; answers `201`, `400 <code>` or `error <code>`. */
function send(agent: Agent, port: number, method: 'GET' | 'POST', body?: Buffer): Promise<Answer> {
  return new Promise((resolve) => {
    const started = performance.now();
    const headers: Record<string, string | number> = { authorization: `Bearer ${BENCH_KEY}` };
    if (body) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = body.byteLength;
    }
    const outgoing = request({ host: '127.0.0.1', port, method, path: '/v1/categories', agent, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => {
        const ms = performance.now() - started;
        const status = response.statusCode ?? 0;
        if (status < 400) {
          resolve({ answer: String(status), ms });
          return;
        }
        let code = '(no Error body)';
        try {
          code = String((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { code?: unknown }).code);
        } catch {
          // The answer is reported as it is; a body that is not the Error body shows as such.
        }
        resolve({ answer: `${status} ${code}`, ms });
      });
      response.on('error', (error: NodeJS.ErrnoException) => resolve({ answer: `error ${error.code ?? error.message}`, ms: performance.now() - started }));
    });
    outgoing.on('error', (error: NodeJS.ErrnoException) => resolve({ answer: `error ${error.code ?? error.message}`, ms: performance.now() - started }));
    outgoing.end(body);
  });
}

const connection = () => new Agent({ keepAlive: true, maxSockets: 1 });

/** Runs the hostile-body benchmark; `log` reports progress. */
export async function runHostileBenchmark({ quick }: HostileBenchOptions, log: (line: string) => void): Promise<HostileBenchResult> {
  const started = performance.now();
  const settings = quick
    ? { rounds: 2, requestsPerRound: 2, warmupRequests: 1, concurrentPasses: 1, aloneGets: 30 }
    : { rounds: 5, requestsPerRound: 8, warmupRequests: 3, concurrentPasses: 4, aloneGets: 200 };
  const shapes = bodyShapes();
  const pinned = pinSelf(1);
  const servers = new Map<HostileServer, { port: number; child: ChildProcess; agent: Agent }>();
  try {
    for (const name of HOSTILE_SERVERS) {
      const { port, child } = await startServerProcess(name, {}, pinned ? 0 : undefined);
      servers.set(name, { port, child, agent: connection() });
    }
    const server = (name: HostileServer) => servers.get(name) as { port: number; child: ChildProcess; agent: Agent };

    // The concurrent GET first, while the list still holds three categories (creates make it longer), with
    // the hostile bodies that create nothing.
    const refused = shapes.filter((shape) => shape.kind === 'hostile' && shape.expected !== '201');
    const concurrent = {} as Record<HostileServer, ConcurrentGet>;
    for (const name of HOSTILE_SERVERS) {
      const { port, agent } = server(name);
      for (const shape of refused) for (let i = 0; i < settings.warmupRequests; i++) await send(agent, port, 'POST', shape.body);
      const getAgent = connection();
      const answers: string[] = [];
      const get = async () => {
        const { answer, ms } = await send(getAgent, port, 'GET');
        if (!answers.includes(answer)) answers.push(answer);
        return ms;
      };
      const alone: number[] = [];
      for (let i = 0; i < settings.aloneGets; i++) alone.push(await get());
      const under: number[] = [];
      // The body in flight when each GET was sent, to name the one the slowest GET waited for.
      const during: string[] = [];
      let inFlight = '';
      let sending = true;
      const gets = (async () => {
        while (sending) {
          during.push(inFlight);
          under.push(await get());
        }
      })();
      let hostileRequests = 0;
      for (let pass = 0; pass < settings.concurrentPasses; pass++) {
        for (const shape of refused) {
          inFlight = shape.name;
          await send(agent, port, 'POST', shape.body);
          hostileRequests++;
        }
      }
      sending = false;
      await gets;
      getAgent.destroy();
      const maxMs = Math.max(...under);
      concurrent[name] = {
        alone: { p50Ms: median(alone), maxMs: Math.max(...alone), requests: alone.length },
        underHostile: { p50Ms: median(under), maxMs, requests: under.length, hostileRequests, maxDuring: during[under.indexOf(maxMs)] ?? '' },
        answers,
      };
      log(`${name}: GET alone p50 ${median(alone).toFixed(2)} ms, max ${Math.max(...alone).toFixed(2)} ms; while hostile bodies are sent p50 ${median(under).toFixed(2)} ms, max ${maxMs.toFixed(2)} ms (sent during: ${concurrent[name].underHostile.maxDuring})`);
    }

    // Warm-up of the bodies not sent yet, and the cost of reading the stats (subtracted from every round).
    const overhead: number[] = [];
    for (const name of HOSTILE_SERVERS) {
      const { port, agent, child } = server(name);
      for (const shape of shapes) {
        if (refused.includes(shape)) continue;
        for (let i = 0; i < settings.warmupRequests; i++) await send(agent, port, 'POST', shape.body);
      }
      for (let i = 0; i < 5; i++) {
        const before = await serverStats(child);
        const after = await serverStats(child);
        overhead.push(after.cpuMicros - before.cpuMicros);
      }
    }
    const statsOverheadMicros = median(overhead);

    const samples = new Map<string, { cpu: number[]; wall: number[]; answers: string[] }>();
    const key = (name: HostileServer, shape: BodyShape) => `${name}\u0000${shape.name}`;
    for (const name of HOSTILE_SERVERS) for (const shape of shapes) samples.set(key(name, shape), { cpu: [], wall: [], answers: [] });
    for (let round = 1; round <= settings.rounds; round++) {
      for (const name of HOSTILE_SERVERS) {
        const { port, agent, child } = server(name);
        for (const shape of shapes) {
          const sample = samples.get(key(name, shape)) as { cpu: number[]; wall: number[]; answers: string[] };
          const before = await serverStats(child);
          for (let i = 0; i < settings.requestsPerRound; i++) {
            const { answer, ms } = await send(agent, port, 'POST', shape.body);
            sample.wall.push(ms);
            if (!sample.answers.includes(answer)) sample.answers.push(answer);
          }
          const after = await serverStats(child);
          sample.cpu.push(Math.max(0, after.cpuMicros - before.cpuMicros - statsOverheadMicros) / settings.requestsPerRound / 1000);
        }
      }
      log(`hostile bodies: round ${round}/${settings.rounds}`);
    }

    const cells = {} as Record<HostileServer, Record<string, HostileCell>>;
    for (const name of HOSTILE_SERVERS) {
      cells[name] = {};
      for (const shape of shapes) {
        const sample = samples.get(key(name, shape)) as { cpu: number[]; wall: number[]; answers: string[] };
        cells[name][shape.name] = {
          answers: sample.answers,
          cpuMs: median(sample.cpu),
          cpuRoundsMs: sample.cpu,
          wallMs: median(sample.wall),
          requests: sample.wall.length,
        };
      }
    }
    const measured = shapes.map(({ name, kind, body, expected }) => ({ name, kind, bytes: body.byteLength, expected }));
    return {
      shapes: measured,
      cells,
      concurrent,
      servers: [...HOSTILE_SERVERS],
      pinned,
      rounds: settings.rounds,
      requestsPerRound: settings.requestsPerRound,
      warmupRequests: settings.warmupRequests,
      statsOverheadMicros,
      worst: worstHostileBody(measured, cells),
      seconds: (performance.now() - started) / 1000,
    };
  } finally {
    for (const { child, agent } of servers.values()) {
      agent.destroy();
      child.kill('SIGTERM');
    }
    unpinSelf();
  }
}

/** The hostile (1 MiB) body with the most server CPU per request, over every server. */
function worstHostileBody(
  shapes: HostileBenchResult['shapes'],
  cells: HostileBenchResult['cells'],
): HostileBenchResult['worst'] {
  let worst: HostileBenchResult['worst'] = { shape: '(none)', server: HOSTILE_SERVERS[0], cpuMs: Number.NaN };
  for (const shape of shapes) {
    if (shape.kind !== 'hostile') continue;
    for (const server of HOSTILE_SERVERS) {
      const cpuMs = cells[server][shape.name]?.cpuMs ?? Number.NaN;
      if (Number.isNaN(worst.cpuMs) || cpuMs > worst.cpuMs) worst = { shape: shape.name, server, cpuMs };
    }
  }
  return worst;
}
