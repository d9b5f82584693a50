/**
 * The pipeline alone, in nanoseconds per request: `petstore.handle` for an authenticated GET /categories on the
 * memory stores, called directly as the adapters call it (no HTTP), with 3 and 100 categories. Beside it, the
 * same petstore on a category store that answers an unfrozen copy of its list, so the JSON of the list is
 * written per request: the difference is what the frozen-array rule of `CategoryStore.list` saves (see the
 * comment on `listJson` in packages/core/src/http/category-operations.ts). Compare against the server CPU per
 * request of BENCHMARKS.md.
 *
 * Try it: `node --expose-gc --import tsx src/pipeline-bench.ts` from benchmarks/ (after building the packages).
 */
import { createPetstore, staticApiKeys, type CategoryStore, type PetstoreRequest } from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { pathToFileURL } from 'node:url';
import { compareVariants, printResults, type Variant, type VariantResult } from './ns-per-call.js';

const KEY = 'bench-key-0123456789abcdefghijklmnopqrstuvwxyz';
/** Requests per tinybench sample. */
const BATCH = 200;

function pipelineVariant(name: string, categoriesCount: number, frozenList: boolean): Variant {
  return {
    name,
    async prepare() {
      const stored = memoryCategoryStore();
      for (let i = 0; i < categoriesCount; i++) await stored.create({ name: `Category ${i}`, description: `The category number ${i}` });
      const categories: CategoryStore = frozenList ? stored : { ...stored, list: async () => (await stored.list()).slice() };
      const petstore = createPetstore({
        apiKeys: staticApiKeys([{ key: KEY, plan: 'pro' }]),
        categories,
        // Limits no run reaches.
        rateLimit: { store: memoryRateLimitStore(), plans: { pro: { requestsPerMinute: 1e12, requestsPerDay: 1e12 } } },
        onWarning: () => {},
      });
      const request: PetstoreRequest = {
        method: 'GET',
        path: '/categories',
        headers: { host: 'localhost', authorization: `Bearer ${KEY}`, accept: 'application/json' },
        body: { kind: 'none' },
        clientAddress: '127.0.0.1',
      };
      return async (count: number) => {
        for (let i = 0; i < count; i++) {
          const response = await petstore.handle(request);
          if (response.status !== 200) throw new Error(`status ${response.status}`);
        }
      };
    },
  };
}

/** Both variants for 3 and 100 categories, 8 interleaved rounds of 0.6 s each. */
export async function runPipelineBenchmark(): Promise<{ categories: number; results: VariantResult[] }[]> {
  const runs = [];
  for (const categories of [3, 100]) {
    const results = await compareVariants(
      [
        pipelineVariant('handle, memory stores (frozen list: its JSON reused)', categories, true),
        pipelineVariant('handle, list answered unfrozen (JSON per request)', categories, false),
      ],
      { rounds: 8, timeMs: 600, batch: BATCH },
    );
    runs.push({ categories, results });
  }
  return runs;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const { categories, results } of await runPipelineBenchmark()) {
    printResults(`petstore.handle, authenticated GET /categories, ${categories} categories`, results);
  }
}
