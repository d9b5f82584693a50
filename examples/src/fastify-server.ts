/** The categories API mounted on a Fastify 5 app, next to a route of the host's own. */
import { petstoreFastify, petstoreFrameworkErrors } from '@petstore/adapter-fastify';
import { petstoreCheckExpectation } from '@petstore/core/node';
import Fastify from 'fastify';
import { readConfig, serverTimeouts, startupBanner } from './config.js';
import { closing, startMetrics } from './metrics.js';
import { examplePetstore } from './petstore.js';
import { exitGracefullyOnSignals, readShutdownTimeoutMs, trackRequests } from './shutdown.js';
import { startOrExit } from './startup.js';

// A bad variable, an unreachable database or Redis, a port in use: one line on stderr, exit 1.
await startOrExit(async () => {
  const config = readConfig();
  const shutdownTimeoutMs = readShutdownTimeoutMs();
  const api = await examplePetstore(config);
  const metrics = config.metricsPort === undefined ? undefined : await startMetrics(config.metricsPort, config.metricsHost).catch(closing(api));
  // Fastify's requestTimeout defaults to none: the configured one, with the headers timeout, in Node's server.
  const timeouts = serverTimeouts(config);
  const app = Fastify({
    frameworkErrors: petstoreFrameworkErrors(api.petstore, { prefix: '/v1' }),
    requestTimeout: config.requestTimeoutMs,
    http: timeouts,
  });
  app.get('/health', async () => ({ status: 'ok' }));
  await app.register(petstoreFastify, { prefix: '/v1', petstore: api.petstore });
  // Requests under /v1 whose Expect is not 100-continue are answered by the API (417 with the Error body).
  app.server.on('checkExpectation', petstoreCheckExpectation({ prefix: '/v1' }));
  const requests = trackRequests(app.server);

  try {
    await app.listen({ port: config.port, host: config.host });
  } catch (error) {
    await metrics?.close();
    await api.close();
    throw error;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : config.port;
  console.log(startupBanner(config, `http://${config.host}:${port}`, 'Fastify', metrics?.url));

  // SIGTERM / SIGINT: stop listening, answer the requests in flight, then close Fastify (its onClose hooks) and
  // the storage, and exit 0.
  exitGracefullyOnSignals({
    timeoutMs: shutdownTimeoutMs,
    inFlight: requests.count,
    stop: async () => {
      await requests.close();
      await app.close();
      await metrics?.close();
      await api.close();
    },
  });
});
