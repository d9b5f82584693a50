/**
 * The rate-limit identity of a caller without a valid API key: its client address.
 */
import ipaddr from 'ipaddr.js';

/**
 * Normalises a client address for anonymous rate limiting.
 *
 * - IPv4 addresses stay as they are; IPv4-mapped IPv6 (`::ffff:203.0.113.7`) becomes IPv4.
 * - IPv6 addresses become their /64 prefix (`2001:db8:1:2::/64`): one host usually holds a whole /64, so
 *   limiting single IPv6 addresses would let one client rotate through 2^64 of them.
 * - A missing or unparseable address becomes `unknown` (all such callers share one counter).
 *
 * Which address is the client's (e.g. behind a proxy) is the host framework's decision (`trustProxy` in
 * Fastify, `trust proxy` in Express); adapters pass `request.ip` / `req.ip`.
 */
export function normalizeClientAddress(address: string | undefined): string {
  if (address === undefined || !ipaddr.isValid(address)) return 'unknown';
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6') {
    const v6 = parsed as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) parsed = v6.toIPv4Address();
  }
  if (parsed.kind() === 'ipv4') return parsed.toString();
  // The /64 network: the first four 16-bit groups, host bits zeroed.
  const network = new ipaddr.IPv6([...(parsed as ipaddr.IPv6).parts.slice(0, 4), 0, 0, 0, 0]);
  return `${network.toString()}/64`;
}
