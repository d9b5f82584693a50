/**
 * The examples' Prometheus endpoint: with `PETSTORE_METRICS_PORT` set, `@petstore/opentelemetry` records the
 * API's metrics into an OpenTelemetry meter provider whose reader is `@opentelemetry/exporter-prometheus`,
 * served at `/metrics` on that port (apart from the API's port; 0 picks a free one), on `PETSTORE_METRICS_HOST`
 * (default 127.0.0.1: the API's `HOST` does not apply, so `HOST=0.0.0.0` leaves the metrics on loopback).
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/observability.md
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A running metrics endpoint. */
export interface MetricsEndpoint {
  /** `http://<address>:<port>/metrics`: the address and port listened on. */
  url: string;
  /** Stops recording and the endpoint's server. */
  close(): Promise<void>;
}

/**
 * Starts recording and serves the metrics at `/metrics` on `port` of `host` (404 elsewhere). Rejects when the
 * port cannot be listened on (in use, say), having stopped recording.
 */
export async function startMetrics(port: number, host: string): Promise<MetricsEndpoint> {
  // Loaded only when asked for: a server without PETSTORE_METRICS_PORT starts without the OpenTelemetry SDK.
  const [{ PrometheusExporter }, { MeterProvider }, { instrumentPetstore }] = await Promise.all([
    import('@opentelemetry/exporter-prometheus'),
    import('@opentelemetry/sdk-metrics'),
    import('@petstore/opentelemetry'),
  ]);
  // The exporter's own server cannot tell the port it got for 0: the exporter answers on a server of ours.
  const exporter = new PrometheusExporter({ preventServerStart: true });
  const meterProvider = new MeterProvider({ readers: [exporter] });
  // No tracer provider in the examples: metrics only.
  const telemetry = instrumentPetstore({ meterProvider, spans: false });
  const server = createServer((request, response) => {
    if (new URL(request.url ?? '/', 'http://localhost').pathname === '/metrics') {
      exporter.getMetricsRequestHandler(request, response);
    } else {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('Not found: the metrics are at /metrics.\n');
    }
  });
  const close = async () => {
    telemetry.stop();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await meterProvider.shutdown();
  };
  server.listen(port, host);
  try {
    await once(server, 'listening');
  } catch (error) {
    telemetry.stop();
    await meterProvider.shutdown();
    throw new Error(`PETSTORE_METRICS_PORT: cannot listen on ${host}:${port}: ${(error as Error).message}`);
  }
  // The address listened on, as the server reports it (not as configured): what the start-up line shows.
  const { address, family, port: listening } = server.address() as AddressInfo;
  return { url: `http://${family === 'IPv6' ? `[${address}]` : address}:${listening}/metrics`, close };
}

/** A rejection handler that closes `api` (the storage opened before) and rethrows: start-up failed after it. */
export function closing(api: { close(): Promise<void> }): (error: unknown) => Promise<never> {
  return async (error) => {
    await api.close();
    throw error;
  };
}
