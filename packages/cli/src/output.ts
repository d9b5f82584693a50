/** What the commands print: readable tables, or one JSON object with `--json`. */
import type { ApiKeyInfo, PlanLimits, RateLimitPeek } from '@petstore/core';
import type { LimitsOwner } from './commands.js';

/** Times in tables: ISO 8601, UTC. */
export function time(ms: number | undefined, none = '-'): string {
  return ms === undefined ? none : new Date(ms).toISOString();
}

/** Text from a store, safe to print on a terminal: control characters (escape sequences included) shown as `?`. */
function printable(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
}

function limitsText(limits: PlanLimits | undefined, plan: string): string {
  return limits === undefined ? `the ${plan} plan's` : `${limits.requestsPerMinute}/min, ${limits.requestsPerDay}/day`;
}

/** Rows as columns padded to their widest cell, two spaces apart; no trailing spaces. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, column) => (widths[column] = Math.max(widths[column] ?? 0, cell.length)));
  return rows.map((row) => row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column] ?? 0))).join('  ').trimEnd()).join('\n');
}

/** One key, as rows of field and value; the plaintext `key` first when given (issue, rotate). */
export function keyTable(info: ApiKeyInfo, key?: string): string {
  const rows: string[][] = [];
  if (key !== undefined) rows.push(['key', key]);
  rows.push(
    ['keyId', info.keyId],
    ['account', printable(info.accountId)],
    ['plan', info.plan],
    ['limits', limitsText(info.limits, info.plan)],
    ['name', info.name === undefined ? '-' : printable(info.name)],
    ['status', info.status],
    ['created', time(info.createdAtMs)],
    ['updated', time(info.updatedAtMs)],
    ['expires', time(info.expiresAtMs, 'never')],
  );
  if (info.revokedAtMs !== undefined) rows.push(['revoked', time(info.revokedAtMs)]);
  if (info.previousKeyValidUntilMs !== undefined) rows.push(['previous key until', time(info.previousKeyValidUntilMs)]);
  return table(rows);
}

/** A page of keys, one per row. */
export function keysTable(keys: readonly ApiKeyInfo[]): string {
  return table([
    ['KEY ID', 'ACCOUNT', 'PLAN', 'LIMITS', 'STATUS', 'CREATED', 'EXPIRES', 'NAME'],
    ...keys.map((info) => [
      info.keyId,
      printable(info.accountId),
      info.plan,
      info.limits === undefined ? '-' : `${info.limits.requestsPerMinute}/min ${info.limits.requestsPerDay}/day`,
      info.status,
      time(info.createdAtMs),
      time(info.expiresAtMs, 'never'),
      info.name === undefined ? '' : printable(info.name),
    ]),
  ]);
}

/** The owner of `limits show|reset`, in words. */
export function ownerText(owner: LimitsOwner | { accountId: string; keyId: string }): string {
  if ('clientAddress' in owner) return `client address ${owner.clientAddress}`;
  if ('accountId' in owner && 'keyId' in owner) return `account ${printable(owner.accountId)} (of key ${owner.keyId})`;
  if ('accountId' in owner) return `account ${printable(owner.accountId)}`;
  return `key ${owner.keyId}`;
}

/** What `limits show` prints: the windows, then the bans. */
export function limitsTable(owner: string, peek: RateLimitPeek): string {
  const lines = [`${owner}, as of ${time(peek.nowMs)}`, ''];
  if (peek.windows.length === 0) lines.push('no requests counted in the current windows: full quotas');
  else {
    lines.push(
      table([
        ['WINDOW', 'LIMIT', 'USED', 'REMAINING', 'RESETS AT'],
        ...peek.windows.map((window) => [window.name, String(window.limit), String(window.used), String(window.remaining), time(window.resetAtMs)]),
      ]),
    );
  }
  lines.push('');
  if (peek.bans.length === 0) lines.push('bans: none');
  else for (const ban of peek.bans) lines.push(`banned until ${time(ban.bannedUntilMs)}${ban.keyId !== undefined ? `: key ${ban.keyId}` : ''}`);
  return lines.join('\n');
}
