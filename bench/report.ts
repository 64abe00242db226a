/**
 * Presentation: progress lines during long steps, the final table on stdout, and the JSON result
 * file with a description of the machine.
 */
import { cpus, totalmem } from 'node:os';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';

/** Prints `[label] 42% (n/total unit)` on stderr at every 5% step or every 5 s, whichever comes first. */
export class Progress {
  private lastPct = -1;
  private lastAt = 0;
  private readonly started = performance.now();
  constructor(
    private readonly label: string,
    private readonly total: number,
    private readonly unit: string,
  ) {}

  update(done: number, note = ''): void {
    const pct = this.total > 0 ? Math.floor((done / this.total) * 100) : 0;
    const now = performance.now();
    if (pct < this.lastPct + 5 && now - this.lastAt < 5000) return;
    this.lastPct = pct;
    this.lastAt = now;
    const secs = ((now - this.started) / 1000).toFixed(1);
    console.error(
      `[${this.label}] ${pct}% (${fmtInt(done)}/${fmtInt(this.total)} ${this.unit}, ${secs}s)${note ? ` ${note}` : ''}`,
    );
  }

  done(note = ''): void {
    if (this.lastPct === 100 && !note) return;
    this.lastPct = -100;
    this.lastAt = 0;
    this.update(this.total, note);
  }
}

export const fmtInt = (n: number) => Math.round(n).toLocaleString('en-US');
const fix = (n: number | undefined, digits = 1) => (n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(digits));

export interface LoadRow {
  step: string;
  seconds: number;
  rows: number;
  bytes: number;
  /** seconds of this step over seconds of L1 */
  ratioToL1?: number;
  target?: number;
  workerPeakRssMb?: number;
}

export interface HttpRow {
  scenario: string;
  target: 'api' | 'baseline';
  reqPerSec: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  /** API req/s over baseline req/s */
  ratio?: number;
  minRatio?: number;
}

function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c]!.length)));
  const line = (cells: string[]) =>
    cells.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

export function loadTable(rows: LoadRow[]): string {
  return table(
    ['step', 'rows', 'seconds', 'rows/s', 'MB/s', 'x L1', 'target', 'worker peak RSS MB'],
    rows.map((r) => [
      r.step,
      fmtInt(r.rows),
      fix(r.seconds, 2),
      fmtInt(r.rows / r.seconds),
      fix(r.bytes / 1e6 / r.seconds, 1),
      fix(r.ratioToL1, 2),
      r.target === undefined ? '-' : `<= ${r.target}`,
      fix(r.workerPeakRssMb, 0),
    ]),
  );
}

export function httpTable(rows: HttpRow[]): string {
  return table(
    ['request', 'server', 'req/s', 'p50 ms', 'p99 ms', 'non-2xx', 'errors', 'x baseline', 'target'],
    rows.map((r) => [
      r.scenario,
      r.target,
      fmtInt(r.reqPerSec),
      fix(r.p50, 1),
      fix(r.p99, 1),
      String(r.non2xx),
      String(r.errors),
      fix(r.ratio, 2),
      r.minRatio === undefined ? '-' : `>= ${r.minRatio}`,
    ]),
  );
}

export async function describeMachine(pgVersion: string) {
  const cpu = cpus();
  return {
    cpuModel: cpu[0]?.model ?? 'unknown',
    cores: cpu.length,
    memoryGb: Number((totalmem() / 1024 ** 3).toFixed(1)),
    postgres: pgVersion,
    bun: Bun.version,
    platform: `${process.platform} ${process.arch}`,
  };
}

export async function writeResults(dir: string, result: object): Promise<string> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, `${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  await Bun.write(path, `${JSON.stringify(result, null, 2)}\n`);
  return path;
}
