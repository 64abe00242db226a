/**
 * The report of one run as one HTML file that needs nothing else: the charts are inline SVG, the
 * style is inline, and nothing is fetched (no script, no font, no CDN), so the file opens the same
 * from a laptop, a CI artifact or a mail. Sections in the order of the text report: the imports
 * against their peers, each import over time, the load steps, the HTTP step, the targets.
 */
import { esc } from './svg';
import type { ResultData } from './model';
import { peerSection } from './peers';
import { importSection } from './import-timeline';
import { loadSection } from './load-windows';
import { httpSection } from './http';
import { targetsSection } from './targets';

const STYLE = `
body{font:14px/1.4 system-ui,sans-serif;margin:24px auto;max-width:900px;color:#222}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.meta{color:#555;margin:0}.error{color:#b00020}
figure.chart{margin:12px 0 20px}figcaption{font-weight:600;margin-bottom:4px}
.note,.absent{color:#666;font-size:12px;margin:2px 0}
svg{display:block;max-width:100%;height:auto}
svg text{font:11px system-ui,sans-serif;fill:#333}svg .title{fill:#555}
.grid{stroke:#eee}.axis{stroke:#999}
.rate{stroke:#4e79a7;stroke-width:2.5}.phase{fill:#f4f4f4;stroke:#fff}.phase-name{fill:#888}
.idle-band{fill:#59a14f;opacity:.25}.idle-ref{stroke:#59a14f;stroke-width:1.5}
.limit{stroke:#e15759;stroke-dasharray:6 4}
.series{fill:none;stroke-width:1.5}.series.p99{stroke:#e15759}circle.p99{fill:#e15759}
.series.p50{stroke:#4e79a7}circle.p50{fill:#4e79a7;stroke:none}
.legend{font-size:12px;color:#444;margin:2px 0}.legend span{margin-right:14px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
table{border-collapse:collapse;font-size:12px;margin-top:6px}
th,td{padding:2px 8px;border-bottom:1px solid #eee;text-align:left}
.verdict{font-weight:700}.pass .verdict{color:#2e7d32}.miss .verdict{color:#c62828}.skip .verdict{color:#888}
`;

/** A section, or a line saying the run did not have it. */
function section(title: string, body: string, absent: string): string {
  return `<section><h2>${esc(title)}</h2>${body || `<p class="absent">${esc(absent)}</p>`}</section>`;
}

export function renderReport(r: ResultData): string {
  const steps = r.options?.steps ?? [];
  const run = r.runId ?? 'unknown run';
  const machine = r.machine
    ? Object.entries(r.machine)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')
    : 'machine not recorded';
  const outcome = r.error
    ? `<p class="meta error">The run failed: ${esc(r.error)}</p>`
    : `<p class="meta">verification: ${esc(r.verification ?? 'not recorded')}</p>`;
  return [
    '<!doctype html><html lang="en"><head><meta charset="utf-8">',
    `<title>bench ${esc(run)}</title><style>${STYLE}</style></head><body>`,
    `<h1>Benchmark ${esc(run)}: ${(r.rows ?? 0).toLocaleString('en-US')} rows</h1>`,
    `<p class="meta">steps ${esc(steps.join(', ') || 'not recorded')}; ${esc(machine)}</p>`,
    outcome,
    section('Imports against their peers', peerSection(r), 'No import, L1 or dba step in this run.'),
    section('Each import over time', importSection(r), 'No import A or B in this run.'),
    section(
      'Another account’s latency during an import or an export, per 10 s window',
      loadSection(r),
      'Neither the mixed nor the export step in this run.',
    ),
    section('HTTP step against the bare server', httpSection(r), 'No HTTP step in this run.'),
    section('Targets', targetsSection(r), ''),
    '</body></html>\n',
  ].join('\n');
}
