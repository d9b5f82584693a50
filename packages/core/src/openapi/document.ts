/**
 * The OpenAPI 3.0.3 description of the service (version 1.0.0, tags, servers, global bearer
 * security), built from the same valibot schemas that validate requests and the same operation table that
 * routes them, so the description and the behaviour cannot drift.
 */
import { toJsonSchema, type ConversionConfig } from '@valibot/to-json-schema';
import type { OperationDefinition, OperationId, Stability } from '../http/operations.js';
import { OPERATIONS } from '../http/operations.js';
import type { DeprecationPolicy } from '../http/deprecation.js';
import { DEFAULT_PREFIX } from '../http/prefix.js';
import { DEFAULT_CATEGORY_PAGE_LIMIT, MAX_CATEGORY_PAGE_LIMIT } from '../http/category-list.js';
import { CategorySchema, ErrorBodySchema, NewCategorySchema } from '../schemas.js';
import { PLAN_NAMES, type PlanLimits, type PlanName } from '../auth/principal.js';
import { DEFAULT_ANONYMOUS_LIMITS, DEFAULT_PLAN_LIMITS } from '../rate-limit/plans.js';
import { RATE_LIMIT_ALGORITHMS, type RateLimitAlgorithm } from '../rate-limit/types.js';

/** A JSON value as the document holds it. */
export type OpenApiDocument = Record<string, unknown>;

/** Options of {@link buildOpenApiDocument}. */
export interface OpenApiOptions {
  /**
   * Base addresses: absolute `http:` or `https:` URLs without credentials, whose path is where the API is mounted
   * there (`https://api.example.com/v1`, `https://example.com/api/petstore`; a trailing `/` is dropped). Default:
   * one relative server, "this server": where the API is mounted (`/v1` unless mounted elsewhere; the served
   * description names the mount of the request that asked for it).
   */
  servers?: { production?: string; staging?: string };
  /** `info.title`. Default `Petstore`. */
  title?: string;
  /** `info.description`. */
  description?: string;
  /**
   * `info.license`: the terms under which the API's description may be used. Default `{ name: 'MIT', url:
   * 'https://opensource.org/licenses/MIT' }`, the license of the petstore packages; set your own when the API
   * you serve is under other terms.
   */
  license?: { name: string; url?: string };
}

/** `info.license` when the options give none. */
export const DEFAULT_OPENAPI_LICENSE: Readonly<{ name: string; url: string }> = Object.freeze({ name: 'MIT', url: 'https://opensource.org/licenses/MIT' });

/**
 * What the document needs besides {@link OpenApiOptions}: the resolved deprecations and stability markers, and
 * the units each operation charges to the rate limit (`x-rate-limit-cost`; default 1 for an operation not listed).
 */
export interface OpenApiOperationInfo {
  deprecations: Readonly<Partial<Record<OperationId, DeprecationPolicy>>>;
  stability: Readonly<Partial<Record<OperationId, Stability>>>;
  costs?: Readonly<Partial<Record<OperationId, number>>>;
  /** Where the API is mounted, for the default relative server: a path (`/v1`, `/api/petstore`), `''` at the root. Default `/v1`. */
  mountPath?: string;
  /**
   * The limits of each plan and of callers without a valid key, each with the algorithm its windows count by, as
   * the description states them (`x-rate-limits`, the default `info.description`, and what `X-RateLimit-Reset` and
   * `Retry-After` mean). Default: {@link DEFAULT_PLAN_LIMITS} and {@link DEFAULT_ANONYMOUS_LIMITS}, all `fixed`.
   */
  rateLimits?: OpenApiRateLimits;
}

/** One plan's limits as the description states them: units per minute and per day, and the algorithm counting them. */
export interface OpenApiRateLimitPolicy extends PlanLimits {
  algorithm: RateLimitAlgorithm;
}

/**
 * The document's `x-rate-limits` extension: every plan's limits and algorithm (`enterprise`: what an enterprise key
 * without its own limits gets; a key's own limits count by its plan's algorithm), and those of callers without a
 * valid key, per client address.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#algorithms
 */
export interface OpenApiRateLimits {
  plans: Readonly<Record<PlanName, Readonly<OpenApiRateLimitPolicy>>>;
  anonymous: Readonly<OpenApiRateLimitPolicy>;
}

/** {@link OpenApiRateLimits} when the options give none: the default plan table, every window fixed. */
function defaultRateLimits(): OpenApiRateLimits {
  const plans = Object.fromEntries(PLAN_NAMES.map((plan) => [plan, { ...DEFAULT_PLAN_LIMITS[plan], algorithm: 'fixed' }])) as Record<PlanName, OpenApiRateLimitPolicy>;
  return { plans, anonymous: { ...DEFAULT_ANONYMOUS_LIMITS, algorithm: 'fixed' } };
}

/** How each algorithm reads in the description's text: its name, and what `X-RateLimit-Reset` and `Retry-After` mean under it. */
const ALGORITHM_TERMS: Readonly<Record<RateLimitAlgorithm, { name: string; reset: string; retry: string }>> = {
  fixed: { name: 'fixed windows', reset: 'the end of the current window', retry: 'until the window resets' },
  sliding: {
    name: 'sliding windows',
    reset: 'the end of the next window while the current one counts units, else the end of the current one',
    retry: 'until the window has room for the cost again',
  },
  gcra: {
    name: 'GCRA (a burst of the limit at once, then the limit spread evenly over the window)',
    reset: 'when the whole burst is back',
    retry: 'until the window has room for the cost again',
  },
};

/** `1,000`: the description's numbers, grouped as the docs write them. */
const grouped = (value: number) => value.toLocaleString('en-US');

/** Who counts by each algorithm in use (plan names, then `callers without a valid key`), algorithms in the docs' order. */
function usersByAlgorithm(rateLimits: OpenApiRateLimits): Array<[RateLimitAlgorithm, string[]]> {
  const users: Array<[RateLimitAlgorithm, string]> = [
    ...PLAN_NAMES.map((plan) => [rateLimits.plans[plan].algorithm, plan] as [RateLimitAlgorithm, string]),
    [rateLimits.anonymous.algorithm, 'callers without a valid key'],
  ];
  return RATE_LIMIT_ALGORITHMS.map((algorithm) => [algorithm, users.filter(([used]) => used === algorithm).map(([, who]) => who)] as [RateLimitAlgorithm, string[]]).filter(
    ([, who]) => who.length > 0,
  );
}

/** `fixed windows (free, pro): <what>; sliding windows (…): <what>` for the algorithms in use. */
function byAlgorithm(rateLimits: OpenApiRateLimits, what: 'reset' | 'retry'): string {
  return usersByAlgorithm(rateLimits)
    .map(([algorithm, users]) => `${ALGORITHM_TERMS[algorithm].name} (${users.join(', ')}): ${ALGORITHM_TERMS[algorithm][what]}`)
    .join('; ');
}

/** The plan table, with the algorithm of each, as a paragraph of the default `info.description`. */
function rateLimitsParagraph(rateLimits: OpenApiRateLimits): string {
  const limits = (policy: PlanLimits) => `${grouped(policy.requestsPerMinute)} a minute and ${grouped(policy.requestsPerDay)} a day`;
  const plans = PLAN_NAMES.map((plan) =>
    plan === 'enterprise' ? `enterprise, each key's own limits, else ${limits(rateLimits.plans[plan])}` : `${plan}, ${limits(rateLimits.plans[plan])}`,
  );
  const counted = usersByAlgorithm(rateLimits).map(([algorithm, users]) => `${users.join(', ')}: ${ALGORITHM_TERMS[algorithm].name}`);
  return (
    `Rate limits, in units (a request costs its operation's x-rate-limit-cost): ${plans.join('; ')}; callers without a valid key, ` +
    `${limits(rateLimits.anonymous)} per client address. Algorithms (x-rate-limits): ${counted.join('; ')}.`
  );
}

/**
 * Whether `url` is an absolute `http:` or `https:` URL without credentials: the one kind of address a server
 * entry or a `Link` target of the options may be (a `javascript:` or `data:` URL in a page or header is a hazard;
 * credentials in one are a leak).
 */
export function isHttpUrl(url: string): boolean {
  if (!URL.canParse(url)) return false;
  const parsed = new URL(url);
  return (parsed.protocol === 'http:' || parsed.protocol === 'https:') && parsed.username === '' && parsed.password === '';
}

/** The relative server entry of the description served at `mountPath` (`/` for the root). */
export function mountedServer(mountPath: string): { url: string; description: string } {
  return { url: mountPath === '' ? '/' : mountPath, description: 'This server' };
}

/** The OpenAPI version of the description. */
export const OPENAPI_VERSION = '3.0.3';
/** The description's own version. */
export const API_DESCRIPTION_VERSION = '1.0.0';

const conversion: ConversionConfig = {
  target: 'openapi-3.0',
  // trim is a transformation, not a constraint on the input.
  ignoreActions: ['trim'],
  overrideAction: ({ valibotAction, jsonSchema }) => {
    const requirement = (valibotAction as unknown as { requirement: number }).requirement;
    // JSON Schema's maxLength counts code points, exactly what valibot's maxCodePoints bounds. Grapheme
    // clusters have no JSON Schema keyword: carried as an extension.
    if (valibotAction.type === 'max_code_points') return { ...jsonSchema, maxLength: requirement };
    // The schemas' own grapheme bound (a raw check that stops counting at the bound) carries its number.
    const graphemes = (valibotAction as { maxGraphemes?: unknown }).maxGraphemes;
    if (typeof graphemes === 'number') return { ...jsonSchema, 'x-max-graphemes': graphemes };
    return undefined;
  },
};

function schemaOf(schema: Parameters<typeof toJsonSchema>[0]): Record<string, unknown> {
  const { $schema: _ignored, ...json } = toJsonSchema(schema, conversion) as Record<string, unknown>;
  return json;
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const rateLimitHeaders = {
  'X-RateLimit-Limit': { $ref: '#/components/headers/X-RateLimit-Limit' },
  'X-RateLimit-Remaining': { $ref: '#/components/headers/X-RateLimit-Remaining' },
  'X-RateLimit-Reset': { $ref: '#/components/headers/X-RateLimit-Reset' },
};
const deprecationResponseHeaders = {
  Deprecation: { $ref: '#/components/headers/Deprecation' },
  Sunset: { $ref: '#/components/headers/Sunset' },
  Link: { $ref: '#/components/headers/Link' },
};

function jsonContent(schema: unknown) {
  return { 'application/json': { schema } };
}

function errorResponse(description: string, extraHeaders: Record<string, unknown> = {}) {
  return { description, headers: { ...rateLimitHeaders, ...extraHeaders }, content: jsonContent(ref('Error')) };
}

function responsesFor(operation: OperationDefinition, deprecation: DeprecationPolicy | undefined): Record<string, unknown> {
  const extra = deprecation !== undefined ? deprecationResponseHeaders : {};
  // 410 exists only once a sunset is configured (and the operation is not kept serving after it).
  const gone =
    deprecation?.sunsetAtMs !== undefined && deprecation.afterSunset !== 'serve'
      ? { '410': errorResponse('The operation is past its sunset date (gone).', extra) }
      : {};
  const ok = (description: string, schema: unknown, status = '200') => ({
    [status]: { description, headers: { ...rateLimitHeaders, ...extra }, content: jsonContent(schema) },
  });
  const common = {
    '429': errorResponse('Request rate limit exceeded (rate_limited), or the key is temporarily banned (temporarily_banned).', {
      'Retry-After': { $ref: '#/components/headers/Retry-After' },
    }),
    default: errorResponse(
      'Any other error, with the Error body (e.g. 404 not_found, 405 method_not_allowed, 417 expectation_failed, 431 header_fields_too_large, 500 internal_error, 503 service_unavailable).',
    ),
  };
  const unauthorized = { '401': errorResponse('Missing or invalid API key (unauthorized).') };
  switch (operation.operationId) {
    case 'listCategories':
      return {
        '200': {
          description:
            'All categories in ascending id order; with limit or after, at most limit of them with ids above after, and Link rel="next" while more remain.',
          headers: {
            ...rateLimitHeaders,
            ...extra,
            ETag: { $ref: '#/components/headers/ETag' },
            Link: { $ref: deprecation !== undefined ? '#/components/headers/Link' : '#/components/headers/Link-Next' },
          },
          content: jsonContent({ type: 'array', items: ref('Category') }),
        },
        '304': {
          description: 'If-None-Match names the current ETag: the list (or page) is unchanged since. No body. Charged like any request.',
          headers: { ...rateLimitHeaders, ...extra, ETag: { $ref: '#/components/headers/ETag' } },
        },
        '400': errorResponse('limit or after is not a whole number in range, or is sent more than once (validation_failed).'),
        ...unauthorized,
        ...common,
      };
    case 'createCategory':
      return {
        '201': {
          description:
            'The created category, including the id assigned by the service; or, for a repeat of a create with the same Idempotency-Key and body, the category the first one created (with Idempotent-Replayed: true).',
          headers: { ...rateLimitHeaders, ...extra, 'Idempotent-Replayed': { $ref: '#/components/headers/Idempotent-Replayed' } },
          content: jsonContent(ref('Category')),
        },
        '400': errorResponse(
          'The body is missing required fields or holds invalid values (validation_failed), is not valid JSON (invalid_json), or was not sent as application/json (invalid_content_type); or the Idempotency-Key is malformed (invalid_idempotency_key).',
        ),
        ...unauthorized,
        '409': errorResponse('A create with the same Idempotency-Key is still being processed (idempotency_key_in_flight).', {
          'Retry-After': { $ref: '#/components/headers/Retry-After' },
        }),
        '422': errorResponse('The Idempotency-Key was already used for a create with another body (idempotency_key_reused); nothing was created.'),
        '413': errorResponse('The body is larger than the configured limit (payload_too_large).'),
        '415': errorResponse(
          'The body is sent with a transfer coding other than chunked, or a content coding other than identity (unsupported_encoding).',
          { 'Accept-Encoding': { description: 'The content codings accepted: identity.', schema: { type: 'string' } } },
        ),
        ...common,
      };
    case 'getPetById':
      return {
        ...ok('The pet, as the host application returns it (its fields are not part of the specification).', { type: 'object', additionalProperties: true }),
        '400': errorResponse('petId is not a positive integer (validation_failed).'),
        ...unauthorized,
        ...gone,
        '501': errorResponse('The host application supplies no handler for this operation (not_implemented).'),
        ...common,
      };
    case 'listStoreOrders':
      return {
        ...ok('Store orders, as the host application returns them (their fields are not part of the specification).', {
          type: 'array',
          items: { type: 'object', additionalProperties: true },
        }),
        ...unauthorized,
        '501': errorResponse('The host application supplies no handler for this operation (not_implemented).'),
        ...common,
      };
    case 'getOpenApiDocument':
      return { ...ok('This OpenAPI description.', { type: 'object', additionalProperties: true }), '429': common['429'] };
  }
}

/**
 * Builds the OpenAPI 3.0.3 document.
 * @throws TypeError when a server address is not an absolute `http:` or `https:` URL without credentials.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#openapi-description
 */
export function buildOpenApiDocument(options: OpenApiOptions, info: OpenApiOperationInfo): OpenApiDocument {
  const servers: Array<{ url: string; description: string }> = [];
  for (const [environment, url] of [
    ['Production', options.servers?.production],
    ['Staging', options.servers?.staging],
  ] as const) {
    if (url === undefined) continue;
    if (!isHttpUrl(url)) {
      throw new TypeError(`openapi.servers: the ${environment.toLowerCase()} address must be an absolute http: or https: URL without credentials`);
    }
    servers.push({ url: url.replace(/\/$/, ''), description: environment });
  }
  if (servers.length === 0) servers.push(mountedServer(info.mountPath ?? DEFAULT_PREFIX));
  const rateLimits = info.rateLimits ?? defaultRateLimits();

  const paths: Record<string, Record<string, unknown>> = {};
  for (const operation of OPERATIONS) {
    const deprecation = info.deprecations[operation.operationId];
    const stability = info.stability[operation.operationId];
    const entry: Record<string, unknown> = {
      operationId: operation.operationId,
      tags: [operation.tag],
      summary: operation.summary,
      ...(deprecation ? { deprecated: true } : {}),
      ...(stability ? { 'x-stability': stability } : {}),
      // Units of the caller's rate limit this operation charges (docs/http-api.md, "Costs").
      'x-rate-limit-cost': info.costs?.[operation.operationId] ?? 1,
      ...(operation.public ? { security: [] } : {}),
      ...(operation.path.includes('{petId}')
        ? {
            parameters: [
              { name: 'petId', in: 'path', required: true, description: 'The pet id.', schema: { type: 'integer', format: 'int64', minimum: 1 } },
            ],
          }
        : {}),
      ...(operation.operationId === 'listCategories'
        ? {
            parameters: [
              {
                name: 'limit',
                in: 'query',
                required: false,
                description: `Most categories to answer (a page); with after alone, ${DEFAULT_CATEGORY_PAGE_LIMIT}. Without limit and after, every category.`,
                schema: { type: 'integer', minimum: 1, maximum: MAX_CATEGORY_PAGE_LIMIT },
              },
              {
                name: 'after',
                in: 'query',
                required: false,
                description: 'Only categories whose id is above this one (the last id of the previous page); default 0.',
                schema: { type: 'integer', format: 'int64', minimum: 0, maximum: Number.MAX_SAFE_INTEGER },
              },
              {
                name: 'If-None-Match',
                in: 'header',
                required: false,
                description:
                  'Entity tags of answers already held, or * (RFC 9110 §13.1.2, weak comparison): when one names the current ETag of this list or page, the answer is 304 without a body.',
                schema: { type: 'string' },
              },
            ],
          }
        : {}),
      ...(operation.operationId === 'createCategory'
        ? {
            parameters: [
              {
                name: 'Idempotency-Key',
                in: 'header',
                required: false,
                description:
                  'Makes the create safe to retry (draft-ietf-httpapi-idempotency-key-header-06): a structured-field string (in double quotes) of 1 to 255 printable ASCII characters, unique per create, e.g. "8e03978e-40d5-43e8-bc93-6894a57f9324". A repeat with the same key and body within the retention period (24 hours by default) creates nothing and answers the first create\'s 201; keys are scoped to the API key. A replay is charged to the rate limit like any request.',
                schema: { type: 'string', minLength: 3, maxLength: 512, pattern: '^"([\\x20-\\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\["\\\\])+"$' },
              },
            ],
            requestBody: { required: true, content: jsonContent(ref('NewCategory')) },
          }
        : {}),
      responses: responsesFor(operation, deprecation),
    };
    if (deprecation?.sunsetAtMs !== undefined) {
      entry['description'] = `Deprecated; sunset on ${new Date(deprecation.sunsetAtMs).toUTCString()}.`;
    }
    (paths[operation.path] ??= {})[operation.method.toLowerCase()] = entry;
  }

  const category = schemaOf(CategorySchema);
  (category['properties'] as Record<string, Record<string, unknown>>)['id'] = {
    ...(category['properties'] as Record<string, Record<string, unknown>>)['id'],
    format: 'int64',
  };

  return {
    openapi: OPENAPI_VERSION,
    info: {
      title: options.title ?? 'Petstore',
      version: API_DESCRIPTION_VERSION,
      description:
        options.description ??
        `Categories used to classify pets, with bearer API keys, plan-based rate limits and temporary bans.\n\n${rateLimitsParagraph(rateLimits)}`,
      license: { ...(options.license ?? DEFAULT_OPENAPI_LICENSE) },
    },
    // Machine-readable: each plan's limits and the algorithm counting them (docs/http-api.md, "Algorithms").
    'x-rate-limits': {
      plans: Object.fromEntries(PLAN_NAMES.map((plan) => [plan, { ...rateLimits.plans[plan] }])),
      anonymous: { ...rateLimits.anonymous },
    },
    servers,
    tags: [
      { name: 'categories', description: 'Species and breed categories used to classify pets.' },
      { name: 'pets', description: 'Pets (handlers supplied by the host application).' },
      { name: 'store', description: 'Store orders (handlers supplied by the host application).' },
      { name: 'meta', description: 'This description.' },
    ],
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: {
        bearerAuth: { type: 'http', scheme: 'bearer', description: 'An API key, sent as Authorization: Bearer <API_KEY>.' },
      },
      schemas: { Category: category, NewCategory: schemaOf(NewCategorySchema), Error: schemaOf(ErrorBodySchema) },
      headers: {
        'X-RateLimit-Limit': {
          description: 'The limit in force for the caller, in units (the window closest to exhaustion); each operation charges its x-rate-limit-cost.',
          schema: { type: 'integer' },
        },
        'X-RateLimit-Remaining': { description: 'Units remaining in that window.', schema: { type: 'integer' } },
        'X-RateLimit-Reset': {
          description: `Unix time, in whole seconds rounded up, at which that window has its whole quota back; by algorithm, ${byAlgorithm(rateLimits, 'reset')}.`,
          schema: { type: 'integer' },
        },
        'Retry-After': {
          description: `Seconds to wait before retrying (whole number, at least 1). On 429 rate_limited, by algorithm, ${byAlgorithm(rateLimits, 'retry')}: a retry of the same cost after exactly that many seconds is admitted unless other requests were charged meanwhile. On 429 temporarily_banned, until the ban ends.`,
          schema: { type: 'integer', minimum: 1 },
        },
        Deprecation: { description: 'When the operation was deprecated, as @<unix-seconds> (RFC 9745).', schema: { type: 'string' } },
        Sunset: { description: 'When the operation stops working, as an HTTP-date (RFC 8594).', schema: { type: 'string' } },
        Link: { description: 'Documentation of the deprecation and sunset (rel="deprecation", rel="sunset"); on a page of the list, also its next page (rel="next").', schema: { type: 'string' } },
        'Link-Next': {
          description:
            'While more categories remain after this page: <?limit=<n>&after=<last id>>; rel="next" (RFC 8288), a reference relative to the request URI.',
          schema: { type: 'string' },
        },
        ETag: {
          description: 'A strong entity tag of this list or page (RFC 9110 §8.8.3): it changes when, and only when, a category is created.',
          schema: { type: 'string' },
        },
        'Idempotent-Replayed': {
          description: 'true when the answer replays an earlier create with the same Idempotency-Key (nothing was created).',
          schema: { type: 'string', enum: ['true'] },
        },
      },
    },
  };
}
