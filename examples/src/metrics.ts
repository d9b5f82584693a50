/**
 * The examples' Prometheus endpoint: with `PETSTORE_METRICS_PORT` set, `@petstore/opentelemetry` records the
 * API's metrics into an OpenTelemetry meter provider whose reader is `@opentelemetry/exporter-prometheus`,
 * served at `/metrics` on that port (apart from the API's port; 0 picks a free one), on `PETSTORE_METRICS_HOST`
 * (default 127.0.0.1: the API's `HOST` does not apply, so `HOST=0.0.0.0` leaves the metrics on loopback).
 * Series are named as OpenTelemetry's Prometheus rules say, with the unit (`http_server_request_duration_seconds`),
 * and `target_info` carries the resource: `service_name` from `OTEL_SERVICE_NAME` (default `petstore-example`) and
 * whatever `OTEL_RESOURCE_ATTRIBUTES` adds.
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
  const [{ diag }, { PrometheusExporter, PrometheusSerializer }, { MeterProvider }, resources, { instrumentPetstore }, { withPrometheusNames }] =
    await Promise.all([
      import('@opentelemetry/api'),
      import('@opentelemetry/exporter-prometheus'),
      import('@opentelemetry/sdk-metrics'),
      import('@opentelemetry/resources'),
      import('@petstore/opentelemetry'),
      import('./prometheus-names.js'),
    ]);
  // The exporter's own server cannot tell the port it got for 0, nor name series with their unit: it is only the
  // reader here, and the endpoint below serializes what it collects.
  const exporter = new PrometheusExporter({ preventServerStart: true });
  const serializer = new PrometheusSerializer();
  const meterProvider = new MeterProvider({ readers: [exporter], resource: metricsResource(resources) });
  // No tracer provider in the examples: metrics only.
  const telemetry = instrumentPetstore({ meterProvider, spans: false });
  const server = createServer((request, response) => {
    if (new URL(request.url ?? '/', 'http://localhost').pathname !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('Not found: the metrics are at /metrics.\n');
      return;
    }
    // Serialized before the head is written, so that any failure is a 500 (a failed scrape), never a rejection.
    exporter
      .collect()
      .then(({ resourceMetrics, errors }) => {
        if (errors.length > 0) diag.error('petstore metrics: collection errors', ...errors);
        const text = serializer.serialize(withPrometheusNames(resourceMetrics));
        response.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(text);
      })
      .catch((error: unknown) => {
        response.writeHead(500, { 'content-type': 'text/plain' }).end(`# failed to collect the metrics: ${String(error)}\n`);
      });
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

/** `service.name` when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` names the service. */
const DEFAULT_SERVICE_NAME = 'petstore-example';

/**
 * The meter provider's resource: the SDK's default (`telemetry.sdk.*`), `service.name` {@link DEFAULT_SERVICE_NAME}
 * instead of `unknown_service:<node>`, then `OTEL_RESOURCE_ATTRIBUTES` and `OTEL_SERVICE_NAME` over both (the
 * SDK's environment detector; an unparsable `OTEL_RESOURCE_ATTRIBUTES` is ignored whole, as the specification says).
 */
function metricsResource(resources: typeof import('@opentelemetry/resources')) {
  const { defaultResource, detectResources, envDetector, resourceFromAttributes } = resources;
  return defaultResource()
    .merge(resourceFromAttributes({ 'service.name': DEFAULT_SERVICE_NAME }))
    .merge(detectResources({ detectors: [envDetector] }));
}

/** A rejection handler that closes `api` (the storage opened before) and rethrows: start-up failed after it. */
export function closing(api: { close(): Promise<void> }): (error: unknown) => Promise<never> {
  return async (error) => {
    await api.close();
    throw error;
  };
}
