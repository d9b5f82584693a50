/**
 * The rate-limit identity of a caller without a valid API key: its client address.
 */
import ipaddr from 'ipaddr.js';

/** The IPv6 prefix length anonymous callers are grouped by, by default: one host usually holds a whole /64. */
export const DEFAULT_IPV6_SUBNET = 64;

/** What {@link normalizeClientAddress} answers for a missing or unparseable address. */
export const UNKNOWN_CLIENT_ADDRESS = 'unknown';

/**
 * Normalises a client address for anonymous rate limiting.
 *
 * - IPv4 addresses stay as they are; IPv4-mapped IPv6 (`::ffff:203.0.113.7`) becomes IPv4.
 * - IPv6 addresses become their network of `ipv6Subnet` bits (default 64: `2001:db8:1:2::/64`): one host
 *   usually holds a whole /64, so limiting single IPv6 addresses would let one client rotate through 2^64 of
 *   them. (express-rate-limit and @fastify/rate-limit call this setting `ipv6Subnet` too.)
 * - A missing or unparseable address becomes `unknown` ({@link UNKNOWN_CLIENT_ADDRESS}): all such callers
 *   share one counter. The pipeline warns once when that happens (`PETSTORE_NO_CLIENT_ADDRESS`).
 *
 * Which address is the client's (e.g. behind a proxy) is the host framework's decision (`trustProxy` in
 * Fastify, `trust proxy` in Express); adapters pass `request.ip` / `req.ip`.
 *
 * @param ipv6Subnet prefix length, a whole number from 1 to 128
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/http-api.md#anonymous-callers
 */
export function normalizeClientAddress(address: string | undefined, ipv6Subnet = DEFAULT_IPV6_SUBNET): string {
  if (address === undefined || !ipaddr.isValid(address)) return UNKNOWN_CLIENT_ADDRESS;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) parsed = v6.toIPv4Address();
  }
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const network = ipaddr.IPv6.networkAddressFromCIDR(`${parsed.toString()}/${ipv6Subnet}`);
  return `${network.toString()}/${ipv6Subnet}`;
}
