/**
 * The traced route follows where the host mounted the API, not the petstore's `prefix` option: a Fastify and an
 * Express host mount it at /api/petstore, as the READMEs show (the prefix given to the adapter only).
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AggregationTemporality, MeterProvider, MetricReader, type DataPoint } from '@opentelemetry/sdk-metrics';
import { petstoreExpress } from '@petstore/adapter-express';
import { petstoreFastify } from '@petstore/adapter-fastify';
import { createPetstore, staticApiKeys } from '@petstore/core';
import { memoryCategoryStore, memoryRateLimitStore } from '@petstore/storage-memory';
import express from 'express';
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { instrumentPetstore } from './index.js';

const KEY = 'otel-mount-key-7c2d41e9';

class TestReader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

const petstore = () =>
  createPetstore({ apiKeys: staticApiKeys([{ key: KEY, plan: 'free' }]), categories: memoryCategoryStore(), rateLimit: { store: memoryRateLimitStore() } });

const HOSTS: Record<string, () => Promise<{ url: string; close(): Promise<unknown> }>> = {
  fastify: async () => {
    const app = Fastify();
    await app.register(petstoreFastify, { prefix: '/api/petstore', petstore: petstore() });
    return { url: await app.listen({ port: 0, host: '127.0.0.1' }), close: () => app.close() };
  },
  express: async () => {
    const app = express();
    app.use('/api/petstore', petstoreExpress({ petstore: petstore() }));
    const server = createServer(app).listen(0, '127.0.0.1');
    await once(server, 'listening');
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((resolve) => server.close(resolve)) };
  },
};

describe.each(Object.keys(HOSTS))('http.route on a %s host that mounts the API at /api/petstore', (host) => {
  it('labels the requests with the mount, and the description names it as its server', async () => {
    const reader = new TestReader();
    const meterProvider = new MeterProvider({ readers: [reader] });
    const telemetry = instrumentPetstore({ meterProvider, spans: false });
    const server = await HOSTS[host]!();
    try {
      const list = await fetch(`${server.url}/api/petstore/categories`, { headers: { authorization: `Bearer ${KEY}` } });
      expect(list.status).toBe(200);
      const description = (await (await fetch(`${server.url}/api/petstore/openapi.json`)).json()) as { servers: unknown };
      expect(description.servers).toEqual([{ url: '/api/petstore', description: 'This server' }]);
      const { resourceMetrics } = await reader.collect();
      const routes = resourceMetrics.scopeMetrics
        .flatMap((scope) => scope.metrics)
        .filter((metric) => metric.descriptor.name === 'http.server.request.duration')
        .flatMap((metric) => (metric.dataPoints as Array<DataPoint<unknown>>).map((point) => point.attributes['http.route']));
      expect(routes.sort()).toEqual(['/api/petstore/categories', '/api/petstore/openapi.json']);
    } finally {
      telemetry.stop();
      await server.close();
      await meterProvider.shutdown();
    }
  });
});
