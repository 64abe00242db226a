import type { Server } from 'bun';
import type { Registry } from 'prom-client';
import { errorFields, log } from '../log';
import { exposition } from './registry';

/**
 * A process's own HTTP listener for GET /metrics, without auth, like the API's: the worker's (it
 * serves nothing else), and each API process's of a group sharing one port (src/index.ts), whose
 * shared /metrics reaches one of them at random. Undefined when `port` is 0 (off) or the port is
 * taken: a second worker on the same host still runs its imports, without a /metrics of its own,
 * and says so.
 */
export function serveMetrics(
  registry: Registry,
  listen: { port: number; hostname: string },
): Server<undefined> | undefined {
  if (listen.port === 0) return undefined;
  try {
    return Bun.serve({
      port: listen.port,
      hostname: listen.hostname,
      async fetch(request) {
        const path = new URL(request.url).pathname;
        if (path !== '/metrics') return new Response('not found\n', { status: 404 });
        if (request.method !== 'GET' && request.method !== 'HEAD')
          return new Response('method not allowed\n', { status: 405, headers: { allow: 'GET, HEAD' } });
        return exposition(registry);
      },
      error(error) {
        log('error', 'metrics request failed', errorFields(error));
        return new Response('metrics unavailable\n', { status: 500 });
      },
    });
  } catch (e) {
    log('warn', 'metrics listener not started; this process serves no /metrics of its own', {
      port: listen.port,
      ...errorFields(e),
    });
    return undefined;
  }
}
