import { Counter, Histogram, type Registry } from 'prom-client';
import { PREFIX } from './registry';

/** Methods the API serves; any other method a client sends is labelled `other`. */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/**
 * Request count and latency of the API by method, route and status. The route is the matched route
 * template (`/v1/contacts/:emailMd5`), `/uploads/:token`, `/metrics`, or `unmatched`: never the raw
 * path, which carries import ids and email hashes and would make a series per contact.
 */
export class HttpMetrics {
  private readonly requests: Counter<'method' | 'route' | 'status'>;
  private readonly duration: Histogram<'method' | 'route' | 'status'>;

  constructor(registry: Registry) {
    const labelNames = ['method', 'route', 'status'] as const;
    this.requests = new Counter({
      name: `${PREFIX}http_requests_total`,
      help: 'HTTP requests answered, by method, route template (or unmatched) and status code.',
      labelNames,
      registers: [registry],
    });
    this.duration = new Histogram({
      name: `${PREFIX}http_request_duration_seconds`,
      help:
        'Time from a request to its response (headers ready; a streamed body may take longer), ' +
        'by method, route template and status code.',
      labelNames,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
  }

  observe(method: string, route: string, status: number, seconds: number): void {
    const labels = { method: METHODS.has(method) ? method : 'other', route, status: String(status) };
    this.requests.inc(labels);
    this.duration.observe(labels, seconds);
  }
}
