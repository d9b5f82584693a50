/**
 * The petstore's operations inside a host's own OpenAPI document: {@link mergeOpenApiDocument}.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/reference-page.md#the-hosts-own-openapi-document
 */
import { isDeepStrictEqual } from 'node:util';
import { DEFAULT_PREFIX } from '../http/prefix.js';
import type { OpenApiDocument } from './document.js';

/** Options of {@link mergeOpenApiDocument}. */
export interface MergeOpenApiOptions {
  /**
   * Where the petstore is mounted on the host, as the host document's paths are written (below its servers'
   * URLs): `''` or a path starting with `/` and not ending with `/`. Default: the petstore's `prefix` when a
   * petstore is given, else `/v1`.
   */
  prefix?: string;
  /**
   * Put before the name of every petstore component (`Category` → `PetstoreCategory` with `'Petstore'`), its
   * `$ref`s and security requirements rewritten to match: for a host document that has components of the same
   * names with other definitions (its own `Error` schema, say). Default `''` (names kept).
   */
  componentPrefix?: string;
}

/** The HTTP methods of an OpenAPI Path Item (OpenAPI 3.0.3 and 3.1.0, "Path Item Object"). */
const METHODS = new Set(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']);

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** `3.0` or `3.1`, from a document's `openapi` field. */
function versionOf(document: Json, which: string): '3.0' | '3.1' {
  const version = document['openapi'];
  if (typeof version === 'string' && /^3\.0\.\d+$/.test(version)) return '3.0';
  if (typeof version === 'string' && /^3\.1\.\d+$/.test(version)) return '3.1';
  throw new TypeError(
    `mergeOpenApiDocument: the ${which} document's openapi field is ${JSON.stringify(version) ?? 'missing'}; OpenAPI 3.0.x and 3.1.x are supported`,
  );
}

/** A path template with its parameter names blanked: `/pets/{petId}` and `/pets/{id}` are the same path (OpenAPI, "Paths Object"). */
const templateOf = (path: string) => path.replace(/\{[^}]*\}/g, '{}');

/** Every value below `value`, rewritten by `visit` (objects and arrays are copied; nothing is changed in place). */
function rewrite(value: unknown, visit: (object: Json) => Json): unknown {
  if (Array.isArray(value)) return value.map((item) => rewrite(item, visit));
  if (!isObject(value)) return value;
  const copy: Json = {};
  for (const [key, item] of Object.entries(value)) copy[key] = rewrite(item, visit);
  return visit(copy);
}

/**
 * A schema written for OpenAPI 3.0 made valid for 3.1 (JSON Schema 2020-12), for the constructs 3.1 dropped:
 * `nullable: true` becomes `null` in `type` (or a `oneOf` with `{ type: 'null' }` when there is no `type`), and a
 * boolean `exclusiveMinimum`/`exclusiveMaximum` becomes the number bound it qualified.
 */
function schemaFor31(schema: Json): Json {
  const result: Json = { ...schema };
  if ('nullable' in result) {
    const nullable = result['nullable'] === true;
    delete result['nullable'];
    if (nullable) {
      const type = result['type'];
      if (typeof type === 'string') result['type'] = [type, 'null'];
      else if (Array.isArray(type)) result['type'] = type.includes('null') ? type : [...type, 'null'];
      else if (!('$ref' in result)) return { oneOf: [result, { type: 'null' }] };
    }
  }
  for (const [exclusive, bound] of [
    ['exclusiveMinimum', 'minimum'],
    ['exclusiveMaximum', 'maximum'],
  ] as const) {
    if (typeof result[exclusive] !== 'boolean') continue;
    if (result[exclusive] === true && typeof result[bound] === 'number') {
      result[exclusive] = result[bound];
      delete result[bound];
    } else {
      delete result[exclusive];
    }
  }
  return result;
}

/** `value` with every 3.0-only schema construct rewritten for 3.1 (see {@link schemaFor31}); a copy. */
function convertSchemas(value: unknown): unknown {
  // Only a Schema Object has these keywords (no other OpenAPI object defines them).
  return rewrite(value, (object) =>
    'nullable' in object || typeof object['exclusiveMinimum'] === 'boolean' || typeof object['exclusiveMaximum'] === 'boolean'
      ? schemaFor31(object)
      : object,
  );
}

/**
 * A copy of the host's OpenAPI document with the petstore's operations added: every path of the petstore's
 * description under `options.prefix`, its components (schemas, responses, parameters, headers, security
 * schemes …) and its tags. The inputs are not changed.
 *
 * - Security: the petstore's document-wide requirement (bearer API key) is written on each of its operations
 *   that has none of its own, so the host's own operations keep the host's `security`.
 * - Tags: a petstore tag the host document already has (by name) keeps the host's definition.
 * - OpenAPI 3.0 and 3.1: the petstore's description is 3.0.3; merged into a 3.1 host document, its 3.0-only
 *   schema constructs (`nullable`, boolean `exclusiveMinimum`/`exclusiveMaximum`) are rewritten as 3.1 says.
 *   The host document's `openapi`, `info`, `servers` and everything else stay the host's.
 *
 * ```ts
 * const document = mergeOpenApiDocument(hostDocument, petstore, { prefix: '/v1' });
 * ```
 *
 * @param hostDocument the host's OpenAPI 3.0.x or 3.1.x document (a plain JSON object); the result has its type
 *   (e.g. @fastify/swagger's, in its `transformObject` hook).
 * @param petstore a petstore (`createPetstore`), or its description (`petstore.openapi`).
 * @throws TypeError when a document is not OpenAPI 3.0.x or 3.1.x, when `prefix` is malformed, when the host
 *   document already has one of the petstore's paths (compared as templates: `/v1/pets/{id}` is
 *   `/v1/pets/{petId}`), or a component of the same kind and name with another definition (set
 *   `componentPrefix`); the message names the path or component.
 */
export function mergeOpenApiDocument<Document extends object = OpenApiDocument>(
  hostDocument: Document,
  petstore: OpenApiDocument | { readonly openapi: OpenApiDocument; readonly prefix: string },
  options: MergeOpenApiOptions = {},
): Document {
  const host = hostDocument as unknown as Json;
  if (!isObject(host)) throw new TypeError('mergeOpenApiDocument: the host document must be an OpenAPI document (an object)');
  const fromPetstore = typeof (petstore as Json)['openapi'] !== 'string';
  const source = (fromPetstore ? (petstore as { openapi: OpenApiDocument }).openapi : petstore) as Json;
  if (!isObject(source)) throw new TypeError('mergeOpenApiDocument: the second argument must be a petstore or its OpenAPI description');
  const prefix = options.prefix ?? (fromPetstore ? (petstore as { prefix: string }).prefix : DEFAULT_PREFIX);
  if (typeof prefix !== 'string' || !/^(?:|\/.*[^/])$/.test(prefix)) {
    throw new TypeError(`mergeOpenApiDocument: prefix must be empty or start with "/" and not end with "/" (got ${JSON.stringify(prefix)})`);
  }
  const componentPrefix = options.componentPrefix ?? '';
  if (typeof componentPrefix !== 'string' || !/^[A-Za-z0-9._-]*$/.test(componentPrefix)) {
    throw new TypeError('mergeOpenApiDocument: componentPrefix must be letters, digits, ".", "_" or "-" (OpenAPI component names)');
  }
  const hostVersion = versionOf(host, 'host');
  versionOf(source, 'petstore');

  // The petstore's parts, renamed, with its document-wide security on each operation, made for the host's version.
  const rename = (name: string) => componentPrefix + name;
  let petstoreParts: Json = {
    paths: source['paths'] ?? {},
    components: source['components'] ?? {},
  };
  if (componentPrefix !== '') {
    petstoreParts = rewrite(petstoreParts, (object) => {
      const target = object['$ref'];
      if (typeof target !== 'string') return object;
      const match = /^#\/components\/([^/]+)\/(.+)$/.exec(target);
      return match === null ? object : { ...object, $ref: `#/components/${match[1]}/${rename(match[2] as string)}` };
    }) as Json;
  }
  const renameRequirements = (requirements: unknown) =>
    Array.isArray(requirements)
      ? requirements.map((requirement) =>
          isObject(requirement) ? Object.fromEntries(Object.entries(requirement).map(([name, scopes]) => [rename(name), scopes])) : requirement,
        )
      : requirements;
  const documentSecurity = source['security'];
  const paths: Json = {};
  for (const [path, item] of Object.entries(petstoreParts['paths'] as Json)) {
    if (!isObject(item)) continue;
    const copy: Json = { ...item };
    for (const [method, operation] of Object.entries(item)) {
      if (!METHODS.has(method) || !isObject(operation)) continue;
      const security = 'security' in operation ? operation['security'] : documentSecurity;
      copy[method] = security === undefined ? operation : { ...operation, security: renameRequirements(security) };
    }
    paths[prefix + path] = copy;
  }
  const components = petstoreParts['components'] as Json;
  // Copies throughout: the result shares no object with either input.
  const merged =
    hostVersion === '3.1'
      ? finish(host, convertSchemas(paths) as Json, convertSchemas(components) as Json, source, rename)
      : finish(host, structuredClone(paths), structuredClone(components), source, rename);
  return merged as unknown as Document;
}

/** The host document with `paths`, `components` (names before renaming) and the tags added, clashes refused. */
function finish(host: Json, paths: Json, components: Json, source: Json, rename: (name: string) => string): OpenApiDocument {
  const result = structuredClone(host);
  const hostPaths: Json = isObject(result['paths']) ? result['paths'] : {};
  const taken = new Map(Object.keys(hostPaths).map((path) => [templateOf(path), path]));
  for (const [path, item] of Object.entries(paths)) {
    const existing = taken.get(templateOf(path));
    if (existing !== undefined) {
      throw new TypeError(
        `mergeOpenApiDocument: the host document already has the path ${existing}, where the petstore's ${path} goes; mount the petstore under another prefix`,
      );
    }
    hostPaths[path] = item;
  }
  result['paths'] = hostPaths;

  const hostComponents: Json = isObject(result['components']) ? result['components'] : {};
  for (const [kind, entries] of Object.entries(components)) {
    if (!isObject(entries)) continue;
    const section: Json = isObject(hostComponents[kind]) ? (hostComponents[kind] as Json) : {};
    for (const [name, definition] of Object.entries(entries)) {
      const renamed = rename(name);
      if (renamed in section && !isDeepStrictEqual(section[renamed], definition)) {
        throw new TypeError(
          `mergeOpenApiDocument: the host document's components.${kind}.${renamed} differs from the petstore's; pass componentPrefix (e.g. 'Petstore') to rename the petstore's components`,
        );
      }
      section[renamed] = definition;
    }
    hostComponents[kind] = section;
  }
  result['components'] = hostComponents;

  const tags = Array.isArray(result['tags']) ? (result['tags'] as unknown[]) : [];
  const tagNames = new Set(tags.map((tag) => (isObject(tag) ? tag['name'] : undefined)));
  for (const tag of Array.isArray(source['tags']) ? (source['tags'] as unknown[]) : []) {
    if (isObject(tag) && !tagNames.has(tag['name'])) tags.push(structuredClone(tag));
  }
  if (tags.length > 0) result['tags'] = tags;
  return result;
}
