/**
 * Deprecation and sunset of operations: `Deprecation` (RFC 9745), `Sunset` (RFC 8594) and `Link`
 * headers, and 410 after the sunset.
 */
import type { OperationId } from './operations.js';

/**
 * How one operation is deprecated.
 *
 * - `deprecatedAtMs`: when it became deprecated, Unix epoch ms → `Deprecation: @<seconds>` (RFC 9745).
 * - `sunsetAtMs`: when it stops working, Unix epoch ms → `Sunset: <IMF-fixdate>` (RFC 8594).
 * - `documentationUrl` / `sunsetUrl`: sent as `Link: <url>; rel="deprecation"` / `rel="sunset"`.
 * - `afterSunset`: `'gone'` (default) answers 410 `gone` from `sunsetAtMs` on; `'serve'` keeps serving.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#deprecation
 */
export interface DeprecationPolicy {
  deprecatedAtMs: number;
  sunsetAtMs?: number;
  documentationUrl?: string;
  sunsetUrl?: string;
  afterSunset?: 'gone' | 'serve';
}

/**
 * `GET /pets/{petId}` is deprecated; its sunset date is the host's to set. By default it is marked deprecated
 * since 2026-01-01T00:00:00Z (`Deprecation` header, `deprecated: true` in the description) with no sunset, so
 * it keeps working: no default switches a route off on a future date. Set `deprecations.getPetById` with a
 * `sunsetAtMs` to announce one (`Sunset` header, then 410 from that date unless `afterSunset: 'serve'`).
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#deprecation
 */
export const DEFAULT_DEPRECATIONS: Readonly<Partial<Record<OperationId, DeprecationPolicy>>> = Object.freeze({
  getPetById: Object.freeze({ deprecatedAtMs: Date.UTC(2026, 0, 1) }),
});

/** The headers a deprecated operation answers with, as lowercase names. */
export function deprecationHeaders(policy: DeprecationPolicy): Record<string, string> {
  const headers: Record<string, string> = { deprecation: `@${Math.floor(policy.deprecatedAtMs / 1000)}` };
  // Date#toUTCString is the IMF-fixdate of RFC 9110 §5.6.7: "Fri, 01 Jan 2027 00:00:00 GMT".
  if (policy.sunsetAtMs !== undefined) headers['sunset'] = new Date(policy.sunsetAtMs).toUTCString();
  const links: string[] = [];
  if (policy.documentationUrl) links.push(`<${linkTarget(policy.documentationUrl)}>; rel="deprecation"; type="text/html"`);
  if (policy.sunsetUrl) links.push(`<${linkTarget(policy.sunsetUrl)}>; rel="sunset"; type="text/html"`);
  if (links.length > 0) headers['link'] = links.join(', ');
  return headers;
}

/**
 * A URL as a `Link` target (RFC 8288 §3): serialised by the URL parser, so existing `%XX` escapes are kept
 * (`encodeURI` would turn `%20` into `%2520`) and IDN hosts become punycode; a space, `<`, `>` or `"` still left
 * (possible only in opaque URLs such as `mailto:`) is percent-encoded.
 */
function linkTarget(url: string): string {
  if (!URL.canParse(url)) return encodeURI(url);
  return new URL(url).href.replace(/[ <>"]/g, encodeURIComponent);
}

/** True when the operation is past its sunset and configured to answer 410. */
export function isGone(policy: DeprecationPolicy, nowMs: number): boolean {
  return policy.sunsetAtMs !== undefined && nowMs >= policy.sunsetAtMs && (policy.afterSunset ?? 'gone') === 'gone';
}
