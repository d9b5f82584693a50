import { spawnSync } from 'node:child_process';

/** True when `binary --version` runs and exits 0 (the program is installed). Not exported from the entry. */
export function answersVersion(binary: string): boolean {
  const probe = spawnSync(binary, ['--version'], { stdio: 'ignore', timeout: 5000 });
  return probe.error === undefined && probe.status === 0;
}
