/**
 * valibot schemas for the resources of the API (Category, NewCategory, Error), and the bounds this library
 * sets on category fields (see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#input-bounds).
 *
 * Decisions (documented in https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#new-category):
 * - `name` is trimmed of leading and trailing whitespace; after trimming it must hold 1 to
 *   {@link CATEGORY_NAME_MAX_LENGTH} characters (user-perceived characters, i.e. grapheme clusters), at most
 *   {@link CATEGORY_NAME_MAX_CODE_POINTS} Unicode code points, and no control characters. A whitespace-only name is
 *   rejected.
 * - `description` is optional; when present it is a string of at most {@link CATEGORY_DESCRIPTION_MAX_LENGTH}
 *   characters (grapheme clusters) and {@link CATEGORY_DESCRIPTION_MAX_CODE_POINTS} code points, stored as sent.
 *   `null` is not accepted; omit the field instead.
 * - Unknown fields (including `id`, which the service assigns, and `__proto__`) are rejected with 400 rather
 *   than silently dropped, so a typo never loses data.
 *
 * Bounded work: the code-point bound is checked first, in one linear pass, and a value over it is refused
 * without being segmented into grapheme clusters (segmentation costs far more per character, and more than
 * linearly on long strings). So validating any value costs at most a linear pass plus the segmentation of
 * a string within the code-point bound.
 */
import * as v from 'valibot';
import { ERROR_CODES } from './errors.js';

/** Longest accepted category name, in characters (grapheme clusters), after trimming. */
export const CATEGORY_NAME_MAX_LENGTH = 100;
/**
 * Longest accepted category name in Unicode code points, after trimming: four per character on average, room
 * for names written entirely in combining scripts or emoji sequences. The OpenAPI description carries it
 * as `maxLength` (JSON Schema counts code points).
 */
export const CATEGORY_NAME_MAX_CODE_POINTS = 4 * CATEGORY_NAME_MAX_LENGTH;
/** Longest accepted category description, in characters (grapheme clusters). */
export const CATEGORY_DESCRIPTION_MAX_LENGTH = 1000;
/** Longest accepted category description in Unicode code points (`maxLength` in the OpenAPI description). */
export const CATEGORY_DESCRIPTION_MAX_CODE_POINTS = 4 * CATEGORY_DESCRIPTION_MAX_LENGTH;

// No C0 controls, DEL or C1 controls: invisible in listings and a common injection vector in logs. A regex (not
// a custom check) so the OpenAPI description carries it as `pattern`.
const NO_CONTROL_CHARACTERS = /^[^\u0000-\u001f\u007f-\u009f]*$/;

let segmenter: Intl.Segmenter | undefined;

/**
 * True when `value` holds more than `max` grapheme clusters. Stops counting at `max + 1`, and does not segment
 * at all when `value` has at most `max` code units (every cluster has at least one).
 */
function hasMoreGraphemesThan(value: string, max: number): boolean {
  if (value.length <= max) return false;
  segmenter ??= new Intl.Segmenter();
  let count = 0;
  for (const _segment of segmenter.segment(value)) if (++count > max) return true;
  return false;
}

/**
 * A bound on grapheme clusters, as valibot's `maxGraphemes` but counting no further than the bound: valibot
 * segments the whole value, and V8's segmenter costs more per cluster the longer the string (BENCHMARKS.md,
 * section "Hostile bodies: POST /v1/categories, up to 1 MiB"). The bound is carried into the OpenAPI description
 * as `x-max-graphemes`.
 */
function maxGraphemes(requirement: number, message: string) {
  const action = v.rawCheck<string>(({ dataset, addIssue }) => {
    if (dataset.typed && hasMoreGraphemesThan(dataset.value, requirement)) addIssue({ message, expected: `<=${requirement}` });
  });
  return Object.assign(action, { maxGraphemes: requirement });
}

const NAME_TOO_LONG = `must be at most ${CATEGORY_NAME_MAX_LENGTH} characters (and ${CATEGORY_NAME_MAX_CODE_POINTS} Unicode code points)`;
const DESCRIPTION_TOO_LONG = `must be at most ${CATEGORY_DESCRIPTION_MAX_LENGTH} characters (and ${CATEGORY_DESCRIPTION_MAX_CODE_POINTS} Unicode code points)`;

/**
 * NewCategory: the request body of `createCategory`. Parse with {@link parseNewCategory}, which stops each
 * field's checks at the first that fails (`abortPipeEarly`), so the grapheme count never runs on a value
 * over its code-point bound.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#new-category
 */
export const NewCategorySchema = v.strictObject(
  {
    name: v.pipe(
      v.string('must be a string'),
      v.description(
        `The category name. Leading and trailing whitespace is removed; then 1 to ${CATEGORY_NAME_MAX_LENGTH} characters (grapheme clusters) and at most ${CATEGORY_NAME_MAX_CODE_POINTS} Unicode code points, no control characters.`,
      ),
      v.trim(),
      v.minLength(1, 'must not be empty or only whitespace'),
      v.maxCodePoints(CATEGORY_NAME_MAX_CODE_POINTS, NAME_TOO_LONG),
      maxGraphemes(CATEGORY_NAME_MAX_LENGTH, NAME_TOO_LONG),
      v.regex(NO_CONTROL_CHARACTERS, 'must not contain control characters'),
    ),
    description: v.optional(
      v.pipe(
        v.string('must be a string'),
        v.description(
          `A short description of the category: at most ${CATEGORY_DESCRIPTION_MAX_LENGTH} characters (grapheme clusters) and ${CATEGORY_DESCRIPTION_MAX_CODE_POINTS} Unicode code points.`,
        ),
        v.maxCodePoints(CATEGORY_DESCRIPTION_MAX_CODE_POINTS, DESCRIPTION_TOO_LONG),
        maxGraphemes(CATEGORY_DESCRIPTION_MAX_LENGTH, DESCRIPTION_TOO_LONG),
      ),
    ),
  },
  (issue) =>
    issue.expected === 'never'
      ? `is not a field of NewCategory (allowed: name, description)`
      : 'is required',
);

/**
 * Category: `id` is an int64 assigned by the service; in this library always a safe integer ≥ 1.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#category
 */
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

/**
 * Error: the body of every error answer.
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#error-body
 */
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

/** Longest field name quoted back in a message; longer ones are cut and end with `…`. */
const MAX_QUOTED_FIELD_LENGTH = 40;

/**
 * Validates an already-parsed JSON value as a NewCategory.
 *
 * Each field stops at its first failing check, so an oversized value is refused by the linear code-point
 * bound before any grapheme segmentation; an unknown field is named (the first one found, cut to 40
 * characters), so a message never grows with the input.
 *
 * @returns the trimmed value, or a message such as `name: is required; color: is not a field of NewCategory`.
 *   Never throws.
 */
export function parseNewCategory(input: unknown): NewCategoryParseResult {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return { success: false, message: 'The request body must be a JSON object (a NewCategory).' };
  }
  const result = v.safeParse(NewCategorySchema, input, { abortPipeEarly: true });
  if (result.success) return { success: true, value: result.output };
  const problems = result.issues.map((issue) => `${quotedField(v.getDotPath(issue) ?? 'body')}: ${issue.message}`);
  return { success: false, message: `Invalid NewCategory: ${problems.join('; ')}.` };
}

function quotedField(path: string): string {
  return path.length > MAX_QUOTED_FIELD_LENGTH ? `${path.slice(0, MAX_QUOTED_FIELD_LENGTH)}…` : path;
}
