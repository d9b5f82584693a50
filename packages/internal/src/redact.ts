/**
 * Connection URLs without their secrets, for printing by the `petstore` command and the example servers.
 *
 * A URL's secrets are the password of its userinfo and the values of its query parameters that pg or ioredis read
 * as one (`password`, `sslpassword`, ioredis's `sentinelPassword`, and the common `pass`, `pwd`, `secret`,
 * `token`). The URL is read by hand, not with the WHATWG parser: a password holding an unescaped `@`, `/`, `?` or
 * `#` makes that parser fail or split the URL elsewhere, and must still be hidden.
 */

/** Query parameters whose value is a secret (matched case-insensitively inside the name). */
const SECRET_PARAMETER = /pass|pwd|secret|token/i;
const MASK = '***';

interface UrlParts {
  /** `redis://`, or '' when the text has no scheme. */
  scheme: string;
  /** The user name, or undefined without userinfo. */
  user: string | undefined;
  /** The password as written (percent-encoded or not), or undefined. */
  password: string | undefined;
  /** Host, port and path: what follows the userinfo, up to the query. */
  rest: string;
  /** The query's `name=value` pairs as written, or undefined without a query. */
  query: string[] | undefined;
}

/**
 * The parts of a URL. The userinfo ends at the last `@` (a host never holds one), so `redis://:p@ss@host` has
 * the password `p@ss`; the query begins at the first `?` after it.
 */
function partsOf(url: string): UrlParts {
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(url)?.[0] ?? '';
  let rest = url.slice(scheme.length);
  let user: string | undefined;
  let password: string | undefined;
  const at = scheme === '' ? -1 : rest.lastIndexOf('@');
  if (at !== -1) {
    const userinfo = rest.slice(0, at);
    const colon = userinfo.indexOf(':');
    user = colon === -1 ? userinfo : userinfo.slice(0, colon);
    password = colon === -1 ? undefined : userinfo.slice(colon + 1);
    rest = rest.slice(at + 1);
  }
  const question = rest.indexOf('?');
  let query: string[] | undefined;
  if (question !== -1) {
    query = rest.slice(question + 1).split('&');
    rest = rest.slice(0, question);
  }
  return { scheme, user, password, rest, query };
}

function decoded(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}

/**
 * A Redis or PostgreSQL URL with every secret replaced by `***`: the userinfo's password (everything between the
 * user name's `:` and the last `@`) and the values of secret query parameters (`?password=`, `sslpassword=`, …).
 * Never throws: a URL no parser accepts is masked the same way.
 */
export function redactUrl(url: string): string {
  const parts = partsOf(url);
  const userinfo = parts.user === undefined ? '' : `${parts.user}${parts.password === undefined ? '' : `:${MASK}`}@`;
  const query =
    parts.query === undefined
      ? ''
      : `?${parts.query
          .map((pair) => {
            const equals = pair.indexOf('=');
            return equals !== -1 && SECRET_PARAMETER.test(decoded(pair.slice(0, equals))) ? `${pair.slice(0, equals + 1)}${MASK}` : pair;
          })
          .join('&')}`;
  return `${parts.scheme}${userinfo}${parts.rest}${query}`;
}

/** The secrets of `url` (as written and percent-decoded), longest first; none for an undefined URL. */
function secretsOf(url: string | undefined): string[] {
  if (url === undefined) return [];
  const parts = partsOf(url);
  const secrets: string[] = [];
  if (parts.password) secrets.push(parts.password, decoded(parts.password));
  for (const pair of parts.query ?? []) {
    const equals = pair.indexOf('=');
    const value = equals === -1 ? '' : pair.slice(equals + 1);
    if (value !== '' && SECRET_PARAMETER.test(decoded(pair.slice(0, equals)))) secrets.push(value, decoded(value));
  }
  // A secret of one or two characters is left alone in running text (it would mask every such letter pair).
  return [...new Set(secrets)].filter((secret) => secret.length >= 3).sort((a, b) => b.length - a.length);
}

/**
 * `text` (an error message, say) with each of `urls` redacted where it appears whole, and every secret of theirs
 * replaced by `***` wherever it appears alone (a driver's message may quote a part of the URL).
 */
export function redactSecrets(text: string, urls: ReadonlyArray<string | undefined>): string {
  let redacted = text;
  for (const url of urls) if (url !== undefined && url !== '') redacted = redacted.split(url).join(redactUrl(url));
  for (const secret of urls.flatMap(secretsOf)) redacted = redacted.split(secret).join(MASK);
  return redacted;
}
