/**
 * The system's Chromium (Debian's `chromium` package), for playwright-core: no browser is downloaded.
 *
 * Found as `PETSTORE_CHROMIUM` (a path) when set, else `chromium` or `chromium-browser` on PATH. Without one the
 * suite is skipped with the reason — unless `PETSTORE_REQUIRE_CHROMIUM=1` (set by .ci/run, which installs the
 * package), where it fails instead, like the Redis and PostgreSQL suites under PETSTORE_REQUIRE_REDIS/_POSTGRES.
 */
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/** Where Chromium is, or why the browser tests are skipped. */
export type FoundChromium = { executablePath: string } | { skipReason: string };

/**
 * @throws Error when `PETSTORE_REQUIRE_CHROMIUM=1` and no Chromium is found (the message says where it looked).
 */
export function findChromium(env: NodeJS.ProcessEnv = process.env): FoundChromium {
  const executable = (path: string) => {
    try {
      accessSync(path, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  const configured = env['PETSTORE_CHROMIUM'];
  const candidates =
    configured !== undefined && configured !== ''
      ? [configured]
      : (env['PATH'] ?? '').split(delimiter).flatMap((directory) => ['chromium', 'chromium-browser'].map((name) => join(directory, name)));
  const found = candidates.find(executable);
  if (found !== undefined) return { executablePath: found };
  const skipReason =
    configured !== undefined && configured !== ''
      ? `PETSTORE_CHROMIUM=${configured} is not an executable file`
      : 'no chromium or chromium-browser on PATH (Debian: apt-get install chromium; or set PETSTORE_CHROMIUM)';
  if (env['PETSTORE_REQUIRE_CHROMIUM'] === '1') throw new Error(`No Chromium for the browser tests (PETSTORE_REQUIRE_CHROMIUM=1): ${skipReason}`);
  return { skipReason };
}
