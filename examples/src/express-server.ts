/** The categories API mounted on an Express 5 app, next to a route of the host's own. */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { petstoreExpress } from '@petstore/adapter-express';
import { petstoreCheckExpectation } from '@petstore/core/node';
import express from 'express';
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
  const app = express();
  app.get('/health', (_request, response) => {
    response.json({ status: 'ok' });
  });
  app.use('/v1', petstoreExpress({ petstore: api.petstore }));

  // What app.listen does, with the headers and request timeouts of the configuration.
  const server = createServer(serverTimeouts(config), app);
  // Requests under /v1 whose Expect is not 100-continue are answered by the API (417 with the Error body).
  server.on('checkExpectation', petstoreCheckExpectation({ prefix: '/v1' }));
  const requests = trackRequests(server);
  server.listen(config.port, config.host);
  try {
    await once(server, 'listening');
  } catch (error) {
    await metrics?.close();
    await api.close();
    throw error;
  }
  const { port } = server.address() as AddressInfo;
  console.log(startupBanner(config, `http://${config.host}:${port}`, 'Express', metrics?.url));

  // SIGTERM / SIGINT: stop listening, answer the requests in flight, then close the storage and exit 0.
  exitGracefullyOnSignals({
    timeoutMs: shutdownTimeoutMs,
    inFlight: requests.count,
    stop: async () => {
      await requests.close();
      await metrics?.close();
      await api.close();
    },
  });
});
