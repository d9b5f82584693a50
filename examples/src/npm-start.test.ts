/**
 * SIGTERM sent to the `npm start` process (and `npm run start:express`), as a process manager or a user's
 * `kill` would send it, reaches the server through npm and scripts/start-example.mjs: the server stops
 * answering and every process of the tree ends.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { startNpmScript, stopExamples } from './spawn-example.js';

afterEach(stopExamples);

interface ProcessInfo {
  pid: number;
  ppid: number;
  /** `Z` for a zombie: ended, not yet collected by its parent. */
  state: string;
  /** Its command line, arguments separated by spaces. */
  command: string;
}

/** Every process of this machine (from /proc, or `ps` where there is none). */
function processes(): ProcessInfo[] {
  if (!existsSync('/proc/self/stat')) {
    return execFileSync('ps', ['-A', '-o', 'pid=,ppid=,stat=,args='], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .map((line) => line.trim().split(/\s+/))
      .map(([pid, ppid, state, ...command]) => ({ pid: Number(pid), ppid: Number(ppid), state: state!.slice(0, 1), command: command.join(' ') }));
  }
  const found: ProcessInfo[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // "<pid> (<name>) <state> <ppid> …"; the name may hold spaces and parentheses.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ').trim();
      found.push({ pid: Number(entry), ppid: Number(ppid), state: state!, command });
    } catch {
      // it ended while we looked
    }
  }
  return found;
}

/** `pid` and all its descendants. */
function processTree(pid: number): ProcessInfo[] {
  const all = processes();
  const tree = all.filter((info) => info.pid === pid);
  for (let i = 0; i < tree.length; i++) tree.push(...all.filter((info) => info.ppid === tree[i]!.pid));
  return tree;
}

/** Whether a process is still running (a zombie has ended; only its parent has not collected it yet). */
function isRunning(pid: number): boolean {
  return processes().some((info) => info.pid === pid && info.state !== 'Z');
}

describe.each<[string, string[], string]>([
  ['npm start', ['start'], 'Fastify'],
  ['npm run start:express', ['run', 'start:express'], 'Express'],
])('SIGTERM to `%s`', (_name, args, framework) => {
  it('reaches the server: it stops answering, npm exits 0, and every process of the tree is gone', async () => {
    const npm = await startNpmScript(args, { PETSTORE_API_KEYS: 'npm-start-key:free' });
    // npm's and the build's lines, then the server's banner: no setup warning (a `[petstore] …` line) before it.
    const banner = npm.output.indexOf(`petstore categories API (${framework}, memory storage) listening on `);
    expect(banner).toBeGreaterThan(0);
    expect(npm.output.slice(0, banner)).not.toMatch(/^\[petstore\]/m);
    expect((await fetch(`${npm.url}/health`)).status).toBe(200);
    // The API reference page it prints the address of.
    expect(npm.output).toContain(`API reference (open it in a browser): ${npm.url}/v1/docs`);
    const page = await fetch(`${npm.url}/v1/docs`);
    expect([page.status, page.headers.get('content-type')]).toEqual([200, 'text/html; charset=utf-8']);
    const tree = processTree(npm.child.pid!);
    // npm, scripts/start-example.mjs, the server (and tsx's esbuild service), with no shell between them.
    const commands = tree.map((info) => info.command);
    expect(commands.filter((command) => /^(\S*\/)?(da|ba)?sh /.test(command))).toEqual([]);
    expect(commands.filter((command) => command.includes('scripts/start-example.mjs'))).toHaveLength(1);
    expect(commands.filter((command) => command.includes(`src/${framework.toLowerCase()}-server.ts`))).toHaveLength(1);

    npm.child.kill('SIGTERM');
    expect(await npm.exited).toEqual({ code: 0, signal: null });
    expect(npm.printed()).toMatch(/SIGTERM: shutting down[^]*\nshut down\n/);
    await expect(fetch(`${npm.url}/health`)).rejects.toThrow();

    // The server and npm are gone by now; tsx's esbuild service ends as soon as its pipe from the server closes.
    // Processes that are not our children send no event when they end: /proc is read until they are gone (the
    // bound only ends a test that has failed).
    await expect.poll(() => tree.filter((info) => isRunning(info.pid)), { timeout: 20_000, interval: 20 }).toEqual([]);
  }, 30_000);
});
