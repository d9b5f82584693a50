/**
 * Runs one benchmark server in its own process: `BENCH_SERVER=<name> [REDIS_URL=… [REDIS_KEY_PREFIX=…]]
 * [POSTGRES_URL=… POSTGRES_SCHEMA=…] [BENCH_KEYS=<count>]`. Prints `READY <port>`.
 */
import { SERVER_NAMES, benchKeys, startServer, type ServerName } from './servers.js';

const name = process.env['BENCH_SERVER'] as ServerName;
if (!SERVER_NAMES.includes(name)) throw new Error(`unknown BENCH_SERVER ${String(name)}`);
const { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: redisKeyPrefix, POSTGRES_URL: postgresUrl, POSTGRES_SCHEMA: postgresSchema } = process.env;
const server = await startServer(
  name,
  {
    ...(redisUrl === undefined ? {} : { redisUrl }),
    ...(redisKeyPrefix === undefined ? {} : { redisKeyPrefix }),
    ...(postgresUrl === undefined ? {} : { postgres: { url: postgresUrl, schema: postgresSchema ?? 'public' } }),
  },
  benchKeys(Number(process.env['BENCH_KEYS'] ?? 1)),
);
console.log(`READY ${server.port}`);
// The benchmark asks over IPC for the Redis command, PostgreSQL statement and record-store lookup counts and this
// process's CPU time (µs).
process.on('message', () => {
  const cpu = process.cpuUsage();
  process.send?.({ redisCommands: server.redisCommands(), postgresStatements: server.postgresStatements(), apiKeyLookups: server.apiKeyLookups(), cpuMicros: cpu.user + cpu.system });
});
process.once('SIGTERM', () => {
  server.close().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(`${name}: closing failed: ${error instanceof Error ? error.message : String(error)}`);
      process.exit(1);
    },
  );
});
