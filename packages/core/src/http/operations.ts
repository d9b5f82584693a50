/**
 * The API's operations (SPEC §4) and where they live below the prefix.
 */

/** The operationIds of SPEC §4. */
export type OperationId = 'listCategories' | 'createCategory';

/** Operations by path, then by method. HEAD is answered like GET without a body (RFC 9110 §9.3.2). */
const ROUTES: ReadonlyMap<string, ReadonlyMap<string, OperationId>> = new Map([
  [
    '/categories',
    new Map<string, OperationId>([
      ['GET', 'listCategories'],
      ['HEAD', 'listCategories'],
      ['POST', 'createCategory'],
    ]),
  ],
]);

/** What routing found for a method and path. */
export type RouteMatch =
  | { kind: 'operation'; operationId: OperationId }
  | { kind: 'not_found' }
  | { kind: 'method_not_allowed'; allow: string };

/**
 * Finds the operation for a method and a path below the prefix (query string ignored). Paths match exactly:
 * `/categories/` (trailing slash) is not `/categories`.
 */
export function matchRoute(method: string, path: string): RouteMatch {
  const queryStart = path.indexOf('?');
  const pathname = queryStart === -1 ? path : path.slice(0, queryStart);
  const methods = ROUTES.get(pathname);
  if (methods === undefined) return { kind: 'not_found' };
  const operationId = methods.get(method.toUpperCase());
  if (operationId === undefined) return { kind: 'method_not_allowed', allow: [...methods.keys()].join(', ') };
  return { kind: 'operation', operationId };
}
