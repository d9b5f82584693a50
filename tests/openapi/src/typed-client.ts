/**
 * A typed client of the petstore API: `openapi-fetch` over the types that `openapi-typescript` generated
 * from the example server's `/v1/openapi.json` (into generated/petstore.ts, written by the tests).
 *
 * This file compiles only after generation, so the package's tsconfig.json leaves it out; the tests compile
 * it with tsconfig.typed-client.json. The `@ts-expect-error` lines below fail that compilation if the
 * generated types stop catching the mistake they name (a directive with no error is itself an error).
 */
import createClient, { type Client } from 'openapi-fetch';
import type { components, paths } from '../generated/petstore.js';
import type { RunTypedClient } from './typed-client-contract.js';

export type Category = components['schemas']['Category'];
export type NewCategory = components['schemas']['NewCategory'];
export type ErrorBody = components['schemas']['Error'];

export const runTypedClient: RunTypedClient = async ({ baseUrl, apiKey, wrongKey, categoryName }) => {
  const client = createClient<paths>({ baseUrl, headers: { authorization: `Bearer ${apiKey}` } });

  const newCategory: NewCategory = { name: categoryName, description: 'Created by the typed client' };
  const creation = await client.POST('/categories', { body: newCategory });
  if (creation.error !== undefined) {
    throw new Error(`createCategory answered ${creation.response.status} ${creation.error.code}: ${creation.error.message}`);
  }
  const created: Category = creation.data;

  const listing = await client.GET('/categories');
  if (listing.error !== undefined) {
    throw new Error(`listCategories answered ${listing.response.status} ${listing.error.code}: ${listing.error.message}`);
  }
  const listed: Category[] = listing.data;

  const denied = await client.GET('/categories', { headers: { authorization: `Bearer ${wrongKey}` } });
  if (denied.error === undefined) throw new Error(`listCategories with a wrong key answered ${denied.response.status}`);
  const error: ErrorBody = denied.error;

  return { created, listed, unauthorized: { status: denied.response.status, error } };
};

/** Never called: each marked line must not compile, which proves the generated types are real. */
export async function mistakesTheTypesCatch(client: Client<paths>): Promise<void> {
  // @ts-expect-error NewCategory requires `name`.
  await client.POST('/categories', { body: { description: 'a category without a name' } });
  // @ts-expect-error `name` is a string.
  await client.POST('/categories', { body: { name: 42 } });
  // @ts-expect-error createCategory has a required request body.
  await client.POST('/categories', {});
  // @ts-expect-error there is no such path.
  await client.GET('/kategories', {});
  // @ts-expect-error DELETE /categories is not an operation.
  await client.DELETE('/categories');
  // @ts-expect-error getPetById's petId is an integer.
  await client.GET('/pets/{petId}', { params: { path: { petId: 'seven' } } });

  const { data, error } = await client.GET('/categories');
  if (data !== undefined) {
    const first = data[0];
    // @ts-expect-error a Category has no field `colour`.
    console.log(first?.colour);
    // @ts-expect-error a Category's id is a number, not a string.
    const id: string | undefined = first?.id;
    console.log(id);
  }
  if (error !== undefined) {
    // @ts-expect-error the Error body has code, message and status, no `details`.
    console.log(error.details);
  }
}
