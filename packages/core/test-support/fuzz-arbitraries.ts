/**
 * fast-check generators of well-formed and hostile requests for the pipeline's fuzz tests
 * (`pipeline.fuzz.test.ts`), and the hostile body shapes those tests send. For this package's own tests only;
 * not exported.
 *
 * Values that can be large (bodies, long paths and headers) are generated as small descriptions (a shape and
 * a count) and built when a request is sent, so generating, shrinking and printing a counterexample stay cheap.
 */
import fc from 'fast-check';
import { FREE_KEY, ONE_PER_MINUTE_KEY } from './petstore.js';
import type { BodyReadResult, PetstoreHeaders, PetstoreRequest, PetstoreRequestBody } from '../src/http/types.js';

/** An Enterprise key with limits no fuzz run reaches. */
export const ENTERPRISE_KEY = 'fuzz-enterprise-key-5b2e91c47d0a';
/** Every valid key of the fuzz petstore: none of them may ever appear in an answer. */
export const VALID_KEYS: readonly string[] = [ENTERPRISE_KEY, FREE_KEY, ONE_PER_MINUTE_KEY];

/** Bytes of a mebibyte. */
export const MEBIBYTE = 1_048_576;
/** The largest hostile body of the property runs. */
export const PROPERTY_BODY_BYTES = 256 * 1024;

// ---------------------------------------------------------------------------------------------------------
// Hostile body shapes
// ---------------------------------------------------------------------------------------------------------

/** A family of bodies that grow with a count: `build(count)` is the JSON text (or raw bytes). */
export interface HostileShape {
  name: string;
  build(count: number): string | Uint8Array;
  /** The parsed value of `build(count)`, for shapes whose text `JSON.parse` itself is slow on (deep nesting). */
  value?(count: number): unknown;
  /** Counts at and around the bounds the library sets for this shape. */
  boundaries: readonly number[];
}

const encoder = new TextEncoder();

function nestedArrays(count: number): unknown {
  let value: unknown[] = [];
  for (let level = 1; level < count; level++) value = [value];
  return value;
}

function nestedObjects(count: number): unknown {
  let value: unknown = 0;
  for (let level = 0; level < count; level++) value = { a: value };
  return value;
}

/** Every hostile shape; `count` is the number of repetitions of the shape's unit. */
export const HOSTILE_SHAPES: readonly HostileShape[] = [
  // A name of plain letters: 1..100 are valid (201), 0 and 101+ are not.
  { name: 'long name', build: (n) => `{"name":"${'a'.repeat(n)}"}`, boundaries: [0, 1, 100, 101, 400, 401] },
  // One grapheme cluster of n+1 code points: valid up to 400 code points.
  { name: 'combining marks', build: (n) => `{"name":"e${'\u0301'.repeat(n)}"}`, boundaries: [99, 100, 399, 400] },
  // Family emoji: one grapheme cluster of 7 code points each.
  { name: 'emoji sequences', build: (n) => `{"name":"${'\u{1F468}\u200D\u{1F469}\u200D\u{1F467}\u200D\u{1F466}'.repeat(n)}"}`, boundaries: [1, 57, 58, 100, 101] },
  // A description of n "é" written as e + combining acute: 1000 characters and 2000 code points are valid.
  { name: 'long description', build: (n) => `{"name":"x","description":"${'e\u0301'.repeat(n)}"}`, boundaries: [1000, 1001, 2000, 2001] },
  // n unknown members next to a valid name: 1,000 members in all are parsed, 1,001 are not.
  {
    name: 'many keys',
    build: (n) => `{"name":"x"${Array.from({ length: n }, (_, index) => `,"k${String(index).padStart(7, '0')}":0`).join('')}}`,
    boundaries: [0, 998, 999, 1000, 1001],
  },
  { name: 'deep arrays', build: (n) => `${'['.repeat(n)}${']'.repeat(n)}`, value: nestedArrays, boundaries: [1, 32, 33] },
  { name: 'deep objects', build: (n) => `${'{"a":'.repeat(n)}0${'}'.repeat(n)}`, value: nestedObjects, boundaries: [1, 32, 33] },
  { name: 'closers before openers', build: (n) => `${']'.repeat(n)}${'['.repeat(n)}`, boundaries: [1, 40] },
  { name: 'long array', build: (n) => `{"name":"x","tags":[${'0,'.repeat(n)}0]}`, boundaries: [0, 1, 1000] },
  { name: 'long number', build: (n) => `{"name":"x","n":1${'0'.repeat(n)}}`, boundaries: [0, 308, 309, 400] },
  { name: 'long top-level number', build: (n) => `-0.${'0'.repeat(n)}1e-999999`, boundaries: [0, 20] },
  // A name of n escaped quotes: 1..100 are valid (201).
  { name: 'escaped quotes', build: (n) => `{"name":"${'\\"'.repeat(n)}"}`, boundaries: [1, 100, 101] },
  // Brackets and colons inside a string are text, not structure: up to 33 repetitions (99 characters) are valid.
  { name: 'brackets in a string', build: (n) => `{"name":"${'[{:'.repeat(n)}"}`, boundaries: [1, 11, 33, 34] },
  { name: 'escaped combining marks', build: (n) => `{"name":"x${'\\u0301'.repeat(n)}"}`, boundaries: [399, 400] },
  { name: 'escaped control characters', build: (n) => `{"name":"${'\\u0000'.repeat(n)}"}`, boundaries: [0, 1] },
  { name: 'unclosed string', build: (n) => `{"name":"${'a'.repeat(n)}`, boundaries: [0, 1] },
  // Valid JSON padded with whitespace: always a valid NewCategory.
  { name: 'whitespace padding', build: (n) => `${' '.repeat(n)}{"name":"padded"}${'\n'.repeat(n)}`, boundaries: [0, 1] },
  {
    name: 'invalid UTF-8',
    build: (n) => {
      const head = encoder.encode('{"name":"');
      const bytes = new Uint8Array(head.byteLength + n + 2);
      bytes.set(head);
      bytes.fill(0xff, head.byteLength, head.byteLength + n);
      bytes.set(encoder.encode('"}'), head.byteLength + n);
      return bytes;
    },
    boundaries: [0, 1],
  },
];

/** Size in bytes of a built body. */
export function byteLengthOf(body: string | Uint8Array): number {
  return typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
}

/** The largest count whose body is at most `maxBytes` (every shape grows linearly with its count). */
export function countFor(shape: HostileShape, maxBytes: number): number {
  const one = byteLengthOf(shape.build(1));
  const unit = byteLengthOf(shape.build(2)) - one;
  let count = Math.max(0, Math.floor((maxBytes - (one - unit)) / unit));
  while (count > 0 && byteLengthOf(shape.build(count)) > maxBytes) count--;
  return count;
}

// ---------------------------------------------------------------------------------------------------------
// Bodies
// ---------------------------------------------------------------------------------------------------------

/** Where a body's content comes from. */
export type BodySource =
  | { source: 'text'; text: string }
  | { source: 'raw'; bytes: Uint8Array }
  | { source: 'shape'; shape: string; count: number }
  /** A valid NewCategory padded with spaces to `byteLength`, more than the 1 MiB limit. */
  | { source: 'oversized'; byteLength: number };

/** How the body reaches the pipeline (see `PetstoreRequestBody`). */
export type BodySpec =
  | { kind: 'absent' }
  | { kind: 'none' }
  | { kind: 'unreadable'; reason: 'too_large' | 'unsupported_encoding' | 'malformed' }
  | { kind: 'bytes'; asString: boolean; content: BodySource }
  | { kind: 'stream'; fails: boolean; content: BodySource }
  | { kind: 'parsed'; content: BodySource };

/** The surrogates U+D800–U+DFFF, which are not Unicode scalar values. */
const SURROGATES = { first: 0xd800, count: 0x800 };

/**
 * One Unicode scalar value (any code point but a surrogate) as a string: what fast-check's `unit: SCALAR_VALUE` draws,
 * with the same bias. Built with an unmapper, so that fast-check can still steer strings towards its dangerous
 * ones (`__proto__`, `constructor`, …) without first building its reverse map of all 1,112,064 values (about 1 s of
 * CPU per test worker that loads this file).
 */
const SCALAR_VALUE = fc.integer({ min: 0, max: 0x10ffff - SURROGATES.count }).map(
  (index) => String.fromCodePoint(index < SURROGATES.first ? index : index + SURROGATES.count),
  (value) => {
    const codePoint = typeof value === 'string' ? value.codePointAt(0) : undefined;
    if (codePoint === undefined || String.fromCodePoint(codePoint) !== value || (codePoint >= SURROGATES.first && codePoint < SURROGATES.first + SURROGATES.count)) {
      throw new Error('not one Unicode scalar value');
    }
    return codePoint < SURROGATES.first ? codePoint : codePoint - SURROGATES.count;
  },
);

const SAFE_NAME = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9 _.-]{0,40}$/);
const UNICODE_TEXT = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 });

/** NewCategory objects, valid in most cases (safe names), sometimes not (any graphemes, padding). */
const newCategory = fc.record(
  {
    name: fc.oneof(
      { weight: 4, arbitrary: SAFE_NAME },
      { weight: 1, arbitrary: UNICODE_TEXT },
      { weight: 1, arbitrary: SAFE_NAME.map((name) => `  ${name}\t\n`) },
    ),
    description: fc.oneof(fc.string({ maxLength: 60 }), UNICODE_TEXT),
  },
  { requiredKeys: ['name'] },
);

/** JSON texts that are almost a NewCategory, or not JSON at all. */
const NEAR_MISSES = [
  '',
  ' ',
  '\n\t ',
  'null',
  'true',
  '0',
  '"Dogs"',
  '[]',
  '[{"name":"Dogs"}]',
  '{}',
  '{"name":""}',
  '{"name":"   "}',
  '{"name":null}',
  '{"name":42}',
  '{"name":["Dogs"]}',
  '{"name":{"first":"Dogs"}}',
  '{"name":"Dogs","description":null}',
  '{"name":"Dogs","description":7}',
  '{"name":"Dogs","id":5}',
  '{"name":"Dogs","__proto__":{"admin":true}}',
  '{"__proto__":{"name":"Dogs"}}',
  '{"constructor":{"prototype":{"x":1}},"name":"Dogs"}',
  '{"name":"Dogs","name":"Cats"}',
  '{"name":"Do\\u0000gs"}',
  '{"name":"Dogs\\u007f"}',
  '{"name":"\\ud800"}',
  '{"name":"\u200b"}',
  '{"name":"Dogs"',
  '{"name":"Dogs"}}',
  '{"name":"Dogs"} {"name":"Cats"}',
  '{"name":"Dogs"}x',
  "{'name':'Dogs'}",
  '{name:"Dogs"}',
  '{"name":"Dogs",}',
  '{"name":"Dogs"}\u0000',
  '\ufeff{"name":"BOM"}',
  '\ufeff\ufeff{"name":"two BOMs"}',
  `{"name":"x","${'k'.repeat(100)}":1}`,
  '1e999999',
  '-',
  '{"name":"\\',
] as const;

/** Byte sequences that are not UTF-8, or only just. */
const BAD_BYTES: readonly number[][] = [
  [0xff],
  [0xc0, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xe2, 0x82],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xfe, 0xff, 0x00, 0x7b, 0x00, 0x7d],
  [0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d], // {"name":"\xc3("}
  [0xef, 0xbb, 0xbf, 0x7b, 0x22, 0x6e, 0x61, 0x6d, 0x65, 0x22, 0x3a, 0x22, 0x78, 0x22, 0x7d], // BOM + {"name":"x"}
];

const shapeSource = fc.oneof(
  ...HOSTILE_SHAPES.map((shape) =>
    fc.record({
      source: fc.constant('shape' as const),
      shape: fc.constant(shape.name),
      count: fc.oneof(
        fc.constantFrom(...shape.boundaries),
        fc.integer({ min: 0, max: countFor(shape, PROPERTY_BODY_BYTES) }),
      ),
    }),
  ),
);

const oversizedSource: fc.Arbitrary<BodySource> = fc
  .integer({ min: MEBIBYTE + 1, max: 2 * MEBIBYTE })
  .map((byteLength) => ({ source: 'oversized', byteLength }));

const validSource: fc.Arbitrary<BodySource> = newCategory.map((value) => ({ source: 'text', text: JSON.stringify(value) }));

const anySource: fc.Arbitrary<BodySource> = fc.oneof(
  { weight: 3, arbitrary: validSource },
  { weight: 2, arbitrary: fc.constantFrom(...NEAR_MISSES).map((text): BodySource => ({ source: 'text', text })) },
  { weight: 2, arbitrary: fc.json({ maxDepth: 3 }).map((text): BodySource => ({ source: 'text', text })) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }).map((value): BodySource => ({ source: 'text', text: JSON.stringify(value) ?? 'null' })) },
  { weight: 1, arbitrary: fc.string({ unit: SCALAR_VALUE, maxLength: 80 }).map((text): BodySource => ({ source: 'text', text })) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 256 }).map((bytes): BodySource => ({ source: 'raw', bytes })) },
  { weight: 1, arbitrary: fc.constantFrom(...BAD_BYTES).map((bytes): BodySource => ({ source: 'raw', bytes: Uint8Array.from(bytes) })) },
  { weight: 3, arbitrary: shapeSource },
  { weight: 1, arbitrary: oversizedSource },
);

/** A body spec of any kind carrying content from `content`. */
function bodyOf(content: fc.Arbitrary<BodySource>): fc.Arbitrary<BodySpec> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('bytes' as const), asString: fc.boolean(), content }) },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant('stream' as const), fails: fc.oneof({ weight: 9, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }), content }) },
    { weight: 2, arbitrary: fc.record({ kind: fc.constant('parsed' as const), content }) },
  );
}

const emptyBody: fc.Arbitrary<BodySpec> = fc.oneof(
  fc.constant({ kind: 'absent' } as const),
  fc.constant({ kind: 'none' } as const),
  fc.record({ kind: fc.constant('unreadable' as const), reason: fc.constantFrom('too_large' as const, 'unsupported_encoding' as const, 'malformed' as const) }),
);

/** Any body: none, hostile, valid, in every kind. */
export const anyBody: fc.Arbitrary<BodySpec> = fc.oneof({ weight: 1, arbitrary: emptyBody }, { weight: 3, arbitrary: bodyOf(anySource) });
/** A valid NewCategory, in every kind a host can hand over. */
export const validBody: fc.Arbitrary<BodySpec> = bodyOf(validSource);
/** A valid NewCategory over the 1 MiB limit, in every kind. */
export const oversizedBody: fc.Arbitrary<BodySpec> = bodyOf(oversizedSource);
/** A hostile shape of up to {@link PROPERTY_BODY_BYTES}, in every kind. */
export const hostileBody: fc.Arbitrary<BodySpec> = bodyOf(shapeSource);

/** A body made ready to send, with what the test needs to know about it. */
export interface BuiltBody {
  body: PetstoreRequestBody | undefined;
  /** Size of the body's content in bytes (0 when there is none). */
  byteLength: number;
  /** The limits `read` was called with, for `stream` bodies. */
  reads: number[];
}

function contentOf(content: BodySource): string | Uint8Array {
  switch (content.source) {
    case 'text':
      return content.text;
    case 'raw':
      return content.bytes;
    case 'shape':
      return shapeNamed(content.shape).build(content.count);
    case 'oversized': {
      const bytes = new Uint8Array(content.byteLength).fill(0x20);
      bytes.set(encoder.encode('{"name":"Too big"}'));
      return bytes;
    }
  }
}

export function shapeNamed(name: string): HostileShape {
  const shape = HOSTILE_SHAPES.find((candidate) => candidate.name === name);
  if (shape === undefined) throw new Error(`no hostile shape "${name}"`);
  return shape;
}

/** A `stream` body whose `read(limit)` answers `too_large` for more than `limit` bytes, as adapters do. */
export function streamOf(bytes: Uint8Array, reads: number[], fails = false): PetstoreRequestBody {
  return {
    kind: 'stream',
    read(limitBytes: number): Promise<BodyReadResult> {
      reads.push(limitBytes);
      if (fails) return Promise.resolve({ ok: false, reason: 'unreadable' });
      if (bytes.byteLength > limitBytes) return Promise.resolve({ ok: false, reason: 'too_large' });
      return Promise.resolve({ ok: true, bytes });
    },
  };
}

function parsedValue(content: BodySource, built: string | Uint8Array): { ok: true; value: unknown } | { ok: false } {
  if (content.source === 'shape') {
    const shape = shapeNamed(content.shape);
    if (shape.value !== undefined) return { ok: true, value: shape.value(content.count) };
  }
  if (typeof built !== 'string') return { ok: false };
  try {
    return { ok: true, value: JSON.parse(built) as unknown };
  } catch {
    return { ok: false };
  }
}

/** Builds the body of a spec. A `parsed` body whose content is not JSON is sent as bytes (no host parses it). */
export function buildBody(spec: BodySpec): BuiltBody {
  const reads: number[] = [];
  switch (spec.kind) {
    case 'absent':
      return { body: undefined, byteLength: 0, reads };
    case 'none':
      return { body: { kind: 'none' }, byteLength: 0, reads };
    case 'unreadable':
      return { body: { kind: 'unreadable', reason: spec.reason }, byteLength: 0, reads };
    default:
      break;
  }
  const built = contentOf(spec.content);
  const byteLength = byteLengthOf(built);
  const bytes = (): Uint8Array => (typeof built === 'string' ? encoder.encode(built) : built);
  switch (spec.kind) {
    case 'bytes':
      return { body: { kind: 'bytes', bytes: spec.asString && typeof built === 'string' ? built : bytes() }, byteLength, reads };
    case 'stream':
      return { body: streamOf(bytes(), reads, spec.fails), byteLength, reads };
    case 'parsed': {
      const parsed = parsedValue(spec.content, built);
      return { body: parsed.ok ? { kind: 'parsed', value: parsed.value } : { kind: 'bytes', bytes: bytes() }, byteLength, reads };
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Methods, paths, client addresses
// ---------------------------------------------------------------------------------------------------------

const STANDARD_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH'] as const;

export const anyMethod: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...STANDARD_METHODS) },
  { weight: 2, arbitrary: fc.constantFrom(...STANDARD_METHODS.map((method) => method.toLowerCase()), 'Get', 'hEaD', 'pOsT') },
  {
    weight: 1,
    arbitrary: fc.constantFrom('', ' ', 'GET ', ' GET', 'G ET', 'BREW', 'M-SEARCH', 'PROPFIND', 'CONNECT', 'TRACE', 'QUERY', '__proto__', 'constructor', 'hasOwnProperty', 'G\u00c9T', '\uff27\uff25\uff34', 'GET\u0000', 'HEAD\r\n', 'HEADS'),
  },
  { weight: 1, arbitrary: fc.string({ maxLength: 24 }) },
  { weight: 1, arbitrary: fc.integer({ min: 21, max: 16_384 }).map((length) => 'X'.repeat(length)) },
);

const REAL_PATHS = ['/categories', '/store/orders', '/openapi.json', '/pets/1', '/pets/42', '/pets/%37'] as const;

const PET_IDS = [
  '0', '-1', '01', '1.5', '1e3', '0x1F', ' 1', '1 ', '+1', '9007199254740991', '9007199254740992', '12345678901234567',
  '%2f', '%2F', '%2e%2e', '..', '.', '%00', '%c0%af', '%ZZ', '%', '%252f', '%31', '%E2%82%AC', '\u0663', '\uff11', '1\u0000', '\u{1F436}',
] as const;

const ODD_PATHS = [
  '', '/', '//', '/categories/', '/Categories', '/CATEGORIES', '/%63ategories', '/categories%2f', '/categories%2F..', '/%2e%2e/categories',
  '/../categories', '/./categories', '/categories/.', '/categories/..', '/v1/categories', '/categories%00', '/categories\u0000', '/cat\u00e9gories',
  '/categories#top', '/categories;x=1', '/pets', '/pets/', '/pets//1', '/pets/1/', '/pets/1/2', '/store', '/store/orders/', '/store//orders',
  '/openapi.json/', '/OPENAPI.JSON', '/openapi', '?', '?x=1', '%c0%afcategories', '%2fcategories', '/%ZZ', '\\categories', 'categories',
  '/categories\r\nx-injected: 1', '/\u{1F436}',
] as const;

const QUERIES = ['?', '?page=2', '?a=%ZZ', '?x=%00', '?&&&', '??', '?#', '?petId=2', '?__proto__[x]=1'] as const;

/** Long paths of up to 16 KiB, built from a count. */
const longPath = fc.record({
  kind: fc.constantFrom('query', 'pet id', 'segments', 'encoded slashes', 'dot segments'),
  count: fc.integer({ min: 0, max: 16 * 1024 }),
}).map(({ kind, count }) => {
  switch (kind) {
    case 'query':
      return `/categories?${'a=1&'.repeat(Math.floor(count / 4))}`;
    case 'pet id':
      return `/pets/${'9'.repeat(count)}`;
    case 'segments':
      return `/${'a/'.repeat(Math.floor(count / 2))}`;
    case 'encoded slashes':
      return `/pets/${'%2f'.repeat(Math.floor(count / 3))}`;
    case 'dot segments':
      return `/categories${'/..'.repeat(Math.floor(count / 3))}`;
  }
});

const barePath = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...REAL_PATHS) },
  { weight: 3, arbitrary: fc.oneof(fc.constantFrom(...PET_IDS), fc.string({ maxLength: 12 }), fc.nat().map(String)).map((id) => `/pets/${id}`) },
  { weight: 3, arbitrary: fc.constantFrom(...ODD_PATHS) },
  { weight: 1, arbitrary: fc.string({ unit: SCALAR_VALUE, maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 40 }).map((path) => `/${path}`) },
  { weight: 1, arbitrary: longPath },
);

/** Paths below the prefix: real and odd ones, with trailing slashes and query strings. */
export const anyPath: fc.Arbitrary<string> = fc
  .record({
    base: barePath,
    slash: fc.oneof({ weight: 5, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
    query: fc.option(fc.oneof(fc.constantFrom(...QUERIES), fc.string({ maxLength: 30 }).map((query) => `?${query}`)), { freq: 3, nil: undefined }),
  })
  .map(({ base, slash, query }) => `${base}${slash ? '/' : ''}${query ?? ''}`);

/** Paths of read operations: mostly real, sometimes odd. */
const readPath: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.constantFrom('/categories', '/categories?page=2', '/store/orders', '/store/orders?status=placed', '/openapi.json', '/pets/1', '/pets/2', '/pets/7', '/pets/8'),
  },
  { weight: 2, arbitrary: anyPath },
);

export const anyClientAddress: fc.Arbitrary<string | undefined> = fc.constantFrom(
  '203.0.113.7',
  '198.51.100.23',
  '::ffff:203.0.113.7',
  '2001:db8::1',
  '2001:db8:0:0:1::1',
  'unknown',
  '',
  'not-an-address',
  '999.1.1.1',
  undefined,
);

// ---------------------------------------------------------------------------------------------------------
// Headers
// ---------------------------------------------------------------------------------------------------------

/** An Authorization header, and the secrets it carries (none may come back in an answer). */
export interface AuthSpec {
  value: string | string[] | undefined;
  secrets: string[];
}

const validKey = fc.oneof(
  { weight: 6, arbitrary: fc.constant(ENTERPRISE_KEY) },
  { weight: 1, arbitrary: fc.constant(FREE_KEY) },
  { weight: 2, arbitrary: fc.constant(ONE_PER_MINUTE_KEY) },
);
const spelling = fc.constantFrom('Bearer %', 'bearer %', 'BEARER %', 'Bearer   %', 'Bearer %  ');
/** A well-formed Authorization value with a valid key. */
const validAuthValue = fc.tuple(validKey, spelling).map(([key, template]) => template.replace('%', key));
/** A token no key store holds, long and distinctive enough to be found if echoed. */
const unknownToken = fc.stringMatching(/^[A-Za-z0-9._~+/-]{8,48}={0,2}$/).map((token) => `unknown-${token}`);

const validAuth: fc.Arbitrary<AuthSpec> = validAuthValue.map((value) => ({ value, secrets: [] }));

const anyAuth: fc.Arbitrary<AuthSpec> = fc.oneof(
  { weight: 2, arbitrary: fc.constant<AuthSpec>({ value: undefined, secrets: [] }) },
  { weight: 4, arbitrary: validAuth },
  { weight: 2, arbitrary: unknownToken.map((token): AuthSpec => ({ value: `Bearer ${token}`, secrets: [token] })) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.oneof(validKey, unknownToken), fc.constantFrom('Bearer', 'Bearer ', 'Bearer  ', 'Bearer % extra', 'Bearer %,', 'Bearer "%"', 'Bearer\t%', '%', 'Bearer %\u0000', 'Bearer %!', 'Bearer: %', 'Bearer=%', ' Bearer %', 'Bearer %==x'))
      .map(([key, template]): AuthSpec => ({ value: template.replace('%', key), secrets: [key] })),
  },
  {
    weight: 2,
    arbitrary: fc
      .tuple(validAuthValue, fc.oneof(validAuthValue, unknownToken.map((token) => `Bearer ${token}`)), fc.constantFrom('array', 'one-element array', 'comma-joined', 'empty array'))
      .map(([first, second, form]): AuthSpec => {
        const secrets = [first, second].map((value) => value.trim().split(/ +/).pop() as string);
        if (form === 'array') return { value: [first, second], secrets };
        if (form === 'one-element array') return { value: [first], secrets };
        if (form === 'empty array') return { value: [], secrets };
        return { value: `${first}, ${second}`, secrets };
      }),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(unknownToken, fc.constantFrom('Basic %', 'Token %', 'Digest username="%"', 'Bearerx %', 'ApiKey %', 'Negotiate %'))
      .map(([token, template]): AuthSpec => ({ value: template.replace('%', token), secrets: [token] })),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1, max: 3_000 }).map((count): AuthSpec => {
      const token = `long-${'Xy9'.repeat(count)}`;
      return { value: `Bearer ${token}`, secrets: [token] };
    }),
  },
  { weight: 1, arbitrary: fc.string({ unit: SCALAR_VALUE, maxLength: 60 }).map((value): AuthSpec => ({ value, secrets: [] })) },
);

const JSON_TYPES = ['application/json', 'application/json; charset=utf-8', 'Application/JSON; Charset=UTF-8', 'application/json;charset="utf-8"', 'APPLICATION/JSON'] as const;

const goodContentType: fc.Arbitrary<string | string[] | undefined> = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...JSON_TYPES) },
  { weight: 1, arbitrary: fc.constantFrom(...JSON_TYPES).map((type) => [type]) },
);

const anyContentType: fc.Arbitrary<string | string[] | undefined> = fc.oneof(
  { weight: 3, arbitrary: goodContentType },
  { weight: 1, arbitrary: fc.constant(undefined) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '', '  ', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx', 'application/json+x',
      'application/problem+json', 'application/json; charset', 'application/json;;', 'application/json; charset=utf-16', 'json', '*/*',
      'application/json, text/plain', 'application/json; charset=utf-8; charset=latin1', 'application /json', 'application/json\u0000',
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom<string[]>(['application/json', 'application/json'], ['application/json', 'text/plain'], ['text/plain', 'application/json'], []) },
  { weight: 1, arbitrary: fc.integer({ min: 230, max: 600 }).map((length) => `application/json; x=${'a'.repeat(length)}`) },
  { weight: 1, arbitrary: fc.integer({ min: 250, max: 600 }).map((length) => 'a'.repeat(length)) },
  { weight: 1, arbitrary: fc.string({ unit: SCALAR_VALUE, maxLength: 300 }) },
);

/** Content-Length: `right` is the true size of the body; otherwise the given value. */
export type ContentLengthSpec = { kind: 'absent' } | { kind: 'right' } | { kind: 'value'; value: string | string[] };

const goodContentLength: fc.Arbitrary<ContentLengthSpec> = fc.constantFrom({ kind: 'absent' } as const, { kind: 'right' } as const);
const anyContentLength: fc.Arbitrary<ContentLengthSpec> = fc.oneof(
  { weight: 2, arbitrary: goodContentLength },
  {
    weight: 2,
    arbitrary: fc
      .oneof(
        fc.constantFrom('0', '1', '5', '1048576', '1048577', '99999999999999999999', '-1', '-0', 'abc', '', ' 12 ', '1e9', '0x10', 'Infinity', 'NaN', '1,1'),
        fc.nat().map(String),
        fc.integer({ min: 1_048_577, max: Number.MAX_SAFE_INTEGER }).map(String),
        fc.constantFrom<string[]>(['5', '5'], ['1', '99999999'], ['2000000']),
      )
      .map((value): ContentLengthSpec => ({ kind: 'value', value })),
  },
);

const goodTransferEncoding = fc.constantFrom(undefined, undefined, 'chunked');
const anyTransferEncoding: fc.Arbitrary<string | string[] | undefined> = fc.oneof(
  { weight: 2, arbitrary: goodTransferEncoding },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'Chunked', ' chunked ', 'chunked;q=1', 'gzip', 'gzip, chunked', 'identity', 'identity, chunked', 'chunked, chunked', 'deflate', 'br', ',', '', ', chunked',
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom<string[]>(['chunked'], ['gzip', 'chunked'], ['chunked', 'chunked'], []) },
  { weight: 1, arbitrary: fc.integer({ min: 250, max: 2_000 }).map((length) => `${'x'.repeat(length)}, chunked`) },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }) },
);

const goodContentEncoding = fc.constantFrom(undefined, undefined, 'identity');
const anyContentEncoding: fc.Arbitrary<string | string[] | undefined> = fc.oneof(
  { weight: 2, arbitrary: goodContentEncoding },
  { weight: 2, arbitrary: fc.constantFrom('IDENTITY', 'gzip', 'br', 'deflate', 'gzip, identity', 'identity, identity', '', 'x-custom', ',') },
  { weight: 1, arbitrary: fc.constantFrom<string[]>(['identity', 'gzip'], ['identity'], []) },
  { weight: 1, arbitrary: fc.integer({ min: 250, max: 2_000 }).map((length) => 'i'.repeat(length)) },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }) },
);

const goodExpect = fc.constantFrom(undefined, undefined, undefined, '100-continue');
const anyExpect: fc.Arbitrary<string | string[] | undefined> = fc.oneof(
  { weight: 3, arbitrary: goodExpect },
  { weight: 1, arbitrary: fc.constantFrom('100-Continue', ' 100-continue ', `100-continue${' '.repeat(70)}`, '200-ok', '', 'expect-ct', '100-continue, x') },
  { weight: 1, arbitrary: fc.constantFrom<string[]>(['100-continue', '100-continue'], ['100-continue', 'x'], []) },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }) },
);

const extraHeaderName = fc.oneof(
  { weight: 4, arbitrary: fc.stringMatching(/^x-[a-z0-9-]{1,30}$/) },
  { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'toString', 'hasOwnProperty', 'host', 'cookie', 'x-forwarded-for', 'x-http-method-override', 'content-type ', 'authorization2', 'Authorization') },
);
const extraHeaderValue: fc.Arbitrary<string | string[] | undefined> = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: SCALAR_VALUE, maxLength: 40 }),
  fc.array(fc.string({ maxLength: 20 }), { maxLength: 3 }),
  fc.constant(undefined),
  fc.integer({ min: 1, max: 8 * 1024 }).map((length) => 'v'.repeat(length)),
);
const anyExtraHeaders = fc.dictionary(extraHeaderName, extraHeaderValue, { maxKeys: 5 });

// ---------------------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------------------

/** One generated request, as a description (see {@link buildRequest}). */
export interface FuzzCase {
  method: string;
  path: string;
  auth: AuthSpec;
  contentType: string | string[] | undefined;
  contentLength: ContentLengthSpec;
  transferEncoding: string | string[] | undefined;
  contentEncoding: string | string[] | undefined;
  expect: string | string[] | undefined;
  extraHeaders: Record<string, string | string[] | undefined>;
  body: BodySpec;
  clientAddress: string | undefined;
  /** How far the fake clock moves before this request, in ms. */
  advanceMs: number;
}

/** `good` most of the time, anything (`any`) otherwise. */
function mostly<T>(good: fc.Arbitrary<T>, any: fc.Arbitrary<T>): fc.Arbitrary<T> {
  return fc.oneof({ weight: 5, arbitrary: good }, { weight: 1, arbitrary: any });
}

const advance = fc.constantFrom(0, 0, 0, 0, 1_000, 61_000, 16 * 60_000, 86_400_000, 400 * 86_400_000, 400 * 86_400_000);
const NO_EXTRA_HEADERS = fc.constant<Record<string, string | string[] | undefined>>({});

/** Requests that create a category unless one part of them is off. */
const createCase: fc.Arbitrary<FuzzCase> = fc.record({
  method: mostly(fc.constantFrom('POST', 'POST', 'POST', 'post'), anyMethod),
  path: mostly(fc.constantFrom('/categories', '/categories?x=1'), anyPath),
  auth: mostly(validAuth, anyAuth),
  contentType: mostly(goodContentType, anyContentType),
  contentLength: mostly(goodContentLength, anyContentLength),
  transferEncoding: mostly(goodTransferEncoding, anyTransferEncoding),
  contentEncoding: mostly(goodContentEncoding, anyContentEncoding),
  expect: mostly(goodExpect, anyExpect),
  extraHeaders: mostly(NO_EXTRA_HEADERS, anyExtraHeaders),
  body: fc.oneof({ weight: 6, arbitrary: validBody }, { weight: 3, arbitrary: anyBody }, { weight: 1, arbitrary: oversizedBody }),
  clientAddress: anyClientAddress,
  advanceMs: advance,
});

/** Requests of the read operations, mostly well-formed. */
const readCase: fc.Arbitrary<FuzzCase> = fc.record({
  method: mostly(fc.constantFrom('GET', 'GET', 'HEAD', 'get', 'head'), anyMethod),
  path: readPath,
  auth: mostly(validAuth, anyAuth),
  contentType: mostly(fc.constant(undefined), anyContentType),
  contentLength: mostly(fc.constant({ kind: 'absent' } as const), anyContentLength),
  transferEncoding: mostly(fc.constant(undefined), anyTransferEncoding),
  contentEncoding: mostly(fc.constant(undefined), anyContentEncoding),
  expect: mostly(fc.constant(undefined), anyExpect),
  extraHeaders: mostly(NO_EXTRA_HEADERS, anyExtraHeaders),
  body: mostly(fc.constant({ kind: 'absent' } as const), anyBody),
  clientAddress: anyClientAddress,
  advanceMs: advance,
});

/** Requests whose every part is drawn independently. */
const chaosCase: fc.Arbitrary<FuzzCase> = fc.record({
  method: anyMethod,
  path: anyPath,
  auth: anyAuth,
  contentType: anyContentType,
  contentLength: anyContentLength,
  transferEncoding: anyTransferEncoding,
  contentEncoding: anyContentEncoding,
  expect: anyExpect,
  extraHeaders: anyExtraHeaders,
  body: anyBody,
  clientAddress: anyClientAddress,
  advanceMs: advance,
});

/** Any request: a mix of mostly-valid creates, mostly-valid reads, and independent chaos. */
export const anyCase: fc.Arbitrary<FuzzCase> = fc.oneof(
  { weight: 3, arbitrary: createCase },
  { weight: 2, arbitrary: readCase },
  { weight: 3, arbitrary: chaosCase },
);

/** Creates with a hostile body of up to {@link PROPERTY_BODY_BYTES}; the other parts are mostly valid. */
export const hostileBodyCase: fc.Arbitrary<FuzzCase> = fc.record({
  method: mostly(fc.constant('POST'), anyMethod),
  path: mostly(fc.constant('/categories'), anyPath),
  auth: mostly(fc.constant<AuthSpec>({ value: `Bearer ${ENTERPRISE_KEY}`, secrets: [] }), anyAuth),
  contentType: mostly(goodContentType, anyContentType),
  contentLength: mostly(goodContentLength, anyContentLength),
  transferEncoding: mostly(goodTransferEncoding, anyTransferEncoding),
  contentEncoding: mostly(goodContentEncoding, anyContentEncoding),
  expect: mostly(goodExpect, anyExpect),
  extraHeaders: mostly(NO_EXTRA_HEADERS, anyExtraHeaders),
  body: hostileBody,
  clientAddress: anyClientAddress,
  advanceMs: fc.constant(0),
});

/** A request made ready to send, with what the test needs to know about it. */
export interface BuiltRequest {
  request: PetstoreRequest;
  /** Size of the request in bytes: body, path and header text. */
  size: number;
  /** The limits a `stream` body's `read` was called with. */
  reads: number[];
  /** The credentials the request carried (see {@link AuthSpec}). */
  secrets: string[];
}

function setHeader(headers: Record<string, string | readonly string[] | undefined>, name: string, value: string | readonly string[] | undefined): void {
  // defineProperty, not assignment: a generated `__proto__` is an ordinary header name here.
  Object.defineProperty(headers, name, { value, enumerable: true, writable: true, configurable: true });
}

function headerText(headers: PetstoreHeaders): number {
  let size = 0;
  for (const [name, value] of Object.entries(headers)) {
    size += name.length;
    if (typeof value === 'string') size += value.length;
    else if (value !== undefined) for (const item of value) size += item.length;
  }
  return size;
}

/** Builds the request of a case: the body (see {@link buildBody}) and the headers. */
export function buildRequest(fuzzCase: FuzzCase): BuiltRequest {
  const built = buildBody(fuzzCase.body);
  const headers: Record<string, string | readonly string[] | undefined> = {};
  for (const [name, value] of Object.entries(fuzzCase.extraHeaders)) setHeader(headers, name, value);
  const contentLength =
    fuzzCase.contentLength.kind === 'absent'
      ? undefined
      : fuzzCase.contentLength.kind === 'right'
        ? String(built.byteLength)
        : fuzzCase.contentLength.value;
  const named: [string, string | readonly string[] | undefined][] = [
    ['authorization', fuzzCase.auth.value],
    ['content-type', fuzzCase.contentType],
    ['content-length', contentLength],
    ['transfer-encoding', fuzzCase.transferEncoding],
    ['content-encoding', fuzzCase.contentEncoding],
    ['expect', fuzzCase.expect],
  ];
  for (const [name, value] of named) if (value !== undefined) setHeader(headers, name, value);
  const request: PetstoreRequest = {
    method: fuzzCase.method,
    path: fuzzCase.path,
    headers,
    clientAddress: fuzzCase.clientAddress,
    ...(built.body === undefined ? {} : { body: built.body }),
  };
  return {
    request,
    size: built.byteLength + fuzzCase.path.length + headerText(headers),
    reads: built.reads,
    secrets: fuzzCase.auth.secrets,
  };
}

