import { spawnSync } from 'node:child_process';

/** What each binary's probe found, so that a process (a test worker) runs each probe once. */
const answered = new Map<string, boolean>();

/**
 * True when `binary --version` runs and exits 0 (the program is installed); asked once per binary and process.
 * Not exported from the entry.
 */
export function answersVersion(binary: string): boolean {
  let found = answered.get(binary);
  if (found === undefined) {
    const probe = spawnSync(binary, ['--version'], { stdio: 'ignore', timeout: 5000 });
    found = probe.error === undefined && probe.status === 0;
    answered.set(binary, found);
  }
  return found;
}
