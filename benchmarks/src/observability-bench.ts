/**
 * What observability costs on the hot path, in nanoseconds of CPU per request: `petstore.handle` for an
 * authenticated GET /categories (3 categories, memory stores), called in process as the adapters call it, with
 * - no subscriber on the core's diagnostics channels (every petstore that does not ask for more);
 * - a subscriber that does nothing, on both channels (the cost of the contexts and of `tracePromise` alone);
 * - `@petstore/opentelemetry` recording metrics (the SDK's MeterProvider, aggregating; never exported here);
 * - the same with spans too (the SDK's BasicTracerProvider, every span sampled, none exported);
 * - optionally, the core of another commit (`PETSTORE_BASELINE_CORE=<path of its built dist/index.js>`), for the
 *   hot path before the channels existed (see BENCHMARKS.md, section Observability, for how it was built).
 * Interleaved rounds in one process (ns-per-call.ts). Results: BENCHMARKS.md, section "Observability".
 *
 * Try it: `node --expose-gc --import tsx src/observability-bench.ts` from benchmarks/ (after building the packages).
 */
import { tracingChannel } from 'node:diagnostics_channel';
import { pathToFileURL } from 'node:url';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import * as core from '@petstore/core';
import { instrumentPetstore } from '@petstore/opentelemetry';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { compareVariants, printResults, type Variant, type VariantResult } from './ns-per-call.js';

const KEY = 'bench-key-0123456789abcdefghijklmnopqrstuvwxyz';
/** Requests per tinybench sample. */
const BATCH = 200;

/** A reader that is never collected: the SDK aggregates every measurement, as between two scrapes. */
class IdleReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

/** What the variant measured last left subscribed: undone before the next variant prepares. */
let undo: (() => void) | undefined;

function variant(name: string, options: { core?: typeof core; listen?: () => () => void }): Variant {
  return {
    name,
    async prepare() {
      undo?.();
      undo = options.listen?.();
      const { createPetstore, staticApiKeys } = options.core ?? core;
      const categories = memoryCategoryStore();
      for (let i = 0; i < 3; i++) await categories.create({ name: `Category ${i}`, description: `The category number ${i}` });
      const petstore = createPetstore({
        apiKeys: staticApiKeys([{ key: KEY, plan: 'pro' }]),
        categories,
        // Limits no run reaches.
        rateLimit: { store: memoryRateLimitStore(), plans: { pro: { requestsPerMinute: 1e12, requestsPerDay: 1e12 } } },
        onWarning: () => {},
      });
      const request: core.PetstoreRequest = {
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

const nothing = () => undefined;
const idleSubscriber = { start: nothing, end: nothing, asyncStart: nothing, asyncEnd: nothing, error: nothing };

/** The variants, 8 interleaved rounds of 0.6 s each (`quick`: 2 rounds of 0.2 s). */
export async function runObservabilityBenchmark(options: { quick?: boolean } = {}): Promise<VariantResult[]> {
  const baselinePath = process.env['PETSTORE_BASELINE_CORE'];
  const baseline = baselinePath ? ((await import(pathToFileURL(baselinePath).href)) as typeof core) : undefined;
  const variants: Variant[] = [
    ...(baseline ? [variant('baseline core (before the channels), no subscriber', { core: baseline })] : []),
    variant('no subscriber', {}),
    variant('a subscriber that does nothing, both channels', {
      listen: () => {
        const channels = [tracingChannel(core.PETSTORE_REQUEST_CHANNEL), tracingChannel(core.PETSTORE_STORE_CHANNEL)];
        for (const channel of channels) channel.subscribe(idleSubscriber);
        return () => channels.forEach((channel) => channel.unsubscribe(idleSubscriber));
      },
    }),
    variant('@petstore/opentelemetry, metrics', {
      listen: () => {
        const meterProvider = new MeterProvider({ readers: [new IdleReader()] });
        const telemetry = instrumentPetstore({ meterProvider, spans: false });
        return () => {
          telemetry.stop();
          void meterProvider.shutdown();
        };
      },
    }),
    variant('@petstore/opentelemetry, metrics and spans', {
      listen: () => {
        const meterProvider = new MeterProvider({ readers: [new IdleReader()] });
        const tracerProvider = new BasicTracerProvider();
        const telemetry = instrumentPetstore({ meterProvider, tracerProvider });
        return () => {
          telemetry.stop();
          void meterProvider.shutdown();
          void tracerProvider.shutdown();
        };
      },
    }),
  ];
  try {
    return await compareVariants(variants, options.quick ? { rounds: 2, timeMs: 200, batch: BATCH } : { rounds: 8, timeMs: 600, batch: BATCH });
  } finally {
    undo?.();
    undo = undefined;
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  printResults('petstore.handle, authenticated GET /categories, 3 categories', await runObservabilityBenchmark());
}
