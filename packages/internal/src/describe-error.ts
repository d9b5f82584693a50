/**
 * What an error says in one line: its message, else its code, else an AggregateError's messages; line breaks
 * become spaces. With `causes` (the default), then, after `: `, what its `cause` says when that adds something (a
 * store's "PostgreSQL refused the statement" is followed by the database's reason, e.g. "permission denied for
 * table …"), three causes deep at most.
 */
export function describeError(error: unknown, options: { causes?: boolean } = {}): string {
  return describe(error, options.causes === false ? 3 : 0);
}

function describe(error: unknown, depth: number): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  let text = error.message;
  if (text === '' && error instanceof AggregateError) text = error.errors.map((each) => describe(each, 3)).join('; ');
  if (text === '' && typeof code === 'string') text = code;
  text = (text || error.name).replace(/\s*\n\s*/g, ' ');
  const cause = depth < 3 && error.cause instanceof Error ? describe(error.cause, depth + 1) : '';
  return cause === '' || text.includes(cause) ? text : `${text}: ${cause}`;
}
