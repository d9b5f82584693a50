/**
 * The options of `createPetstore`, `createRateLimiter`, `staticApiKeys` and `managedApiKeys`, checked once, when
 * they are created: a wrong option is one `TypeError` at start-up that names the option and what it accepts,
 * never a 500 or 503 on every request. The inputs of the managed keys' operations (issue, update, …) are
 * checked the same way, at each call.
 */
import * as v from 'valibot';
import { B64TOKEN, MAX_API_KEY_LENGTH } from './auth/bearer.js';
import { PLAN_NAMES } from './auth/principal.js';
import { OPERATIONS } from './http/operations.js';
import { isHttpUrl } from './openapi/document.js';

const describe = (value: unknown): string => {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value === 'function') return 'a function';
  return Array.isArray(value) ? 'an array' : `an object`;
};

const wholeNumber = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  v.pipe(
    v.number(`must be a whole number from ${min}`),
    v.safeInteger(`must be a whole number from ${min}`),
    v.minValue(min, `must be at least ${min}`),
    v.maxValue(max, `must be at most ${max}`),
  );

const method = (what: string) => v.function(`must be ${what}`);

/**
 * The message of an object schema's own issues: a key it does not have (`unknown`), a key that is missing
 * (`is required`, with what that key must be), or a value that is not an object at all (`must be <what>`).
 */
const objectMessage =
  (what: string, entries: Record<string, v.GenericSchema>, unknown: string) =>
  (issue: v.BaseIssue<unknown>): string => {
    if (issue.expected === 'never') return unknown;
    const key = issue.path?.at(-1)?.key;
    if (issue.expected?.startsWith('"') && typeof key === 'string') {
      const entry = entries[key] as { message?: unknown; expects?: unknown; requirement?: unknown } | undefined;
      const needed = (entry as { mustBe?: unknown } | undefined)?.mustBe ?? entry?.message;
      return typeof needed === 'string' ? `is required: it ${needed}` : 'is required';
    }
    return `must be ${what}`;
  };

/** A strict object: unknown keys are refused (a misspelt option never goes unnoticed). */
function object<T extends Record<string, v.GenericSchema>>(entries: T, what: string) {
  return v.strictObject(entries, objectMessage(what, entries, `is not a field of ${what} (fields: ${Object.keys(entries).join(', ')})`));
}

/** An object with the given methods (other properties are the implementation's own). */
const implementing = (what: string, methods: readonly string[]) => {
  const entries = Object.fromEntries(methods.map((name) => [name, method('a function')]));
  const schema = v.looseObject(entries, objectMessage(what, entries, ''));
  // Read by objectMessage when the whole object is missing from its parent.
  return Object.assign(schema, { mustBe: `must be ${what}` });
};

/** Plan limits: `{ requestsPerMinute, requestsPerDay }`, whole numbers ≥ 0. */
export const PlanLimitsSchema = object(
  { requestsPerMinute: wholeNumber(0), requestsPerDay: wholeNumber(0) },
  '{ requestsPerMinute, requestsPerDay } (whole numbers >= 0)',
);

const AlgorithmSchema = v.picklist(['fixed', 'sliding', 'gcra'], "must be 'fixed', 'sliding' or 'gcra'");

/**
 * A plan's entry in `plans` (and `anonymous`): its limits and, optionally, the algorithm its windows count by
 * (default: `algorithm` of the rate-limit options, else `fixed`).
 */
export const PlanPolicySchema = object(
  { requestsPerMinute: wholeNumber(0), requestsPerDay: wholeNumber(0), algorithm: v.optional(AlgorithmSchema) },
  "{ requestsPerMinute, requestsPerDay } (whole numbers >= 0), and optionally algorithm ('fixed', 'sliding' or 'gcra')",
);

const RateLimitStoreSchema = implementing('a RateLimitStore (an object with consume(key, request), peek(key, nowMs) and reset(key))', [
  'consume',
  'peek',
  'reset',
]);

/** A fail-open insurance store is only ever consumed (never peeked or reset: it is per process). */
const InsuranceStoreSchema = implementing('a RateLimitStore (an object with consume(key, request))', ['consume']);

const planNames = PLAN_NAMES.join(', ');
const PlansSchema = v.strictObject(
  Object.fromEntries(PLAN_NAMES.map((plan) => [plan, v.optional(PlanPolicySchema)])),
  (issue) => (issue.expected === 'never' ? `is not a plan (plans: ${planNames})` : 'must be an object of plans'),
);

const BanSchema = v.union(
  [
    v.literal(false),
    object({ rejectedThreshold: wholeNumber(1), intervalMs: wholeNumber(1), durationMs: wholeNumber(1) }, 'a ban policy'),
  ],
  'must be { rejectedThreshold, intervalMs, durationMs } (whole numbers >= 1), or false for no bans',
);

const StoreFailureSchema = v.variant(
  'mode',
  [
    object({ mode: v.literal('fail-closed'), retryAfterSeconds: v.optional(wholeNumber(1)) }, "{ mode: 'fail-closed', retryAfterSeconds? }"),
    object({ mode: v.literal('fail-open'), insuranceStore: InsuranceStoreSchema }, "{ mode: 'fail-open', insuranceStore }"),
  ],
  "must be { mode: 'fail-closed', retryAfterSeconds? } or { mode: 'fail-open', insuranceStore }",
);

const ClockSchema = implementing('a clock (an object with now(), Unix epoch ms)', ['now']);

const rateLimitEntries = {
  store: RateLimitStoreSchema,
  anonymousStore: v.optional(RateLimitStoreSchema),
  algorithm: v.optional(AlgorithmSchema),
  plans: v.optional(PlansSchema),
  anonymous: v.optional(PlanPolicySchema),
  ban: v.optional(BanSchema),
  onStoreFailure: v.optional(StoreFailureSchema),
  onStoreError: v.optional(method('a function (error) => void')),
  standardHeaders: v.optional(v.boolean('must be true or false')),
  ipv6Subnet: v.optional(wholeNumber(1, 128)),
};

/**
 * Options of a factory: unknown names are refused, listing the options there are; `hints` adds what to do
 * instead, for names that belong elsewhere.
 */
function options<T extends Record<string, v.GenericSchema>>(entries: T, hints: Record<string, string> = {}) {
  const unknown = `is not an option (options: ${Object.keys(entries).join(', ')})`;
  const message = objectMessage('an object of options', entries, unknown);
  return v.strictObject(entries, (issue) => {
    const key = issue.path?.at(-1)?.key;
    const hint = issue.expected === 'never' && typeof key === 'string' && Object.hasOwn(hints, key) ? hints[key] : undefined;
    return hint === undefined ? message(issue) : `${unknown}; ${hint}`;
  });
}

/** The names `rateLimit.cost` takes: every operation, and `guard` (the host's routes behind `petstore.guard`). */
export const COST_NAMES = [...OPERATIONS.map((operation) => operation.operationId), 'guard'] as const;

const CostSchema = v.strictObject(
  Object.fromEntries(COST_NAMES.map((name) => [name, v.optional(wholeNumber(1))])),
  (issue) =>
    issue.expected === 'never' ? `is not an operation or guard (names: ${COST_NAMES.join(', ')})` : 'must be an object of costs by operationId',
);

/**
 * `rateLimit` of `createPetstore`: the engine's options, plus `anonymousKey` (a function of the request) and
 * `cost` (units per operation).
 */
export const RateLimitOptionsSchema = options({
  ...rateLimitEntries,
  anonymousKey: v.optional(method('a function (request) => string | undefined')),
  cost: v.optional(CostSchema),
});

/**
 * The options of `createRateLimiter`: the engine's options plus `clock`. No `anonymousKey`: the engine sees no
 * request, its caller passes the anonymous key to `consume({ anonymousKey })`.
 */
export const RateLimiterOptionsSchema = options(
  { ...rateLimitEntries, clock: v.optional(ClockSchema) },
  {
    anonymousKey: 'the engine sees no request: pass the key to consume({ anonymousKey })',
    cost: 'the engine charges what its caller says: pass consume(subject, { cost })',
  },
);

const operationIds = OPERATIONS.map((operation) => operation.operationId);
const perOperation = <T extends v.GenericSchema>(schema: T) =>
  v.strictObject(
    Object.fromEntries(operationIds.map((id) => [id, v.optional(schema)])) as Record<string, v.OptionalSchema<T, undefined>>,
    (issue) => (issue.expected === 'never' ? `is not an operation (operations: ${operationIds.join(', ')})` : 'must be an object by operationId'),
  );

const epochMs = v.pipe(v.number('must be Unix epoch ms'), v.safeInteger('must be Unix epoch ms (a whole number)'));
const url = v.pipe(v.string('must be a URL'), v.check(isHttpUrl, 'must be an absolute http: or https: URL without credentials'));
const DeprecationSchema = v.pipe(
  object(
    {
      deprecatedAtMs: epochMs,
      sunsetAtMs: v.optional(epochMs),
      documentationUrl: v.optional(url),
      sunsetUrl: v.optional(url),
      afterSunset: v.optional(v.picklist(['gone', 'serve'], "must be 'gone' or 'serve'")),
    },
    'a deprecation policy',
  ),
  v.check(
    (policy) => policy.sunsetAtMs === undefined || policy.sunsetAtMs >= policy.deprecatedAtMs,
    'the sunset (sunsetAtMs) must not precede the deprecation (deprecatedAtMs)',
  ),
);

const ApiKeyStoreSchema = implementing(
  'an ApiKeyStore (an object with findPrincipal(apiKeyHash); staticApiKeys([...]) and managedApiKeys({ store }) make one) or an array of them',
  ['findPrincipal'],
);
const ApiKeyStoresSchema = v.pipe(
  v.array(ApiKeyStoreSchema, 'must be an ApiKeyStore or an array of them'),
  v.minLength(1, 'must hold at least one ApiKeyStore'),
);

const petstoreEntries = {
  apiKeys: v.lazy((input) => (Array.isArray(input) ? ApiKeyStoresSchema : ApiKeyStoreSchema)),
  categories: implementing('a CategoryStore (an object with list(), create(newCategory) and createIdempotent(newCategory, request))', [
    'list',
    'create',
    'createIdempotent',
  ]),
  rateLimit: RateLimitOptionsSchema,
  handlers: v.optional(
    v.strictObject(
      { getPetById: v.optional(method('a handler function')), listStoreOrders: v.optional(method('a handler function')) },
      (issue) => (issue.expected === 'never' ? 'is not a host operation (host operations: getPetById, listStoreOrders)' : 'must be an object of handlers'),
    ),
  ),
  deprecations: v.optional(perOperation(v.nullable(DeprecationSchema))),
  stability: v.optional(perOperation(v.picklist(['experimental', 'beta'], "must be 'experimental' or 'beta'"))),
  openapi: v.optional(
    object(
      {
        servers: v.optional(object({ production: v.optional(url), staging: v.optional(url) }, 'the servers')),
        title: v.optional(v.string('must be a string')),
        description: v.optional(v.string('must be a string')),
        license: v.optional(
          object(
            { name: v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty')), url: v.optional(url) },
            'the license ({ name, url? })',
          ),
        ),
      },
      'the description options',
    ),
  ),
  clock: v.optional(ClockSchema),
  bodyLimitBytes: v.optional(wholeNumber(1)),
  idempotency: v.optional(object({ retentionMs: v.optional(wholeNumber(1000)) }, 'the idempotency options ({ retentionMs? })')),
  realm: v.optional(v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty'))),
  prefix: v.optional(
    v.pipe(v.string('must be a string'), v.regex(/^(?:|\/.*[^/])$/, 'must be empty or start with "/" and not end with "/"')),
  ),
  docs: v.optional(
    v.union(
      [
        v.boolean(),
        object(
          { title: v.optional(v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty'))), tryItOut: v.optional(v.boolean('must be true or false')) },
          'the reference page options ({ title?, tryItOut? })',
        ),
      ],
      'must be true, false or { title?, tryItOut? }',
    ),
  ),
  onEvent: v.optional(method('a function (event) => void')),
  onInternalError: v.optional(method('a function (error) => void')),
  onWarning: v.optional(method('a function (warning) => void')),
};

/** The options of `createPetstore`. */
export const PetstoreOptionsSchema = options(petstoreEntries);

/** One entry of `staticApiKeys`. The key itself is never quoted in a message. */
const StaticApiKeySchema = object(
  {
    key: v.pipe(
      v.string('must be a string'),
      v.minLength(1, 'must not be empty'),
      // A key a client could never present (RFC 6750 bearer syntax, our length bound) is a setup mistake.
      v.maxLength(MAX_API_KEY_LENGTH, `must be at most ${MAX_API_KEY_LENGTH} characters`),
      v.regex(B64TOKEN, 'must be a bearer token (RFC 6750 b64token: letters, digits, - . _ ~ + / and trailing =)'),
    ),
    plan: v.picklist(PLAN_NAMES, `must be one of ${planNames}`),
    accountId: v.optional(v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty'))),
    limits: v.optional(PlanLimitsSchema),
  },
  'an API key',
);

/** The argument of `staticApiKeys`. */
export const StaticApiKeysSchema = v.array(StaticApiKeySchema, 'must be an array of { key, plan, accountId?, limits? }');

/**
 * Checks `value` against `schema`.
 * @throws TypeError `<where>: <path> <problem> (got <value>)`, one line per problem (at most five).
 */
export function assertOptions<T extends v.GenericSchema>(schema: T, value: unknown, where: string): v.InferOutput<T> {
  const result = v.safeParse(schema, value, { abortPipeEarly: true });
  if (result.success) return result.output;
  const problems = result.issues.slice(0, 5).map((issue) => {
    const keys = (issue.path ?? []).map((item) => item.key);
    const path = keys.map((key) => (typeof key === 'number' ? `[${key}]` : `.${String(key)}`)).join('').replace(/^\./, '');
    // An API key is never echoed, whatever its problem; other values are, cut short. Nothing to show for a
    // missing one.
    const got = keys.at(-1) === 'key' || issue.message.startsWith('is required') ? '' : ` (got ${describe(issue.input)})`;
    return `${path === '' ? 'the options' : path} ${issue.message}${got}`;
  });
  throw new TypeError(`${where}: ${problems.join('; ')}`);
}

const ApiKeyRecordStoreSchema = implementing(
  'an ApiKeyRecordStore (an object with create, findByDigest, findByKeyId, list and update; memoryApiKeyRecordStore() makes one)',
  ['create', 'findByDigest', 'findByKeyId', 'list', 'update'],
);

/** The options of `managedApiKeys` (the prefix is checked on its own, by `assertManagedKeyPrefix`). */
export const ManagedApiKeysOptionsSchema = options({
  store: ApiKeyRecordStoreSchema,
  prefix: v.optional(v.string('must be a string')),
  cache: v.optional(
    object(
      {
        maxKeys: v.optional(wholeNumber(1)),
        ttlMs: v.optional(wholeNumber(1)),
        maxUnknownKeys: v.optional(wholeNumber(1)),
        unknownTtlMs: v.optional(wholeNumber(1)),
      },
      'the cache options ({ maxKeys?, ttlMs?, maxUnknownKeys?, unknownTtlMs? }, whole numbers >= 1)',
    ),
  ),
  clock: v.optional(ClockSchema),
});

/**
 * Text an operator gives (an account id, a key's name): 1–200 characters (UTF-16 code units, as JavaScript
 * counts them), no control characters, no unpaired surrogates.
 */
const label = v.pipe(
  v.string('must be a string'),
  v.minLength(1, 'must not be empty'),
  v.maxLength(200, 'must be at most 200 characters'),
  v.regex(/^[^\u0000-\u001f\u007f-\u009f]*$/, 'must not contain control characters'),
  v.check((text) => !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(text), 'must not contain unpaired surrogates'),
);
const plan = v.picklist(PLAN_NAMES, `must be one of ${planNames}`);

/** The input of `managedApiKeys(...).issue`. */
export const IssueApiKeySchema = v.pipe(
  object(
    {
      accountId: label,
      plan,
      limits: v.optional(PlanLimitsSchema),
      name: v.optional(label),
      expiresAtMs: v.optional(wholeNumber(0)),
      expiresInMs: v.optional(wholeNumber(1)),
    },
    '{ accountId, plan, limits?, name?, expiresAtMs? or expiresInMs? }',
  ),
  v.check((input) => input.expiresAtMs === undefined || input.expiresInMs === undefined, 'give expiresAtMs or expiresInMs, not both'),
);

/** The input of `managedApiKeys(...).update`. */
export const UpdateApiKeySchema = object(
  { plan: v.optional(plan), limits: v.optional(v.nullable(PlanLimitsSchema)), name: v.optional(v.nullable(label)) },
  '{ plan?, limits? (null clears), name? (null clears) }',
);

/** The options of `managedApiKeys(...).rotate`. */
export const RotateApiKeySchema = object({ graceMs: v.optional(wholeNumber(0)) }, '{ graceMs? } (a whole number of ms >= 0)');

/** The options of `managedApiKeys(...).list`. */
export const ListApiKeysSchema = object(
  { accountId: v.optional(label), limit: v.optional(wholeNumber(1, 1000)), after: v.optional(v.string('must be a string')) },
  '{ accountId?, limit? (1-1000), after? }',
);

/** `{ keyId }`: the key id given to `get`, `update`, `rotate` or `revoke`, wrapped so a message names it. */
export const KeyIdSchema = object(
  { keyId: v.pipe(v.string('must be a string'), v.minLength(1, 'must not be empty'), v.maxLength(200, 'must be at most 200 characters')) },
  '{ keyId }',
);
