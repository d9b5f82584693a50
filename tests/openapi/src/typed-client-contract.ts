/**
 * The shape of `src/typed-client.ts`'s entry, written without the generated types so the test can call it
 * before (and whatever) the generator wrote. `typed-client.ts` declares `runTypedClient` with this type, so
 * compiling it against the generated types checks that the two agree.
 */

/** A Category as the API returns it (docs/http-api.md, "Bodies and schemas"). */
export interface CategoryShape {
  id: number;
  name: string;
  description?: string;
}

/** The Error body (docs/http-api.md, "Bodies and schemas"). */
export interface ErrorShape {
  code: string;
  message: string;
  status: number;
}

/** Options of {@link RunTypedClient}. */
export interface TypedClientOptions {
  /** The API's base address, ending with `/v1`. */
  baseUrl: string;
  /** A valid API key. */
  apiKey: string;
  /** A key the server does not know. */
  wrongKey: string;
  /** Name of the category to create. */
  categoryName: string;
}

/** What one run of the typed client saw. */
export interface TypedClientRun {
  /** The answer of createCategory (201). */
  created: CategoryShape;
  /** The answer of listCategories after the create. */
  listed: CategoryShape[];
  /** listCategories with the wrong key: the status and the typed Error body. */
  unauthorized: { status: number; error: ErrorShape };
}

/** Creates a category, lists the categories, and lists them again with a wrong key. */
export type RunTypedClient = (options: TypedClientOptions) => Promise<TypedClientRun>;
