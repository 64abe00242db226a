/**
 * The records every step and the report share: a target's verdict, a row of the load and HTTP
 * tables, a server under load. A leaf: it imports nothing of the bench, so a step can use these
 * without importing the report that prints the step's own results.
 */

export interface Target {
  name: string;
  value: string;
  target: string;
  pass: boolean;
  /** false: shown without a verdict on its figure (too few samples); `pass` then only covers the rest */
  judged?: boolean;
}

export interface LoadRow {
  step: string;
  seconds: number;
  rows: number;
  bytes: number;
  /** seconds of this step over seconds of L1 */
  ratioToL1?: number;
  target?: number;
  /** seconds of this step over seconds of the dba step's statement for the same file */
  ratioToDba?: number;
  dbaTarget?: number;
  /** seconds of this step over seconds of the pgloader step for the same file (bench/steps/pgloader.ts) */
  ratioToPgloader?: number;
  workerPeakRssMb?: number;
}

export interface HttpRow {
  scenario: string;
  target: HttpTarget['name'];
  reqPerSec: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  /** API req/s over baseline req/s */
  ratio?: number;
  minRatio?: number;
  /** CPU milliseconds per 2xx answer, by process (with the HTTP step's `sampleCpu`) */
  cpuMsPerRequest?: Record<string, number>;
  /** req/s of each measured round (bench/steps/http.ts runHttp), of which reqPerSec is the median */
  rounds?: number[];
}

export interface HttpTarget {
  /**
   * `api-no-limits`: the same API with RATE_LIMITS=false, what the limits cost measured in the same
   * run; `api-on-worker-1` …: on a Citus cluster, an API connected to that worker (bench/steps/citus.ts).
   */
  name: 'api' | 'api-no-limits' | 'baseline' | `api-on-${string}` | `${'api' | 'baseline'}-${number}p`;
  baseUrl: string;
  /**
   * The bare server whose req/s this one's ratio is over ('baseline' unless given): `api-2p` (the
   * API with API_PROCESSES=2) is held against `baseline-2p` (bench/lib/process-groups.ts).
   */
  against?: HttpTarget['name'];
  headers: Record<string, string>;
}
export interface PoolContact {
  md5: string;
  email: string;
}
