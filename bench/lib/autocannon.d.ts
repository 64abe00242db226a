// The slice of autocannon's programmatic API the HTTP step uses (the package ships no types).
declare module 'autocannon' {
  export interface Histogram {
    average: number;
    p50: number;
    p99: number;
    max: number;
  }
  export interface RawRequest {
    method?: string;
    path?: string;
    headers?: Record<string, string>;
    body?: string;
  }
  export interface Options {
    url: string;
    connections?: number;
    duration?: number;
    headers?: Record<string, string>;
    requests?: { method?: string; setupRequest?: (req: RawRequest) => RawRequest }[];
  }
  export interface Result {
    requests: Histogram & { total: number };
    latency: Histogram;
    duration: number;
    errors: number;
    timeouts: number;
    non2xx: number;
    '2xx': number;
    statusCodeStats: Record<string, { count: number }>;
  }
  /** A running load: resolves with its result once it ends (its duration, or stop() at its next 1 s tick). */
  export interface Instance extends PromiseLike<Result> {
    /** each answer: its status and the ms since its request was sent */
    on(
      event: 'response',
      fn: (client: unknown, statusCode: number, resBytes: number, responseTime: number) => void,
    ): this;
    /** a connection error or a timeout */
    on(event: 'reqError', fn: (error: Error) => void): this;
    stop(): void;
  }
  function autocannon(opts: Options): Instance;
  export default autocannon;
}
