/**
 * The `Idempotency-Key` of `createCategory` (draft-ietf-httpapi-idempotency-key-header-06): a fresh key per
 * call, or the caller's own, checked here and sent as a Structured Field String (RFC 9651, section 3.3.3).
 * Not exported by the package.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#idempotency-key
 */

/** The longest key the server accepts, in characters. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** 1 to 255 printable ASCII characters (space to `~`): what an sf-string can carry and the server accepts. */
const VALID_KEY = new RegExp(`^[\\x20-\\x7e]{1,${MAX_IDEMPOTENCY_KEY_LENGTH}}$`);

/**
 * Checks a caller's key.
 * @returns the key as given
 * @throws TypeError when `key` is not a string of 1 to 255 printable ASCII characters (U+0020–U+007E)
 */
export function checkIdempotencyKey(key: unknown): string {
  if (typeof key !== 'string' || !VALID_KEY.test(key)) {
    throw new TypeError(`idempotencyKey must be a string of 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters (U+0020 to U+007E)`);
  }
  return key;
}

/**
 * The header value for `key` (already checked): an sf-string, i.e. the key in double quotes with `"` and `\`
 * escaped by a backslash. `abc` → `"abc"`, `a"b\c` → `"a\"b\\c"`.
 */
export function serializeIdempotencyKey(key: string): string {
  return `"${key.replace(/["\\]/g, '\\$&')}"`;
}

/** The part of the Web Crypto API used here; `randomUUID` is missing outside secure contexts in browsers. */
interface RandomSource {
  randomUUID?: () => string;
  getRandomValues?: <T extends Uint8Array>(array: T) => T;
}

/**
 * A fresh key: a random (version 4) UUID, e.g. `8e03978e-40d5-43e8-bc93-6894a57f9324`, from the global
 * `crypto.randomUUID()` (Node.js 20+, browsers in secure contexts), else built from `crypto.getRandomValues()`.
 * The global is looked up on every call, whichever fetch the client uses.
 * @throws TypeError when the runtime has no global `crypto` with either function (pass a key of your own then)
 */
export function newIdempotencyKey(): string {
  const crypto = (globalThis as { crypto?: RandomSource }).crypto;
  if (typeof crypto?.randomUUID === 'function') return crypto.randomUUID();
  if (typeof crypto?.getRandomValues === 'function') {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    bytes[6] = ((bytes[6] as number) & 0x0f) | 0x40; // version 4
    bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80; // variant 10xx (RFC 9562)
    const hex = Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
  }
  throw new TypeError('no global crypto to make an Idempotency-Key: pass createCategory(newCategory, { idempotencyKey })');
}
