/**
 * The API's operations: where each lives below the prefix, who implements it, and what is
 * public. One table drives routing and the OpenAPI description, so they cannot drift.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#operations
 */

/** The operationIds of the service. `getPetById` and `listStoreOrders` are implemented by the host. */
export type OperationId = 'listCategories' | 'createCategory' | 'getPetById' | 'listStoreOrders' | 'getOpenApiDocument';

/** Operations whose handlers the host application supplies (the contract shows only that they exist). */
export type HostOperationId = 'getPetById' | 'listStoreOrders';

/** Stability markers carried in the `x-stability` extension. */
export type Stability = 'experimental' | 'beta';

/** One operation of the table. */
export interface OperationDefinition {
  operationId: OperationId;
  method: 'GET' | 'POST';
  /** Path template below the prefix, OpenAPI style: `/pets/{petId}`. */
  path: string;
  tag: 'categories' | 'pets' | 'store' | 'meta';
  summary: string;
  /** `true`: answered without an API key (still rate limited). */
  public: boolean;
  /** `true`: the host application supplies the handler; without one the answer is 501. */
  host: boolean;
}

/** Every operation, in the order the OpenAPI description lists them. */
export const OPERATIONS: readonly OperationDefinition[] = Object.freeze([
  { operationId: 'listCategories', method: 'GET', path: '/categories', tag: 'categories', summary: 'List categories', public: false, host: false },
  { operationId: 'createCategory', method: 'POST', path: '/categories', tag: 'categories', summary: 'Create a category', public: false, host: false },
  { operationId: 'getPetById', method: 'GET', path: '/pets/{petId}', tag: 'pets', summary: 'Get a pet by id', public: false, host: true },
  { operationId: 'listStoreOrders', method: 'GET', path: '/store/orders', tag: 'store', summary: 'List store orders', public: false, host: true },
  { operationId: 'getOpenApiDocument', method: 'GET', path: '/openapi.json', tag: 'meta', summary: 'This OpenAPI description', public: true, host: false },
] satisfies OperationDefinition[]);

/** What routing found for a method and path. */
export type RouteMatch =
  | { kind: 'operation'; operation: OperationDefinition; params: Record<string, string> }
  | { kind: 'not_found' }
  | { kind: 'method_not_allowed'; allow: string };

interface CompiledPath {
  path: string;
  pattern: RegExp;
  paramNames: string[];
  methods: Map<string, OperationDefinition>;
  /** For paths without parameters: the match per method, built once (frozen). */
  matches: Map<string, RouteMatch>;
}

// Path parameters match one non-empty segment; values are percent-decoded.
const COMPILED: CompiledPath[] = (() => {
  const byPath = new Map<string, CompiledPath>();
  for (const operation of OPERATIONS) {
    let compiled = byPath.get(operation.path);
    if (compiled === undefined) {
      const paramNames: string[] = [];
      const source = operation.path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{(\w+)\}/g, (_match, name: string) => {
        paramNames.push(name);
        return '([^/]+)';
      });
      compiled = { path: operation.path, pattern: new RegExp(`^${source}$`), paramNames, methods: new Map(), matches: new Map() };
      byPath.set(operation.path, compiled);
    }
    compiled.methods.set(operation.method, operation);
    // HEAD is answered like GET without a body (RFC 9110 §9.3.2).
    if (operation.method === 'GET') compiled.methods.set('HEAD', operation);
  }
  return [...byPath.values()];
})();

const ASCII_LETTERS = /^[A-Za-z]{1,16}$/;

/** The params of a route without path parameters: one frozen object for all. */
const NO_PARAMS: Record<string, string> = Object.freeze({});

/** Paths without parameters, found by a map lookup instead of trying each pattern. */
const STATIC_PATHS = new Map(COMPILED.filter((compiled) => compiled.paramNames.length === 0).map((compiled) => [compiled.path, compiled]));
const PARAMETER_PATHS = COMPILED.filter((compiled) => compiled.paramNames.length > 0);
for (const compiled of STATIC_PATHS.values()) {
  for (const method of compiled.methods.keys()) {
    compiled.matches.set(method, Object.freeze(matchMethod(compiled, method, undefined)));
  }
}

/** The path of a request target without its query string (`/categories?limit=2` → `/categories`). */
export function pathnameOf(path: string): string {
  const queryStart = path.indexOf('?');
  return queryStart === -1 ? path : path.slice(0, queryStart);
}

/** The query string of a request target, without its `?`; `undefined` when it has none. */
export function queryStringOf(path: string): string | undefined {
  const queryStart = path.indexOf('?');
  return queryStart === -1 ? undefined : path.slice(queryStart + 1);
}

/**
 * Finds the operation for a method and a path below the prefix (query string ignored). Paths match exactly:
 * `/categories/` (trailing slash) is not `/categories`. A path parameter that is not valid percent-encoding
 * does not match.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#routing
 */
export function matchRoute(method: string, path: string): RouteMatch {
  const pathname = pathnameOf(path);
  const fixed = STATIC_PATHS.get(pathname);
  if (fixed !== undefined) return fixed.matches.get(method) ?? matchMethod(fixed, method, undefined);
  for (const compiled of PARAMETER_PATHS) {
    const match = compiled.pattern.exec(pathname);
    if (match !== null) return matchMethod(compiled, method, match);
  }
  return { kind: 'not_found' };
}

function matchMethod(compiled: CompiledPath, method: string, match: RegExpExecArray | undefined): RouteMatch {
  // Methods arrive upper case from every common client; only other spellings pay for the conversion, and
  // only ASCII letters are converted ("poſt" is not POST, although JavaScript upper-cases ſ to S).
  const operation =
    compiled.methods.get(method) ?? (ASCII_LETTERS.test(method) ? compiled.methods.get(method.toUpperCase()) : undefined);
  if (operation === undefined) {
    return { kind: 'method_not_allowed', allow: [...compiled.methods.keys()].join(', ') };
  }
  const names = compiled.paramNames;
  if (match === undefined || names.length === 0) return { kind: 'operation', operation, params: NO_PARAMS };
  const params: Record<string, string> = {};
  for (let index = 0; index < names.length; index++) {
    try {
      params[names[index] as string] = decodeURIComponent(match[index + 1] as string);
    } catch {
      return { kind: 'not_found' };
    }
  }
  return { kind: 'operation', operation, params };
}
