/**
 * What the metrics and spans say of the answers an operator alerts on: server failures (5xx) marked with
 * `error.type`, and the reference page's requests counted like the API's.
 */
import { AggregationTemporality, MeterProvider, MetricReader, type DataPoint, type Histogram } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { SpanStatusCode } from '@opentelemetry/api';
import { createPetstore, PetstoreError, staticApiKeys, type RateLimitStore } from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import { afterEach, describe, expect, it } from 'vitest';
import { instrumentPetstore } from './index.js';

const KEY = 'otel-failures-key-3b9e02d1';

class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

/** The attributes and counts of every point of `name`. */
async function pointsOf(reader: MetricReader, name: string): Promise<Array<{ attributes: Record<string, unknown>; count: number }>> {
  const { resourceMetrics } = await reader.collect();
  return resourceMetrics.scopeMetrics
    .flatMap((scope) => scope.metrics)
    .filter((metric) => metric.descriptor.name === name)
    .flatMap((metric) => metric.dataPoints as Array<DataPoint<unknown>>)
    .map((point) => ({ attributes: { ...point.attributes }, count: typeof point.value === 'number' ? point.value : (point.value as Histogram).count }));
}

const stops: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
});

function instrumented() {
  const reader = new TestReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const telemetry = instrumentPetstore({ meterProvider, tracerProvider });
  stops.push(
    () => telemetry.stop(),
    () => meterProvider.shutdown(),
    () => tracerProvider.shutdown(),
  );
  return { reader, exporter };
}

describe('server failures', () => {
  it('marks a 503 (the rate-limit store down) and a 500 with error.type on the duration and the span; a 4xx without', async () => {
    const { reader, exporter } = instrumented();
    const failing: RateLimitStore = {
      backend: 'custom',
      consume: () => Promise.reject(new PetstoreError('service_unavailable', 'down', { retryAfterSeconds: 5 })),
      peek: () => Promise.reject(new Error('down')),
      reset: () => Promise.reject(new Error('down')),
    };
    const reported: unknown[] = [];
    const onInternalError = (error: unknown) => reported.push(error);
    const warnings: unknown[] = [];
    const onWarning = (warning: unknown) => warnings.push(warning);
    const broken = createPetstore({ apiKeys: staticApiKeys([{ key: KEY, plan: 'free' }]), categories: memoryCategoryStore(), rateLimit: { store: failing }, onInternalError, onWarning });
    const categories = memoryCategoryStore();
    categories.list = () => Promise.reject(new Error('the list is broken'));
    categories.listVersion = () => Promise.reject(new Error('the version is broken'));
    const crashing = createPetstore({ apiKeys: staticApiKeys([{ key: KEY, plan: 'free' }]), categories, rateLimit: { store: memoryRateLimitStore() }, onInternalError, onWarning });
    // With a client address, as every adapter gives one: without it the 401 would also warn PETSTORE_NO_CLIENT_ADDRESS.
    const get = (petstore: typeof broken, authorization?: string) =>
      petstore.handle({ method: 'GET', path: '/categories', headers: authorization === undefined ? {} : { authorization }, clientAddress: '192.0.2.7' });

    expect((await get(broken, `Bearer ${KEY}`)).status).toBe(503);
    expect((await get(crashing, `Bearer ${KEY}`)).status).toBe(500);
    expect((await get(crashing)).status).toBe(401);
    expect(reported).toHaveLength(2); // the store failure and the crash, each reported to the host once
    expect(warnings).toEqual([]);

    const durations = await pointsOf(reader, 'http.server.request.duration');
    const byStatus = Object.fromEntries(durations.map((point) => [point.attributes['http.response.status_code'], point.attributes['error.type']]));
    expect(byStatus).toEqual({ 503: '503', 500: '500', 401: undefined });
    const spans = exporter.getFinishedSpans().filter((span) => span.name === 'petstore listCategories');
    const marks = spans.map((span) => [span.attributes['http.response.status_code'], span.attributes['error.type'], span.status.code]);
    expect(marks).toEqual([
      [503, '503', SpanStatusCode.ERROR],
      [500, '500', SpanStatusCode.ERROR],
      [401, undefined, SpanStatusCode.UNSET],
    ]);
  });
});

describe('the reference page', () => {
  it('is traced like the API: its charges and 429s are counted as decisions, under its own route', async () => {
    const { reader } = instrumented();
    const petstore = createPetstore({
      apiKeys: staticApiKeys([{ key: KEY, plan: 'free' }]),
      categories: memoryCategoryStore(),
      rateLimit: { store: memoryRateLimitStore(), anonymous: { requestsPerMinute: 2, requestsPerDay: 100 }, ban: false },
      docs: {},
    });
    const statuses: number[] = [];
    for (let index = 0; index < 3; index++) {
      statuses.push((await petstore.handle({ method: 'GET', path: '/docs', headers: {}, clientAddress: '192.0.2.7' })).status);
    }
    statuses.push((await petstore.handle({ method: 'GET', path: '/docs/initializer.js', headers: { authorization: `Bearer ${KEY}` } })).status);
    expect(statuses).toEqual([200, 200, 429, 200]);
    const decisions = await pointsOf(reader, 'petstore.rate_limit.decisions');
    const counts = Object.fromEntries(decisions.map((point) => [`${point.attributes['outcome']} ${point.attributes['plan']}`, point.count]));
    expect(counts).toEqual({ 'admitted anonymous': 2, 'limited anonymous': 1, 'admitted free': 1 });
    const routes = (await pointsOf(reader, 'http.server.request.duration')).map((point) => [point.attributes['http.route'], point.attributes['http.response.status_code'], point.count]);
    expect(routes).toEqual(
      expect.arrayContaining([
        ['/v1/docs', 200, 2],
        ['/v1/docs', 429, 1],
        ['/v1/docs/{file}', 200, 1],
      ]),
    );
    expect(routes).toHaveLength(3);
  });
});
