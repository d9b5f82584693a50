/**
 * Parsing of `Authorization: Bearer <API_KEY>` (RFC 6750 §2.1) and the `WWW-Authenticate`
 * challenge of a 401 answer (RFC 6750 §3).
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#authentication
 */

/** What the Authorization header held. */
export type BearerCredential =
  | { kind: 'missing' }
  | { kind: 'malformed' }
  | { kind: 'token'; token: string };

// RFC 6750 §2.1: credentials = "Bearer" 1*SP b64token; b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
/** RFC 6750 §2.1 `b64token`: the only keys a client can present. */
export const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
const BEARER_SCHEME = /^bearer(?:[ \t]|$)/i;
// The common spelling, one space and no padding: tested without building a match array, token sliced off.
const BEARER_PLAIN = /^bearer [A-Za-z0-9\-._~+/]+=*$/i;
const BEARER_PLAIN_PREFIX_LENGTH = 'Bearer '.length;

/**
 * Longest API key accepted, in characters: a longer bearer token is answered as an invalid key without being
 * hashed, and `staticApiKeys` refuses a longer key (it could never be presented).
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#input-bounds
 */
export const MAX_API_KEY_LENGTH = 4096;

/**
 * Reads a bearer token from the Authorization header value(s). The scheme is case-insensitive.
 *
 * - no header, or a header with another scheme (e.g. `Basic`) → `missing` (RFC 6750 §3.1: no error code);
 * - `Bearer` with an empty, malformed or over-long token, or several Authorization headers → `malformed`
 *   (a one-element array is read as that one header);
 * - otherwise → the token.
 */
export function readBearerCredential(authorization: string | readonly string[] | undefined): BearerCredential {
  if (authorization === undefined) return { kind: 'missing' };
  if (typeof authorization !== 'string') {
    if (authorization.length === 0) return { kind: 'missing' };
    if (authorization.length > 1) return { kind: 'malformed' };
  }
  const raw = typeof authorization === 'string' ? authorization : (authorization[0] as string);
  if (raw.length <= MAX_API_KEY_LENGTH + BEARER_PLAIN_PREFIX_LENGTH && BEARER_PLAIN.test(raw)) {
    return { kind: 'token', token: raw.slice(BEARER_PLAIN_PREFIX_LENGTH) };
  }
  // Other well-formed spellings (several spaces, trailing spaces) in one regex.
  const direct = raw.length <= MAX_API_KEY_LENGTH + 16 ? BEARER.exec(raw) : null;
  if (direct?.[1]) return tokenOf(direct[1]);
  const value = raw.trim();
  if (!BEARER_SCHEME.test(value)) return { kind: 'missing' };
  if (value.length > MAX_API_KEY_LENGTH + 16) return { kind: 'malformed' };
  const match = BEARER.exec(value);
  return match?.[1] ? tokenOf(match[1]) : { kind: 'malformed' };
}

/** A token within {@link MAX_API_KEY_LENGTH}, however many spaces preceded it; a longer one is malformed. */
function tokenOf(token: string): BearerCredential {
  return token.length <= MAX_API_KEY_LENGTH ? { kind: 'token', token } : { kind: 'malformed' };
}

/**
 * The `WWW-Authenticate` value for a 401 answer (RFC 6750 §3): `Bearer realm="…"`, plus
 * `error="invalid_token"` when a key was presented but is not valid. The key is never echoed.
 */
export function bearerChallenge(realm: string, presentedInvalidKey: boolean): string {
  const quotedRealm = realm.replace(/[\\"]/g, '\\$&');
  return presentedInvalidKey
    ? `Bearer realm="${quotedRealm}", error="invalid_token", error_description="The API key is invalid"`
    : `Bearer realm="${quotedRealm}"`;
}
