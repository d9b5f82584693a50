import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { AggregationTemporality, MeterProvider, MetricReader, type DataPoint, type Histogram } from '@opentelemetry/sdk-metrics';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { petstoreExpress } from '@petstore/adapter-express';
import { petstoreFastify } from '@petstore/adapter-fastify';
import { createPetstore, managedApiKeys, staticApiKeys, type ApiKeyRecordWatcher, type Petstore } from '@petstore/core';
import { petstoreNodeHandler } from '@petstore/core/node';
import { memoryApiKeyRecordStore, memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import express from 'express';
import Fastify from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HTTP_SERVER_DURATION_BUCKETS_SECONDS, instrumentPetstore, type PetstoreTelemetry } from './index.js';

const KEY = 'otel-free-key-6d1e94b2';
const TIGHT_KEY = 'otel-tight-key-0a7c35f8';

/** A reader the test collects from when it wants (cumulative: every count since the start). */
class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

/** The data points of one metric, by name, after a collection. */
async function points(reader: MetricReader, name: string): Promise<Array<DataPoint<unknown>>> {
  const { resourceMetrics } = await reader.collect();
  const found = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics).filter((metric) => metric.descriptor.name === name);
  return found.flatMap((metric) => metric.dataPoints as Array<DataPoint<unknown>>);
}

/** Sum of the counter points (or histogram counts) whose attributes include `match`. */
async function total(reader: MetricReader, name: string, match: Record<string, unknown>): Promise<number> {
  let sum = 0;
  for (const point of await points(reader, name)) {
    if (!Object.entries(match).every(([key, value]) => point.attributes[key] === value)) continue;
    sum += typeof point.value === 'number' ? point.value : (point.value as Histogram).count;
  }
  return sum;
}

function newPetstore(): Petstore {
  return createPetstore({
    apiKeys: staticApiKeys([
      { key: KEY, plan: 'free', accountId: 'acct-free' },
      { key: TIGHT_KEY, plan: 'enterprise', accountId: 'acct-tight', limits: { requestsPerMinute: 2, requestsPerDay: 100 } },
    ]),
    categories: memoryCategoryStore(),
    rateLimit: { store: memoryRateLimitStore(), ban: false },
  });
}

/** A server of each kind, serving a fresh petstore at /v1 on a free port; answers its base URL and how to stop it. */
const ADAPTERS: Record<string, () => Promise<{ url: string; close(): Promise<void> }>> = {
  fastify: async () => {
    const app = Fastify();
    await app.register(petstoreFastify, { prefix: '/v1', petstore: newPetstore() });
    const url = await app.listen({ port: 0, host: '127.0.0.1' });
    return { url, close: () => app.close() };
  },
  express: async () => {
    const app = express();
    app.use('/v1', petstoreExpress({ petstore: newPetstore() }));
    return listen(createServer(app));
  },
  node: async () => listen(createServer(petstoreNodeHandler(newPetstore()))),
};

async function listen(server: Server): Promise<{ url: string; close(): Promise<void> }> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe.each(Object.keys(ADAPTERS))('instrumentPetstore on %s', (adapter) => {
  const reader = new TestReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  let telemetry: PetstoreTelemetry;
  let server: { url: string; close(): Promise<void> };
  beforeAll(async () => {
    telemetry = instrumentPetstore({ meterProvider, spans: false });
    server = await ADAPTERS[adapter]!();
  });
  afterAll(async () => {
    telemetry.stop();
    await server.close();
    await meterProvider.shutdown();
  });

  it('counts exactly the traffic sent: admitted, limited and unauthorized requests, their durations and store calls', async () => {
    const get = (authorization?: string) =>
      fetch(`${server.url}/v1/categories`, authorization === undefined ? {} : { headers: { authorization } }).then((response) => response.status);
    const statuses: number[] = [];
    for (let index = 0; index < 3; index++) statuses.push(await get(`Bearer ${KEY}`)); // 3 admitted
    for (let index = 0; index < 4; index++) statuses.push(await get(`Bearer ${TIGHT_KEY}`)); // 2 admitted, 2 limited
    statuses.push(await get()); // missing
    statuses.push(await get('Bearer not-a-key-91c2')); // unknown
    statuses.push(await get('Bearer two tokens')); // malformed
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 401, 401, 401]);

    expect(await total(reader, 'petstore.rate_limit.decisions', { outcome: 'admitted', plan: 'free' })).toBe(3);
    expect(await total(reader, 'petstore.rate_limit.decisions', { outcome: 'admitted', plan: 'enterprise' })).toBe(2);
    expect(await total(reader, 'petstore.rate_limit.decisions', { outcome: 'limited', plan: 'enterprise' })).toBe(2);
    // The 401s were charged to the anonymous limit before being refused.
    expect(await total(reader, 'petstore.rate_limit.decisions', { outcome: 'admitted', plan: 'anonymous' })).toBe(3);
    expect(await total(reader, 'petstore.rate_limit.decisions', { outcome: 'banned' })).toBe(0);
    for (const reason of ['missing', 'unknown', 'malformed']) {
      expect(await total(reader, 'petstore.auth.failures', { reason })).toBe(1);
    }

    const route = { 'http.request.method': 'GET', 'http.route': '/v1/categories', 'url.scheme': 'http' };
    expect(await total(reader, 'http.server.request.duration', { ...route, 'http.response.status_code': 200 })).toBe(5);
    expect(await total(reader, 'http.server.request.duration', { ...route, 'http.response.status_code': 429 })).toBe(2);
    expect(await total(reader, 'http.server.request.duration', { ...route, 'http.response.status_code': 401 })).toBe(3);
    const durations = await points(reader, 'http.server.request.duration');
    expect(durations.every((point) => !('error.type' in point.attributes))).toBe(true);
    expect((durations[0]?.value as Histogram).buckets.boundaries).toEqual(HTTP_SERVER_DURATION_BUCKETS_SECONDS);

    // Every request looks its key up (but the missing and malformed ones) and consumes; those with a valid key read the
    // list's version beside the charge (the 429s too: read, then not used), and the first of them the list (the
    // others answer the list kept for that version).
    const store = (operation: string) => total(reader, 'petstore.store.operation.duration', { operation, outcome: 'ok' });
    expect(await store('find_key')).toBe(8);
    expect(await store('consume')).toBe(10);
    expect(await store('list_version')).toBe(7);
    expect(await store('list')).toBe(1);
    expect(await total(reader, 'petstore.store.operation.duration', { backend: 'memory' })).toBe(26);
  });
});

describe('spans', () => {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  const reader = new TestReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  beforeAll(() => {
    context.setGlobalContextManager(contextManager);
  });
  afterEach(() => exporter.reset());
  afterAll(async () => {
    context.disable();
    await tracerProvider.shutdown();
    await meterProvider.shutdown();
  });

  it("records a span per request, a child of the host's active span, and one per store call under it", async () => {
    const telemetry = instrumentPetstore({ meterProvider, tracerProvider });
    const petstore = newPetstore();
    const host = tracerProvider.getTracer('host').startSpan('host request');
    const response = await context.with(trace.setSpan(context.active(), host), () =>
      petstore.handle({ method: 'GET', path: '/categories', headers: { authorization: `Bearer ${KEY}` } }),
    );
    host.end();
    telemetry.stop();
    expect(response.status).toBe(200);
    const spans = exporter.getFinishedSpans();
    const request = spans.find((span) => span.name === 'petstore listCategories');
    expect(request?.parentSpanContext?.spanId).toBe(host.spanContext().spanId);
    expect(request?.attributes).toMatchObject({ 'http.route': '/v1/categories', 'http.response.status_code': 200, 'petstore.plan': 'free' });
    const storeSpans = spans.filter((span) => span.parentSpanContext?.spanId === request?.spanContext().spanId);
    expect(storeSpans.map((span) => span.name)).toEqual(['find_key memory', 'list_version memory', 'consume memory', 'list memory']);
    expect(JSON.stringify(spans.map((span) => span.attributes))).not.toContain(KEY);
  });

  it('records nothing after stop()', async () => {
    const telemetry = instrumentPetstore({ meterProvider, tracerProvider });
    telemetry.stop();
    telemetry.stop();
    await newPetstore().handle({ method: 'GET', path: '/categories', headers: {}, clientAddress: '192.0.2.1' });
    expect(exporter.getFinishedSpans()).toEqual([]);
    expect(await points(reader, 'petstore.auth.failures')).toEqual([]);
  });
});

describe('petstore.api_key.watch.connected', () => {
  it('reads 1 while managed keys watch their store, 0 from a break until the watch is back, and stops with the manager', async () => {
    const reader = new TestReader();
    const meterProvider = new MeterProvider({ readers: [reader] });
    const telemetry = instrumentPetstore({ meterProvider, spans: false });
    const inner = memoryApiKeyRecordStore();
    const watchers: ApiKeyRecordWatcher[] = [];
    const keys = managedApiKeys({
      store: { ...inner, backend: 'otel-watch-test', watch: (listener) => (watchers.push(listener), inner.watch(listener)) },
    });
    const gauge = async () =>
      (await points(reader, 'petstore.api_key.watch.connected')).filter((point) => point.attributes['backend'] === 'otel-watch-test').map((point) => point.value);
    try {
      await keys.ready();
      expect(await gauge()).toEqual([1]);
      for (const watcher of watchers) watcher.onDisconnect(new Error('watch heartbeat unanswered'));
      expect(await gauge()).toEqual([0]);
      for (const watcher of watchers) watcher.onReconnect();
      expect(await gauge()).toEqual([1]);
      await keys.close();
      for (const watcher of watchers) watcher.onDisconnect(new Error('closed meanwhile')); // closed: not a break
      expect(await gauge()).not.toContain(0);
      telemetry.stop();
      // Stopped: a break is no longer heard.
      const other = managedApiKeys({ store: { ...inner, backend: 'otel-watch-test', watch: async () => Promise.reject(new Error('refused')) } });
      await other.ready().catch(() => undefined);
      expect(await gauge()).not.toContain(0);
      await other.close();
    } finally {
      telemetry.stop();
      await meterProvider.shutdown();
    }
  });
});
