/**
 * `PETSTORE_METRICS_HOST`: the metrics endpoint listens on loopback unless told otherwise, whatever `HOST` is, so
 * an API opened to the network (`HOST=0.0.0.0`) does not open its metrics too.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { startExample, stopExamples } from './spawn-example.js';

describe('the metrics endpoint of an example server started with HOST=0.0.0.0', () => {
  afterAll(stopExamples);

  it('listens on 127.0.0.1 only (the address the server reports), while the API listens on every interface', async () => {
    const server = await startExample('fastify-server.ts', { HOST: '0.0.0.0', PETSTORE_METRICS_PORT: '0', PETSTORE_API_KEYS: 'metrics-key:free' });
    expect(server.output).toMatch(/listening on http:\/\/0\.0\.0\.0:\d+\/v1/);
    const metricsUrl = /^Prometheus metrics \(PETSTORE_METRICS_PORT, PETSTORE_METRICS_HOST\) at (\S+)$/m.exec(server.output)?.[1];
    expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const response = await fetch(metricsUrl as string);
    expect(response.status).toBe(200);
    await response.text();
  });
});
