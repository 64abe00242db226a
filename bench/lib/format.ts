/** Formatting shared by every step's log and table: progress lines, numbers, aligned tables. */

/** Where each progress update's fraction also goes (the run's clock, bench/lib/run-clock.ts); set by index.ts. */
let progressSink: ((fraction: number) => void) | undefined;
export function onProgress(sink: (fraction: number) => void): void {
  progressSink = sink;
}

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

  /** `stepFraction`: the step's progress when it is not this line's (an import's phases, import-flow.ts). */
  update(done: number, note = '', stepFraction?: number): void {
    progressSink?.(stepFraction ?? (this.total > 0 ? Math.min(1, done / this.total) : 0));
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

  done(note = '', stepFraction?: number): void {
    if (this.lastPct === 100 && !note) return;
    this.lastPct = -100;
    this.lastAt = 0;
    this.update(this.total, note, stepFraction);
  }
}

/** The middle value (the mean of the two middle ones for an even count). */
export function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export const fmtInt = (n: number) => Math.round(n).toLocaleString('en-US');
export const fix = (n: number | undefined, digits = 1) =>
  n === undefined || !Number.isFinite(n) ? '-' : n.toFixed(digits);

export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c]!.length)));
  const line = (cells: string[]) =>
    cells.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  ');
  return [line(head), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

/** `1M`, `25M`, `50k`, or the count as it is. */
export function sizeLabel(rows: number): string {
  if (rows % 1e6 === 0) return `${rows / 1e6}M`;
  return rows % 1e3 === 0 ? `${rows / 1e3}k` : rows.toLocaleString('en-US');
}
