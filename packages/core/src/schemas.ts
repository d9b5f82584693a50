/**
 * valibot schemas for the resources of SPEC §2, and the bounds this library sets where the spec is silent
 * (SPEC §8: "Size or length bounds on category fields and on request bodies: not shown").
 *
 * Decisions (documented in the README):
 * - `name` is trimmed of leading and trailing whitespace; after trimming it must hold 1 to
 *   {@link CATEGORY_NAME_MAX_LENGTH} characters (user-perceived characters, i.e. grapheme clusters) and no
 *   control characters. A whitespace-only name is rejected.
 * - `description` is optional; when present it is a string of at most {@link CATEGORY_DESCRIPTION_MAX_LENGTH}
 *   characters, stored as sent. `null` is not accepted; omit the field instead.
 * - Unknown fields (including `id`, which the service assigns, and `__proto__`) are rejected with 400 rather
 *   than silently dropped, so a typo never loses data.
 */
import * as v from 'valibot';
import { ERROR_CODES } from './errors.js';

/** Longest accepted category name, in characters (grapheme clusters), after trimming. */
export const CATEGORY_NAME_MAX_LENGTH = 100;
/** Longest accepted category description, in characters (grapheme clusters). */
export const CATEGORY_DESCRIPTION_MAX_LENGTH = 1000;

// No C0 controls, DEL or C1 controls: invisible in listings and a common injection vector in logs. A regex (not
// a custom check) so the OpenAPI description carries it as `pattern`.
const NO_CONTROL_CHARACTERS = /^[^\u0000-\u001f\u007f-\u009f]*$/;

/** NewCategory (SPEC §2): the request body of `createCategory`. */
export const NewCategorySchema = v.strictObject(
  {
    name: v.pipe(
      v.string('must be a string'),
      v.description(
        `The category name. Leading and trailing whitespace is removed; then 1 to ${CATEGORY_NAME_MAX_LENGTH} characters (grapheme clusters), no control characters.`,
      ),
      v.trim(),
      v.minLength(1, 'must not be empty or only whitespace'),
      v.maxGraphemes(CATEGORY_NAME_MAX_LENGTH, `must be at most ${CATEGORY_NAME_MAX_LENGTH} characters`),
      v.regex(NO_CONTROL_CHARACTERS, 'must not contain control characters'),
    ),
    description: v.optional(
      v.pipe(
        v.string('must be a string'),
        v.description(`A short description of the category: at most ${CATEGORY_DESCRIPTION_MAX_LENGTH} characters (grapheme clusters).`),
        v.maxGraphemes(
          CATEGORY_DESCRIPTION_MAX_LENGTH,
          `must be at most ${CATEGORY_DESCRIPTION_MAX_LENGTH} characters`,
        ),
      ),
    ),
  },
  (issue) =>
    issue.expected === 'never'
      ? `is not a field of NewCategory (allowed: name, description)`
      : 'is required',
);

/** Category (SPEC §2): `id` is an int64 assigned by the service; in this library always a safe integer ≥ 1. */
export const CategorySchema = v.strictObject({
  id: v.pipe(
    v.number(),
    v.safeInteger(),
    v.minValue(1),
    v.description('Assigned by the service on creation (int64; always a safe JavaScript integer).'),
  ),
  name: v.pipe(v.string(), v.description('The category name.')),
  description: v.optional(v.pipe(v.string(), v.description('A short description of the category.'))),
});

/** Error (SPEC §2): the body of every error answer. */
export const ErrorBodySchema = v.strictObject({
  code: v.pipe(v.picklist(ERROR_CODES), v.description('Machine-readable error code.')),
  message: v.pipe(v.string(), v.description('Human-readable description of the error.')),
  status: v.pipe(v.number(), v.integer(), v.minValue(400), v.maxValue(599), v.description('The HTTP status code.')),
});

/** A NewCategory after validation: `name` trimmed, `description` present only when sent. */
export type NewCategory = v.InferOutput<typeof NewCategorySchema>;
/** A Category as stored and returned: `{ id, name, description? }`. */
export type Category = v.InferOutput<typeof CategorySchema>;

/** The outcome of {@link parseNewCategory}: the value, or one human-readable message naming every problem. */
export type NewCategoryParseResult =
  | { success: true; value: NewCategory }
  | { success: false; message: string };

/**
 * Validates an already-parsed JSON value as a NewCategory.
 *
 * @returns the trimmed value, or a message such as `name: is required; color: is not a field of NewCategory`.
 *   Never throws.
 */
export function parseNewCategory(input: unknown): NewCategoryParseResult {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { success: false, message: 'The request body must be a JSON object (a NewCategory).' };
  }
  const result = v.safeParse(NewCategorySchema, input);
  if (result.success) return { success: true, value: result.output };
  const problems = result.issues.map((issue) => `${v.getDotPath(issue) ?? 'body'}: ${issue.message}`);
  return { success: false, message: `Invalid NewCategory: ${problems.join('; ')}.` };
}
