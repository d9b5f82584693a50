/**
 * The OpenAPI description as a user meets it: served by the real example server (docs/http-api.md: OpenAPI 3.0.3,
 * version 1.0.0), valid by an independent validator, good enough for a code generator, and the generated
 * types good enough to call the running server with.
 *
 * - validation: @readme/openapi-parser `validate` (schema + its own rules); a broken copy must fail, so the
 *   validator is known to be checking;
 * - generation: openapi-typescript `openapiTS` + `astToString` → generated/petstore.ts (gitignored), then
 *   `tsc -p tsconfig.typed-client.json` (incremental) compiles src/typed-client.ts against it, `@ts-expect-error` lines
 *   included;
 * - a real call: src/typed-client.ts (openapi-fetch) creates and lists a category and reads a typed 401.
 */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileErrors, validate } from '@readme/openapi-parser';
import openapiTS, { COMMENT_HEADER, astToString, type OpenAPI3 } from 'openapi-typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startExample, type ExampleServer } from './example-server.js';
import type { RunTypedClient } from './typed-client-contract.js';

const API_KEY = 'openapi-test-key';
const WRONG_KEY = 'openapi-test-wrong-key';
const packageDir = fileURLToPath(new URL('..', import.meta.url));
const generatedFile = join(packageDir, 'generated', 'petstore.ts');
const tscBin = createRequire(import.meta.url).resolve('typescript/bin/tsc');

/** The document, loosely typed for poking at it. */
type Json = Record<string, any>;

type ValidatableApi = Parameters<typeof validate>[0];

/** Validates a copy (`validate` dereferences the object it is given in place). */
function validateCopy(document: Json) {
  return validate(structuredClone(document) as ValidatableApi);
}

/** Runs `tsc` in this package and resolves with its exit code and everything it printed. */
function runTsc(args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [tscBin, ...args], { cwd: packageDir }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 1;
      resolve({ code, output: `${stdout}${stderr}` });
    });
  });
}

describe('the OpenAPI description served by the example server', () => {
  let server: ExampleServer;
  let document: Json;

  /** The document as served, kept apart: no copy the tests break may change `document`. */
  let served: string;

  beforeAll(async () => {
    server = await startExample('fastify-server.ts', { PETSTORE_API_KEYS: `${API_KEY}:pro`, PETSTORE_OPERATION_COSTS: 'createCategory=5,guard=2' });
    const response = await fetch(`${server.origin}/v1/openapi.json`);
    served = await response.text();
    expect(response.status, served).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json(;|$)/);
    document = JSON.parse(served) as Json;
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('is served without a key: OpenAPI 3.0.3, description version 1.0.0, with both category operations', () => {
    expect(document['openapi']).toBe('3.0.3');
    expect(document['info']?.version).toBe('1.0.0');
    expect(document['paths']?.['/categories']?.get?.operationId).toBe('listCategories');
    expect(document['paths']?.['/categories']?.post?.operationId).toBe('createCategory');
    expect(document['paths']?.['/pets/{petId}']?.get?.deprecated).toBe(true);
  });

  it('states each operation\'s cost as configured (PETSTORE_OPERATION_COSTS=createCategory=5,guard=2), 1 by default', () => {
    const costs = Object.fromEntries(
      Object.values(document['paths'] as Json).flatMap((methods: Json) =>
        Object.values(methods).map((operation: Json) => [operation['operationId'], operation['x-rate-limit-cost']]),
      ),
    );
    expect(costs).toEqual({ listCategories: 1, createCategory: 5, getOpenApiDocument: 1, getPetById: 1, listStoreOrders: 1 });
  });

  it('passes @readme/openapi-parser validation', async () => {
    const result = await validateCopy(document);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
    expect(result.specification).toBe('OpenAPI');
    expect(result.warnings).toEqual([]);
  });

  const brokenCopies: Array<{ label: string; breakIt: (copy: Json) => void; message: RegExp }> = [
    {
      label: 'a response without its required description',
      breakIt: (copy) => delete copy['paths']['/categories'].get.responses['200'].description,
      message: /must have required property 'description'/,
    },
    {
      label: 'two operations with one operationId',
      breakIt: (copy) => (copy['paths']['/categories'].post.operationId = 'listCategories'),
      message: /operationId `listCategories` is duplicated/,
    },
    {
      label: 'a path template whose parameter is not declared',
      breakIt: (copy) => delete copy['paths']['/pets/{petId}'].get.parameters,
      message: /missing path parameter\(s\) for `\{petId\}`/,
    },
    {
      label: 'info without a version',
      breakIt: (copy) => delete copy['info'].version,
      message: /must have required property 'version'/,
    },
  ];

  it.each(brokenCopies)('fails validation for a copy with $label', async ({ breakIt, message }) => {
    const broken = structuredClone(document);
    breakIt(broken);
    const result = await validateCopy(broken);
    expect(result.valid).toBe(false);
    expect(result.valid ? '' : compileErrors(result)).toMatch(message);
    // The served document itself is untouched by the copy (and was found valid above).
    expect(document).toEqual(JSON.parse(served));
  });

  it('generates TypeScript types with openapi-typescript, and src/typed-client.ts compiles against them', async () => {
    const ast = await openapiTS(structuredClone(document) as OpenAPI3, { silent: true });
    const source = `${COMMENT_HEADER}${astToString(ast)}`;
    expect(source).toMatch(/export interface paths \{/);
    expect(source).toContain('"/categories"');
    expect(source).toContain('listCategories');
    await mkdir(join(packageDir, 'generated'), { recursive: true });
    await writeFile(generatedFile, source);

    const compiled = await runTsc(['-p', 'tsconfig.typed-client.json']);
    expect(compiled.code, compiled.output).toBe(0);
  });

  it('makes real calls with the typed client: creates a category, lists it back, and reads a typed 401', async () => {
    // Not a static import: the package's own typecheck must not need generated/ (see tsconfig.json).
    const typedClientModule = './typed-client.js';
    const { runTypedClient } = (await import(/* @vite-ignore */ typedClientModule)) as { runTypedClient: RunTypedClient };
    const categoryName = `Typed ${Date.now()}`;
    const run = await runTypedClient({ baseUrl: `${server.origin}/v1`, apiKey: API_KEY, wrongKey: WRONG_KEY, categoryName });

    expect(run.created).toEqual({ id: expect.any(Number), name: categoryName, description: 'Created by the typed client' });
    expect(Number.isSafeInteger(run.created.id) && run.created.id > 0).toBe(true);
    expect(run.listed).toContainEqual(run.created);
    expect(run.unauthorized.status).toBe(401);
    expect(run.unauthorized.error).toEqual({ code: 'unauthorized', message: expect.any(String), status: 401 });
    expect(server.output()).not.toContain(WRONG_KEY);
  });
});
