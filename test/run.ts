/**
 * The whole test suite: starts (or reuses) PostgreSQL and Redis through the same mechanism as
 * `start`, builds the migrated template database, runs `bun test` with their URLs, and stops what it
 * started. Extra arguments go to `bun test` (a file name, `-t pattern`).
 */
import { startTestServices, testServicesEnv } from './helpers/services';

const services = await startTestServices((m) => console.error(m));
let code = 1;
try {
  const proc = Bun.spawn([process.execPath, 'test', '--timeout', '120000', ...process.argv.slice(2)], {
    stdio: ['inherit', 'inherit', 'inherit'],
    env: { ...process.env, ...testServicesEnv(services) },
  });
  code = await proc.exited;
} finally {
  await services.stop();
}
process.exit(code);
