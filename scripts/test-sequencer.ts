/**
 * The order `npm test` runs its test files in: the longest first, across every project — so the two cores
 * finish together instead of one waiting on the last slow file while the other idles.
 *
 * vitest's own sequencer sorts by project name first, longest first only within a project, which left the
 * slow server suites of the last projects (storage-redis, tests/redis) running alone at the end. Here the unit
 * of scheduling is a file of an isolated project, or all the files of a project that shares one module graph
 * per worker (`isolate: false`): those stay together, so a worker that finished one of them takes the next
 * without importing the graph again. Units go longest first ("longest processing time first", the classic
 * greedy schedule for identical machines). A file's length is its duration in vitest's results cache
 * (`node_modules/.vite/vitest`, written after every run); a file without one (a fresh clone, a new file) goes
 * first, and among those the largest file first, as vitest does.
 */
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

interface Unit {
  specs: TestSpecification[];
  /** Summed cached duration in ms; `undefined` when any file of the unit has none. */
  durationMs: number | undefined;
  /** Summed size in bytes, the tie-breaker for units without a duration. */
  sizeBytes: number;
}

export default class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const cache = this.ctx.cache;
    const units = new Map<string, Unit>();
    for (const spec of files) {
      const key = `${spec.project.name}:${relative(this.ctx.config.root, spec.moduleId)}`;
      const unitKey = spec.project.config.isolate ? key : spec.project.name;
      const unit = units.get(unitKey) ?? { specs: [], durationMs: 0, sizeBytes: 0 };
      const durationMs = cache.getFileTestResults(key)?.duration;
      unit.specs.push(spec);
      unit.durationMs = unit.durationMs === undefined || durationMs === undefined ? undefined : unit.durationMs + durationMs;
      unit.sizeBytes += cache.getFileStats(key)?.size ?? 0;
      units.set(unitKey, unit);
    }
    const ordered = [...units.values()].sort((a, b) => {
      if (a.durationMs === undefined || b.durationMs === undefined) {
        if (a.durationMs !== b.durationMs) return a.durationMs === undefined ? -1 : 1;
        return b.sizeBytes - a.sizeBytes;
      }
      return b.durationMs - a.durationMs;
    });
    // Within a shared-graph project, its longest files first too (vitest's own order within a project).
    return (await Promise.all(ordered.map((unit) => (unit.specs.length > 1 ? super.sort(unit.specs) : unit.specs)))).flat();
  }
}
