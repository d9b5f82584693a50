/**
 * @petstore/opentelemetry — OpenTelemetry metrics and spans for the petstore categories API. One call,
 * {@link instrumentPetstore}, subscribes to the `node:diagnostics_channel` tracing channels `@petstore/core`
 * publishes (`petstore:request`, `petstore:store`) and records them through `@opentelemetry/api`, with the
 * host's meter and tracer providers (the global ones by default). Nothing else of the host is touched.
 *
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/observability.md
 * @packageDocumentation
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { subscribe, tracingChannel, unsubscribe } from 'node:diagnostics_channel';
import { performance } from 'node:perf_hooks';
import {
  SpanKind,
  SpanStatusCode,
  context as otelContext,
  metrics,
  trace,
  type Attributes,
  type Counter,
  type Histogram,
  type MeterProvider,
  type ObservableResult,
  type Span,
  type TracerProvider,
} from '@opentelemetry/api';
import {
  PETSTORE_API_KEY_WATCH_CHANNEL,
  PETSTORE_REQUEST_CHANNEL,
  PETSTORE_STORE_CHANNEL,
  type ApiKeyWatchState,
  type PetstoreApiKeyWatchMessage,
  type PetstoreRequestContext,
  type PetstoreStoreContext,
} from '@petstore/core';

/** The instrumentation scope's name: the meter and tracer are obtained under it. */
export const INSTRUMENTATION_NAME = '@petstore/opentelemetry';

/**
 * The bucket boundaries of `http.server.request.duration`, in seconds: the ones OpenTelemetry's HTTP semantic
 * conventions advise.
 * @see https://opentelemetry.io/docs/specs/semconv/http/http-metrics/#metric-httpserverrequestduration
 */
export const HTTP_SERVER_DURATION_BUCKETS_SECONDS: readonly number[] = Object.freeze([
  0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10,
]);

/**
 * The bucket boundaries of `petstore.store.operation.duration`, in seconds: the ones OpenTelemetry's database
 * semantic conventions advise for `db.client.operation.duration`.
 * @see https://opentelemetry.io/docs/specs/semconv/database/database-metrics/#metric-dbclientoperationduration
 */
export const STORE_OPERATION_DURATION_BUCKETS_SECONDS: readonly number[] = Object.freeze([0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10]);

/** Options of {@link instrumentPetstore}. */
export interface InstrumentPetstoreOptions {
  /** Where the metrics go. Default: the global meter provider (`metrics.getMeterProvider()` of `@opentelemetry/api`). */
  meterProvider?: MeterProvider;
  /** Where the spans go. Default: the global tracer provider (`trace.getTracerProvider()`). */
  tracerProvider?: TracerProvider;
  /**
   * Record spans: one per request (`petstore <operationId>`, a child of the span active when the request reached
   * the petstore — the host's HTTP server span under the OpenTelemetry Node SDK) and one per store call (a child
   * of its request's span). Default `true`; `false` records metrics only.
   */
  spans?: boolean;
  /**
   * The `url.scheme` attribute of `http.server.request.duration`: the scheme clients use to reach the API
   * (`https` behind a proxy that terminates TLS). The core's requests carry no scheme. Default `http`.
   */
  urlScheme?: string;
}

/** What {@link instrumentPetstore} started. */
export interface PetstoreTelemetry {
  /**
   * Stops recording: unsubscribes from the channels (once nothing else listens, the core builds no context
   * again). Requests under way when it is called are not recorded. Calling it again does nothing.
   */
  stop(): void;
}

// HTTP methods OpenTelemetry's conventions know by name; any other is reported as `_OTHER`.
const KNOWN_METHODS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE', 'QUERY']);

/** `http.request.method`: the method in its canonical (upper-case) form, `_OTHER` when not a known one. */
function methodAttribute(method: string): string {
  if (KNOWN_METHODS.has(method)) return method;
  const upper = method.toUpperCase();
  return KNOWN_METHODS.has(upper) ? upper : '_OTHER';
}

/** What the subscribers remember of one trace between its start and its end. */
interface Started {
  startMs: number;
  span: Span | undefined;
}

/**
 * Starts recording the petstore's requests and store calls as OpenTelemetry metrics (and spans, unless `spans:
 * false`), for every petstore of the process (each adapter, `petstore.fetch` and `petstoreNodeHandler`).
 *
 * Metrics (durations in seconds):
 * - `http.server.request.duration` (histogram, `s`): `http.request.method`, `http.route` (the route template,
 *   e.g. `/v1/categories`, absent when no operation matched), `http.response.status_code`, `url.scheme`,
 *   `error.type` (the status code, for a 5xx answer);
 * - `petstore.rate_limit.decisions` (counter, `{decision}`): `outcome` (`admitted`, `limited`, `banned`) and
 *   `plan` (`anonymous` for a caller without a valid key);
 * - `petstore.store.operation.duration` (histogram, `s`): `backend`, `operation`, `outcome` (`ok`, `error`);
 * - `petstore.auth.failures` (counter, `{failure}`): `reason` (`missing`, `malformed`, `unknown`, `revoked`,
 *   `expired`);
 * - `petstore.api_key.watch.connected` (gauge, `{connection}`): `backend`; 1 while managed API keys hear their store's
 *   changes (`watching`), 0 while the watch is starting or lost (`connecting`, `disconnected`: keys are then
 *   checked at the store). From the changes published on `petstore:api-key-watch` after this call, the last
 *   per backend; a manager that turns `unwatched` (closed) is no longer observed.
 *
 * Call it once, at start-up, after the OpenTelemetry SDK is set up (when using the global providers).
 * @see https://github.com/petstore/petstore-categories/blob/main/docs/observability.md#metrics
 */
export function instrumentPetstore(options: InstrumentPetstoreOptions = {}): PetstoreTelemetry {
  const meter = (options.meterProvider ?? metrics.getMeterProvider()).getMeter(INSTRUMENTATION_NAME);
  const tracer = options.spans === false ? undefined : (options.tracerProvider ?? trace.getTracerProvider()).getTracer(INSTRUMENTATION_NAME);
  const urlScheme = options.urlScheme ?? 'http';

  const requestDuration: Histogram = meter.createHistogram('http.server.request.duration', {
    description: 'Duration of HTTP server requests answered by the petstore API.',
    unit: 's',
    advice: { explicitBucketBoundaries: [...HTTP_SERVER_DURATION_BUCKETS_SECONDS] },
  });
  const decisions: Counter = meter.createCounter('petstore.rate_limit.decisions', {
    description: 'Rate-limit decisions, by outcome and plan.',
    unit: '{decision}',
  });
  const storeDuration: Histogram = meter.createHistogram('petstore.store.operation.duration', {
    description: 'Duration of the calls the petstore makes to its stores.',
    unit: 's',
    advice: { explicitBucketBoundaries: [...STORE_OPERATION_DURATION_BUCKETS_SECONDS] },
  });
  const authFailures: Counter = meter.createCounter('petstore.auth.failures', {
    description: 'Requests answered 401, by reason.',
    unit: '{failure}',
  });

  // The last watch state heard per backend; a state change is rare, so the gauge reads this map.
  const watchStates = new Map<string, ApiKeyWatchState>();
  const watchConnected = meter.createObservableGauge('petstore.api_key.watch.connected', {
    description: "Whether managed API keys hear their store's key changes: 1 while watching, 0 while the watch is starting or lost.",
    unit: '{connection}',
  });
  const observeWatch = (result: ObservableResult) => {
    for (const [backend, state] of watchStates) result.observe(state === 'watching' ? 1 : 0, { backend });
  };

  const requests = tracingChannel<unknown, PetstoreRequestContext>(PETSTORE_REQUEST_CHANNEL);
  const stores = tracingChannel<unknown, PetstoreStoreContext>(PETSTORE_STORE_CHANNEL);
  const started = new WeakMap<object, Started>();
  // The request a store call belongs to: the request channel runs the pipeline inside this store.
  const currentRequest = new AsyncLocalStorage<PetstoreRequestContext>();

  // A subscriber that throws would surface as an uncaught exception in the host: every handler is guarded.
  const guarded =
    <Context>(handler: (context: Context) => void) =>
    (context: Context): void => {
      try {
        handler(context);
      } catch {
        // recording must never disturb the request
      }
    };

  const requestHandlers = {
    start: guarded((request: PetstoreRequestContext) => {
      const span = tracer?.startSpan(
        `petstore ${request.operationId ?? request.method}`,
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            'http.request.method': methodAttribute(request.method),
            ...(request.route === undefined ? {} : { 'http.route': request.route }),
            ...(request.operationId === undefined ? {} : { 'petstore.operation_id': request.operationId }),
          },
        },
        otelContext.active(),
      );
      started.set(request, { startMs: performance.now(), span });
    }),
    end: () => undefined,
    asyncStart: () => undefined,
    asyncEnd: guarded((request: PetstoreRequestContext) => {
      const begun = started.get(request);
      if (begun === undefined) return;
      started.delete(request);
      const status = request.status;
      const attributes: Attributes = { 'http.request.method': methodAttribute(request.method), 'url.scheme': urlScheme };
      if (request.route !== undefined) attributes['http.route'] = request.route;
      if (status !== undefined) attributes['http.response.status_code'] = status;
      if (status === undefined || status >= 500) attributes['error.type'] = status === undefined ? '_OTHER' : String(status);
      requestDuration.record((performance.now() - begun.startMs) / 1000, attributes);
      if (request.rateLimitOutcome !== undefined) {
        decisions.add(1, { outcome: request.rateLimitOutcome, plan: request.plan ?? 'anonymous' });
      }
      if (request.authFailure !== undefined) authFailures.add(1, { reason: request.authFailure });
      const span = begun.span;
      if (span === undefined) return;
      const spanAttributes: Attributes = {};
      if (status !== undefined) spanAttributes['http.response.status_code'] = status;
      if (request.keyId !== undefined) spanAttributes['petstore.key_id'] = request.keyId;
      if (request.accountId !== undefined) spanAttributes['petstore.account_id'] = request.accountId;
      if (request.plan !== undefined) spanAttributes['petstore.plan'] = request.plan;
      if (request.rateLimitOutcome !== undefined) spanAttributes['petstore.rate_limit.outcome'] = request.rateLimitOutcome;
      if (request.cost !== undefined) spanAttributes['petstore.rate_limit.cost'] = request.cost;
      if (request.authFailure !== undefined) spanAttributes['petstore.auth.failure_reason'] = request.authFailure;
      span.setAttributes(spanAttributes);
      if (status === undefined || status >= 500) {
        span.setAttribute('error.type', attributes['error.type'] as string);
        span.setStatus({ code: SpanStatusCode.ERROR });
        if (request.error instanceof Error) span.recordException(request.error);
      }
      span.end();
    }),
    error: () => undefined,
  };

  const storeHandlers = {
    start: guarded((call: PetstoreStoreContext) => {
      let span: Span | undefined;
      if (tracer !== undefined) {
        const request = currentRequest.getStore();
        const parentSpan = request === undefined ? undefined : started.get(request)?.span;
        const parent = parentSpan === undefined ? otelContext.active() : trace.setSpan(otelContext.active(), parentSpan);
        const attributes: Attributes = { 'db.operation.name': call.operation, 'petstore.store.backend': call.backend };
        if (call.backend !== 'memory' && call.backend !== 'custom') attributes['db.system.name'] = call.backend;
        span = tracer.startSpan(`${call.operation} ${call.backend}`, { kind: SpanKind.CLIENT, attributes }, parent);
      }
      started.set(call, { startMs: performance.now(), span });
    }),
    end: () => undefined,
    asyncStart: () => undefined,
    asyncEnd: guarded((call: PetstoreStoreContext) => {
      const begun = started.get(call);
      if (begun === undefined) return;
      started.delete(call);
      const outcome = call.outcome ?? 'error';
      storeDuration.record((performance.now() - begun.startMs) / 1000, { backend: call.backend, operation: call.operation, outcome });
      const span = begun.span;
      if (span === undefined) return;
      if (outcome === 'error') {
        span.setStatus({ code: SpanStatusCode.ERROR });
        if (call.error instanceof Error) {
          span.setAttribute('error.type', call.error.name);
          span.recordException(call.error);
        } else {
          span.setAttribute('error.type', '_OTHER');
        }
      }
      span.end();
    }),
    error: () => undefined,
  };

  const watchHandler = guarded((message: unknown) => {
    const { backend, state } = message as PetstoreApiKeyWatchMessage;
    if (state === 'unwatched') watchStates.delete(backend);
    else watchStates.set(backend, state);
  });

  // Only spans need the request of a store call. An AsyncLocalStorage in use slows every promise of the process on
  // Node 20 and 22 (async hooks), so metrics alone do without (measured: BENCHMARKS.md, section Observability).
  if (tracer !== undefined) requests.start.bindStore(currentRequest);
  requests.subscribe(requestHandlers);
  stores.subscribe(storeHandlers);
  subscribe(PETSTORE_API_KEY_WATCH_CHANNEL, watchHandler);
  watchConnected.addCallback(observeWatch);
  let stopped = false;
  return {
    stop() {
      if (stopped) return;
      stopped = true;
      requests.unsubscribe(requestHandlers);
      stores.unsubscribe(storeHandlers);
      unsubscribe(PETSTORE_API_KEY_WATCH_CHANNEL, watchHandler);
      watchConnected.removeCallback(observeWatch);
      if (tracer !== undefined) {
        requests.start.unbindStore(currentRequest);
        // Turns its async hooks off again (on Node versions that use them).
        currentRequest.disable();
      }
    },
  };
}
