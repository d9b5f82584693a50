/**
 * The text a rate-limit store keeps a store key under: the key itself, unless it holds a code unit that UTF-8 text
 * cannot carry faithfully — NUL (PostgreSQL's text refuses it) or a lone surrogate (UTF-8 writes U+FFFD for it, so
 * distinct keys would share a record) — or U+FFFD itself, the escape: each such unit is written as U+FFFD and its
 * four hex digits (`anon:a\0b` → `anon:a\uFFFD0000b`). Distinct keys stay distinct, and every key of well-formed
 * text without NUL (the engine's `account:<accountId>`, `anon:<address>`) is kept as it is, readable by operators.
 */
export function storedKeyText(key: string): string {
  return key.replace(UNSAFE_KEY_UNITS, (unit) => `\uFFFD${unit.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`);
}

/** NUL, U+FFFD, and a high surrogate not followed by a low one or a low one not preceded by a high one. */
const UNSAFE_KEY_UNITS = /[\0\uFFFD]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
