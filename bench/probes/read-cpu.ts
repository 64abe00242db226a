/**
 * Probe: the import's read phase as the worker's own CPU, without the database: the file decoded and
 * parsed (papaparse), every row read by the import's RowReader (trim, types, email, brands, md5, the
 * attributes' JSON) and written as its binary staging row (staging-binary.ts), the bytes then
 * dropped. What profile-read.ts's passes time together, here on one core alone, to run under Bun's
 * profiler:
 *
 *   bun --cpu-prof-md --cpu-prof-dir=/tmp/prof bench/probes/read-cpu.ts --file .data/bench/files/contacts-1000000-a.csv
 *
 * Prints the rows read and the seconds (bench/findings/2026-12-07-read-cpu-profile.md).
 */
import { parseArgs } from 'node:util';
import { BrandIndex, RowReader } from '../../worker/import/cells';
import { StagingBytes } from '../../worker/import/staging-binary';
import { BRANDS } from '../lib/dataset';
import { COLUMNS, parseRows } from '../steps/profile-read';

const { values } = parseArgs({ options: { file: { type: 'string' } } });
if (!values.file) throw new Error('usage: bun bench/probes/read-cpu.ts --file PATH');

const brands = new BrandIndex(BRANDS.map((name) => ({ id: crypto.randomUUID(), name })));
const reader = new RowReader(COLUMNS, brands, []);
// The COPY's segment size (copy-sink.ts): the bytes taken as the sink takes them, then dropped.
const bytes = new StagingBytes(80 * 1024);
const started = performance.now();
let good = 0;
const rows = await parseRows(values.file, (cells, rowNo) => {
  const row = reader.read(rowNo, cells);
  if (row === undefined) return;
  good++;
  bytes.row(row);
  if (bytes.length >= 64 * 1024) bytes.take();
});
const seconds = (performance.now() - started) / 1000;
console.log(`${rows.toLocaleString('en-US')} rows, ${good.toLocaleString('en-US')} staged, ${seconds.toFixed(2)} s`);
