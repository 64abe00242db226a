import { Counter, Histogram, type Registry } from 'prom-client';
import { PREFIX } from './registry';

/*
 * What the worker's import runs did, counted where the pipeline knows it (worker/import/). Module
 * singletons in no registry: the pipeline code has no handle on the process's registry, and a
 * process registers them in its own (registerImportPipelineMetrics). Counts are of work done by
 * this process: a read that starts over (a killed worker's import resumed, a lost staging table)
 * counts its rows again; a merge batch counts once, when it commits.
 */

export const importRowsRead = new Counter({
  name: `${PREFIX}import_rows_read_total`,
  help: 'CSV data rows the import read phase parsed (valid and malformed; the header and blank lines are not rows).',
  registers: [],
});

export const importRowsMerged = new Counter({
  name: `${PREFIX}import_rows_merged_total`,
  help: 'Deduplicated import rows applied to contacts by committed merge batches, by outcome: added, updated, skipped.',
  labelNames: ['outcome'],
  registers: [],
});

export const importPhaseDuration = new Histogram({
  name: `${PREFIX}import_phase_duration_seconds`,
  help:
    'Time an import phase took, by phase (read, dedupe, resume: the check before a merge taken up again, merge, ' +
    'finish); phases that ended with an error are not observed.',
  labelNames: ['phase'],
  buckets: [0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200],
  registers: [],
});

export const importsFinished = new Counter({
  name: `${PREFIX}imports_finished_total`,
  help:
    'Contact imports this worker brought to a final status: success, or failed (a file that cannot import, ' +
    'retries used up, or no file uploaded within 24 hours).',
  labelNames: ['status'],
  registers: [],
});

export const importMergeRest = new Counter({
  name: `${PREFIX}import_merge_rest_seconds_total`,
  help:
    'Seconds committed merge batches rested between their pieces while the API was busy (IMPORT_YIELD_RPS, ' +
    'IMPORT_PACE): how much the API slowed the imports down.',
  registers: [],
});

export const importReadRest = new Counter({
  name: `${PREFIX}import_read_rest_seconds_total`,
  help:
    'Seconds finished reads rested between their pieces while the API was busy (IMPORT_YIELD_RPS, IMPORT_PACE), ' +
    'counted when the read commits.',
  registers: [],
});

export const importDedupeRest = new Counter({
  name: `${PREFIX}import_dedupe_rest_seconds_total`,
  help:
    'Seconds finished dedupes rested between their statements while the API was busy (IMPORT_YIELD_RPS, ' +
    'IMPORT_PACE), counted when the dedupe commits.',
  registers: [],
});

/** Counts the merged rows of one committed batch. */
export function countMerged(counts: { added: number; updated: number; skipped: number }): void {
  importRowsMerged.inc({ outcome: 'added' }, counts.added);
  importRowsMerged.inc({ outcome: 'updated' }, counts.updated);
  importRowsMerged.inc({ outcome: 'skipped' }, counts.skipped);
}

export function registerImportPipelineMetrics(registry: Registry): void {
  registry.registerMetric(importRowsRead);
  registry.registerMetric(importRowsMerged);
  registry.registerMetric(importPhaseDuration);
  registry.registerMetric(importsFinished);
  registry.registerMetric(importMergeRest);
  registry.registerMetric(importReadRest);
  registry.registerMetric(importDedupeRest);
  // Every label value present from the start, so rate() sees the first increment.
  for (const outcome of ['added', 'updated', 'skipped']) importRowsMerged.inc({ outcome }, 0);
  for (const status of ['success', 'failed']) importsFinished.inc({ status }, 0);
}
