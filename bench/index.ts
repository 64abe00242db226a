/**
 * `bun run bench [-- --rows N] [--duration S] [--connections C] [--strict] [--lean]
 *   [--steps l1,dba,pgloader,a,b,search,http,export,mixed,events,suppression-check,profile,gzip,report,fair,small]
 *   [--shapes wide,narrow] [--search-runs N]
 *   [--flat-rows N] [--no-flat] [--citus] [--citus-workers N] [--mixed-rate N] [--mixed-closed]
 *   [--mixed-shape wide|narrow]`
 * Brings up the service (embedded defaults or configured URLs), generates the CSV files, runs
 * L1, the dba step, the pgloader step, import A and import B for each file shape
 * (steps/shape-steps.ts; above 1M rows the dba step and the imports also on the shapes' 1M files,
 * steps/flat.ts), when asked for the search step after each shape's import B
 * (steps/search.ts), then the HTTP load (and, when asked for, profile, gzip, report and
 * fair) on the wide shape, the mixed step and, when asked for, the events step (steps/events.ts) and
 * the suppression-check step (steps/suppression-check.ts), verifies
 * each after timing, prints the tables and writes bench/results/<timestamp>.json. With --citus, import A,
 * the HTTP step and the small imports (steps/small-import.ts) run again on the embedded Citus cluster after
 * that, and a table sets the two side by side with what each node's CPU did per row and per request.
 * Exit 1 when a run or a verification fails (and with --strict when a target is missed).
 * Beside the JSON, bench/results/<timestamp>.html draws the run (bench/report/page.ts);
 * `bun run bench report <result.json> …` draws it again from a JSON.
 */
import { join } from 'node:path';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { abandonOpenBenchImports, createBenchAccount, dropAccountContacts } from './lib/account';
import { checkDiskSpace, walOnDisk } from './lib/disk';
import { RunFiles, type Keep } from './lib/files';
import { fairLine, fairTargets, runFair, type FairRun } from './steps/fair';
import { FLAT_ROWS, flatRows, flatTable, flatTargets } from './steps/flat';
import { onProgress, sizeLabel } from './lib/format';
import { generateCsv, generateInChild } from './lib/generate';
import { gzipFile, runGzipImport, type GzipRun } from './steps/gzip-import';
import { type HttpOptions } from './steps/http';
import { eventsTable, eventsTargets, runEvents, type EventsRun } from './steps/events';
import { exportTable, exportTargets, runExportStep, type ExportRun } from './steps/export';
import { runSearchStep, SEARCH_RUNS, searchTable, searchTargets, type SearchRun } from './steps/search';
import { runMixed, type MixedRun } from './steps/mixed';
import {
  runSuppressionCheck,
  suppressionCheckTable,
  suppressionCheckTargets,
  type SuppressionCheckRun,
} from './steps/suppression-check';
import { profileRead, readProfileLine } from './steps/profile-read';
import {
  describeMachine,
  gzipLine,
  httpTable,
  loadTable,
  mixedTable,
  reportCostTable,
  sideBySide,
  smallLine,
  cpuTable,
  clusterCpuTargets,
  writeResults,
} from './lib/report';
import type { HttpRow, LoadRow, Target } from './lib/types';
import { cleanFile, runReportCost, type ReportCostFile } from './steps/report-cost';
import { runSmall, smallTargets } from './steps/small-import';
import {
  diskPlan,
  narrowAPath,
  otherStepsReadNarrowA,
  otherStepsReadWideA,
  shapePaths,
  type FilePaths,
} from './lib/run-plan';
import { childFailures, once, startInfra, startService, stopLiveChildren, type Infra } from './lib/services';
import { copySteps, importSteps, loadRows, type ShapeRun } from './steps/shape-steps';
import { SHAPE_NAMES, SHAPES, type ShapeName } from './lib/shapes';
import { cpuTargets, evaluateTargets, mixedTargets, phaseTable, reportCostTargets } from './lib/summary';
import { runOnCitus, type DatabaseRun } from './steps/citus';
import { cpuSampler, httpStep } from './steps/import-and-http';
import { contactStorage } from './lib/storage';
import { reportCommand } from './report/command';
import { startRunClock, stepProgress, stepStarts, timePlan } from './lib/run-clock';

/**
 * Only when asked for: `profile` (the read phase's components, one pass each over file A), `gzip`
 * (import A again from file A gzip-compressed, into a fresh account: as long as import A again, plus
 * compressing the file the first time, and disk for a second set of A's contacts) and `report` (what
 * the rejected-rows report costs: file A and a clean file imported 24 times each, report off, on,
 * on, off, then on, off, off, on, three times: as long as 48 imports of A, and disk for the clean
 * file and one more set of contacts)
 * and `fair` (file A into a fresh account alone, then while 20 other accounts each import 10 rows
 * 10 s into it, then alone again: as long as three imports of A, and disk for three more sets).
 * Each of them reads the wide file A, whatever `--shapes` says.
 */
const STEPS = [
  'l1',
  'dba',
  'pgloader',
  'a',
  'b',
  'search',
  'http',
  'export',
  'mixed',
  'events',
  'suppression-check',
  'profile',
  'gzip',
  'report',
  'fair',
  'small',
] as const;
// Not `events`: at the default 25M rows it would add 45-50 minutes to a run of about three hours. Nor
// `suppression-check`: its three lists of 10M records take ~7 GB and 200 s to load. Nor `search`
// (issue 56): 50 rounds of every filter's count, which may take seconds each at 25M rows.
const DEFAULT_STEPS: Step[] = ['l1', 'dba', 'pgloader', 'a', 'b', 'http', 'mixed'];
type Step = (typeof STEPS)[number];

function parseArgs(argv: string[]) {
  const opts = {
    rows: 25_000_000,
    duration: 10,
    warmup: 2,
    /** measured runs of each HTTP scenario against each server (bench/steps/http.ts) */
    httpRounds: 3,
    connections: 64,
    samples: 200,
    pollMs: 1000,
    steps: DEFAULT_STEPS,
    /** the file shapes of steps l1, dba, a and b (bench/lib/shapes.ts) */
    shapes: [...SHAPE_NAMES] as ShapeName[],
    /** the dba step and the imports on each shape's files of this many rows too, when the run has more (flat.ts) */
    flatRows: FLAT_ROWS,
    strict: false,
    /** delete each generated file after its read even when the disk could keep it (bench/lib/files.ts) */
    lean: false,
    /** Citus workers of the cluster side (0: no cluster side) */
    citusWorkers: 0,
    /** rounds of the search step's requests (steps/search.ts) */
    searchRuns: SEARCH_RUNS,
    /** the mixed step's open-loop req/s in all (steps/mixed.ts); 0: half of what the API served idle */
    mixedRate: 0,
    /** the mixed step's earlier form: a closed loop of 32 connections through every span */
    mixedClosed: false,
    /**
     * The shape of the file A the mixed step imports under the load. The narrow one by default: the
     * same 25M contacts through the same phases, in half the time (its import A alone 250 s against
     * the wide one's 447 s at 25M, bench/findings/2026-12-07-default-run-25m.md), where the step on
     * the wide file took 24 of the default run's 148 minutes. A run of the wide shape alone
     * (`--shapes wide`) takes its file, judged against its own import A.
     */
    mixedShape: 'narrow' as ShapeName,
    /**
     * The HTTP step also measures the API and the bare server as this many processes on one port
     * (1: not). Not by default: on the 2-core machines a second process added no throughput and cost
     * 15-40 % more CPU per request (bench/findings/2026-12-06-api-processes-and-cold-cluster.md),
     * and the pair took 4 of the default 1M run's 12 minutes.
     */
    apiProcesses: 1,
    /**
     * The HTTP step also measures the API without rate limits (what the limits cost). Not by default:
     * a third server is a third of the step, 1:50 of the default 1M run's budget of 12 minutes.
     */
    httpNoLimits: false,
  };
  let mixedShapeSet = false;
  for (let k = 0; k < argv.length; k++) {
    const flag = argv[k]!;
    const value = () => {
      const v = argv[++k];
      if (v === undefined) throw new Error(`${flag} needs a value`);
      return v;
    };
    const num = (min: number) => {
      const n = Number(value().replaceAll('_', ''));
      if (!Number.isInteger(n) || n < min) throw new Error(`${flag} must be an integer >= ${min}`);
      return n;
    };
    const list = <T extends string>(allowed: readonly T[]): T[] => {
      const items = value()
        .split(',')
        .map((s) => s.trim()) as T[];
      const bad = items.find((s) => !allowed.includes(s));
      if (bad !== undefined) throw new Error(`${flag} takes ${allowed.join(',')}; got "${bad}"`);
      return items;
    };
    if (flag === '--rows') opts.rows = num(1000);
    else if (flag === '--duration') opts.duration = num(1);
    else if (flag === '--warmup') opts.warmup = num(0);
    else if (flag === '--http-rounds') opts.httpRounds = num(1);
    else if (flag === '--connections') opts.connections = num(1);
    else if (flag === '--samples') opts.samples = num(1);
    else if (flag === '--poll-ms') opts.pollMs = num(100);
    else if (flag === '--strict') opts.strict = true;
    else if (flag === '--lean') opts.lean = true;
    else if (flag === '--no-flat') opts.flatRows = 0;
    else if (flag === '--flat-rows') opts.flatRows = num(1000);
    else if (flag === '--citus') opts.citusWorkers ||= 2;
    else if (flag === '--citus-workers') opts.citusWorkers = num(1);
    else if (flag === '--search-runs') opts.searchRuns = num(1);
    else if (flag === '--mixed-rate') opts.mixedRate = num(3);
    else if (flag === '--mixed-closed') opts.mixedClosed = true;
    else if (flag === '--mixed-shape') {
      const [shape, ...more] = list(SHAPE_NAMES);
      if (more.length) throw new Error(`${flag} takes one shape; got ${[shape, ...more].join(',')}`);
      opts.mixedShape = shape!;
      mixedShapeSet = true;
    } else if (flag === '--api-processes') opts.apiProcesses = num(1);
    else if (flag === '--http-no-limits') opts.httpNoLimits = true;
    else if (flag === '--steps') opts.steps = list(STEPS);
    else if (flag === '--shapes') opts.shapes = list(SHAPE_NAMES);
    else if (flag === '--help' || flag === '-h') {
      console.error(
        'usage: bun run bench [-- --rows N] [--duration S] [--warmup S] [--http-rounds R] [--connections C] ' +
          `[--samples K] [--poll-ms MS] [--steps ${STEPS.join(',')}] [--shapes ${SHAPE_NAMES.join(',')}] ` +
          '[--flat-rows N] [--no-flat] [--strict] [--lean] [--citus] [--citus-workers N] [--search-runs N] ' +
          `[--mixed-rate N] [--mixed-closed] [--mixed-shape ${SHAPE_NAMES.join('|')}] [--api-processes N] ` +
          '[--http-no-limits]',
      );
      process.exit(2);
    } else throw new Error(`unknown flag ${flag} (see --help)`);
  }
  if (!mixedShapeSet && opts.shapes.length === 1) opts.mixedShape = opts.shapes[0]!;
  if (opts.steps.includes('b') && !opts.steps.includes('a'))
    throw new Error('step b updates the contacts of step a: add a');
  if (opts.steps.includes('search') && !(opts.steps.includes('a') && opts.steps.includes('b')))
    throw new Error('step search reads the contacts of imports A and B of each shape: add a,b');
  if (opts.steps.includes('export') && !(opts.steps.includes('a') && opts.shapes.includes('wide')))
    throw new Error("step export exports the contacts of step a's wide shape: add a (and the wide shape)");
  if (opts.mixedRate && opts.mixedClosed)
    throw new Error('--mixed-rate sets the open loop that --mixed-closed leaves out');
  if (opts.citusWorkers && !['a', 'http', 'small'].some((s) => opts.steps.includes(s as Step)))
    throw new Error('--citus runs steps a, http and small on the cluster: add one of them to --steps');
  return opts;
}

const log = (m: string) => console.error(m);

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  const runId = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
  const has = (s: Step) => opts.steps.includes(s);
  log(
    `[bench] run ${runId}: ${opts.rows.toLocaleString('en-US')} rows, steps ${opts.steps.join(',')}, ` +
      `shapes ${opts.shapes.join(',')}`,
  );
  const infra: Infra = await startInfra(log);
  // With --citus the single node is stopped (its database dropped) before the cluster starts.
  const stopInfra = once(() => infra.stop({ drop: opts.citusWorkers > 0 }));
  onStop(stopInfra);
  const result: Record<string, unknown> = { runId, rows: opts.rows, options: opts };
  try {
    const [{ server_version: pg } = { server_version: '?' }] = await infra.sql<
      { server_version: string }[]
    >`show server_version`;
    result.machine = await describeMachine(pg);
    const dir = join(infra.config.dataDir, 'files');
    await mkdir(dir, { recursive: true });
    const paths = shapePaths(opts, dir);
    const widePath = join(dir, SHAPES.wide.fileName(opts.rows, 0));
    const wideAPath = paths.some((p) => p.shape === 'wide') || otherStepsReadWideA(opts) ? widePath : undefined;
    // Only the embedded cluster keeps its data (and the uploaded objects) in the data directory.
    let disk: { lean: boolean; keep: Keep } = { lean: opts.lean, keep: opts.lean ? 'none' : 'all' };
    if (!infra.config.databaseUrl) {
      const dataDir = infra.config.dataDir;
      const narrowA = otherStepsReadNarrowA(opts) ? narrowAPath(opts, dir) : undefined;
      const plan = diskPlan(opts, paths, wideAPath, dataDir, await walOnDisk(dataDir), narrowA);
      disk = await checkDiskSpace(plan, log, { lean: opts.lean });
    }
    // The API and the bare server; with --http-no-limits the API without limits; with --api-processes
    // N > 1 the N-process API and bare server too (lib/process-groups.ts).
    const httpServers = 2 + (opts.httpNoLimits ? 1 : 0) + (opts.apiProcesses > 1 ? 2 : 0);
    const cached = (path: string) => existsSync(path) && existsSync(`${path}.meta.json`);
    const plan = timePlan({ ...opts, httpServers }, paths, cached);
    const runClock = startRunClock(plan, log);
    onStop(async () => runClock.stop());
    onProgress(stepProgress);
    if (plan[0]?.name === 'generate') stepStarts('generate');
    // A shape's files A and B at once, each in a process of its own (generateInChild).
    const generate = async (shape: ShapeName, p: FilePaths, rows: number) => {
      const [a, b] = await Promise.all([
        generateInChild(p.a, rows, 0, log, shape),
        p.b ? generateInChild(p.b, rows, 1, log, shape) : undefined,
      ]);
      return { a, b };
    };
    const runs: ShapeRun[] = [];
    for (const p of paths)
      runs.push({
        shape: p.shape,
        files: await generate(p.shape, p, opts.rows),
        flat: p.flat && { files: await generate(p.shape, p.flat, opts.flatRows) },
      });
    const wideRun = runs.find((r) => r.shape === 'wide');
    // The tables show the wide shape first, the bench's file since its start.
    const shown = SHAPE_NAMES.flatMap((name) => runs.filter((r) => r.shape === name));
    const wideA = wideRun?.files.a ?? (wideAPath ? await generateCsv(wideAPath, opts.rows, 0, log) : undefined);
    const fileA = () => {
      if (!wideA) throw new Error('no wide file A was generated for this step');
      return wideA;
    };
    // The events step and by default the mixed step read the narrow file A, the narrow shape's when it runs.
    const narrowRun = runs.find((r) => r.shape === 'narrow');
    const narrowA = !otherStepsReadNarrowA(opts)
      ? undefined
      : (narrowRun?.files.a ?? (await generateCsv(narrowAPath(opts, dir), opts.rows, 0, log, 'narrow')));
    const eventsFile = has('events') ? narrowA : undefined;
    const fileGz = has('gzip') ? await gzipFile(fileA(), log) : undefined;
    const fileClean = has('report') ? await cleanFile(fileA(), log) : undefined;
    const shapeFiles = runs.map((r) => ({ shape: r.shape, ...r.files, flat: r.flat?.files }));
    const kept = disk.keep === 'all' || disk.keep === 'none' ? disk.keep : [...disk.keep];
    result.files = { shapes: shapeFiles, wideA, gzip: fileGz, clean: fileClean, lean: disk.lean, kept };
    const generated = [
      ...runs.flatMap((r) => [r.files, ...(r.flat ? [r.flat.files] : [])]).flatMap((f) => (f.b ? [f.a, f.b] : [f.a])),
      ...(wideA && !wideRun ? [wideA] : []),
      ...(narrowA && !narrowRun ? [narrowA] : []),
    ];
    const runFiles = new RunFiles(disk.keep, generated, log);
    result.shapes = runs;

    const copied = { l1: has('l1'), dba: has('dba'), pgloader: has('pgloader') };
    for (const run of runs) await copySteps(infra, runId, run, copied, runFiles, log);
    let profile: Awaited<ReturnType<typeof profileRead>> | undefined;
    if (has('profile')) {
      await runFiles.ready(fileA());
      result.readProfile = profile = await profileRead(infra.sql, fileA().path, log);
      await runFiles.read(fileA());
    }

    if (infra.config.databaseUrl) {
      const abandoned = await abandonOpenBenchImports(infra.sql);
      if (abandoned) log(`[bench] marked ${abandoned} import(s) left open by earlier bench runs failed`);
    }
    const service = await startService(infra);
    const stopService = once(() => service.stop());
    onStop(stopService);
    const sampleCpu = await cpuSampler(infra, service);
    const account = await createBenchAccount(infra.sql, runId);
    result.accountId = account.id;
    const ctx = { baseUrl: service.baseUrl, sql: infra.sql, workerPid: service.worker.proc.pid };
    const importOpts = {
      pollMs: opts.pollMs,
      timeoutSeconds: Math.max(600, Math.ceil(opts.rows / 2000)),
      files: runFiles,
    };
    const single: DatabaseRun = { label: 'single node', http: [], shapes: shown };
    const steps = { a: has('a'), b: has('b') };
    const shapeImportOpts = { ...importOpts, samples: opts.samples, sampleCpu };
    const searched: SearchRun[] = [];
    for (const run of has('a') ? runs : []) {
      // The wide shape's account is the run's (the HTTP step reads its contacts); another shape's its own.
      const own =
        run.shape === 'wide'
          ? account
          : await createBenchAccount(infra.sql, `${runId} ${run.shape}`, SHAPES[run.shape]);
      // With --citus, the wide contacts' bytes after import A, as the cluster measures them.
      const storage = async () => {
        if (run.shape === 'wide' && opts.citusWorkers) single.storage = await contactStorage(infra.sql);
      };
      // The search step right after the shape's import B: the narrow shape's contacts go after it.
      const search = !has('search')
        ? undefined
        : async () => {
            stepStarts('search', run.shape);
            const searchOpts = {
              rows: run.files.a.rows,
              runs: opts.searchRuns,
              seconds: opts.duration,
              warmupSeconds: opts.warmup,
            };
            searched.push(await runSearchStep(ctx, runId, run.shape, own, searchOpts, log));
          };
      await importSteps(ctx, run, own, steps, shapeImportOpts, runId, log, storage, search);
    }
    // Each shape's search run, the wide shape's first (as the tables show the shapes).
    searched.sort((x, y) => SHAPE_NAMES.indexOf(x.shape) - SHAPE_NAMES.indexOf(y.shape));
    if (searched.length) result.search = searched;
    single.importA = wideRun?.importA;
    let gzipRun: GzipRun | undefined;
    if (fileGz) {
      gzipRun = await runGzipImport(
        ctx,
        runId,
        fileA(),
        fileGz,
        { ...importOpts, strategy: 'overwrite', samples: opts.samples },
        log,
      );
      result.gzip = gzipRun;
    }
    let reportCost: ReportCostFile[] | undefined;
    if (fileClean) {
      const reportOpts = { ...importOpts, strategy: 'overwrite' as const, samples: opts.samples };
      reportCost = await runReportCost(ctx, service, runId, { a: fileA(), clean: fileClean }, reportOpts, log);
      result.reportCost = reportCost;
    }
    let fair: FairRun | undefined;
    if (has('fair')) {
      const fairOpts = { ...importOpts, strategy: 'overwrite' as const, samples: opts.samples };
      result.fair = fair = await runFair(ctx, runId, fileA(), fairOpts, log);
    }

    // Step `small`, and with --citus always: imports of a few rows, each alone (small-import.ts).
    if (has('small') || opts.citusWorkers) single.small = await runSmall(ctx, `${runId} ${single.label}`, log);

    let http: HttpRow[] = [];
    const httpOpts: HttpOptions = {
      connections: opts.connections,
      seconds: opts.duration,
      warmupSeconds: opts.warmup,
      rounds: opts.httpRounds,
      apiProcesses: opts.apiProcesses,
      noLimits: opts.httpNoLimits,
    };
    if (has('http')) {
      stepStarts('http');
      const importedRows = wideRun?.importA ? wideRun.files.a.rows : 0;
      result.http =
        single.http =
        http =
          await httpStep(infra, service, account, importedRows, { ...httpOpts, sampleCpu }, runId, log);
    }
    let exported: ExportRun | undefined;
    if (has('export')) {
      stepStarts('export');
      // The account as the imports (and the HTTP step) left it, before the mixed step drops its contacts.
      const exportOpts = {
        config: infra.config,
        seconds: opts.duration,
        warmupSeconds: opts.warmup,
        timeoutSeconds: importOpts.timeoutSeconds,
        sampleCpu,
      };
      const exportCtx = { ...ctx, apiPid: service.api.proc.pid };
      result.export = exported = await runExportStep(exportCtx, runId, account, exportOpts, log);
    }
    let mixed: MixedRun | undefined;
    if (has('mixed')) {
      stepStarts('mixed', opts.mixedShape);
      const mixedRun = runs.find((r) => r.shape === opts.mixedShape);
      const mixedOpts = {
        ...importOpts,
        strategy: 'overwrite' as const,
        samples: opts.samples,
        seconds: opts.duration,
        warmupSeconds: opts.warmup,
        closed: opts.mixedClosed,
        rate: opts.mixedRate || undefined,
        // The same file's import A alone earlier in the run: the time the load is judged to slow.
        alone: mixedRun?.importA && { seconds: mixedRun.importA.seconds, phases: mixedRun.importA.phases },
      };
      // Nothing after needs the run's contacts: gone before the mixed step imports file A into another
      // account, which then peaks like import A alone (after A and B, 25M rows would not fit beside them).
      if (wideRun?.importA) {
        const how = await dropAccountContacts(infra.sql, account.id);
        log(`[bench] mixed: the contacts of the imports before it ${how}`);
      }
      const file = opts.mixedShape === 'wide' ? fileA() : narrowA!;
      result.mixed = mixed = await runMixed(ctx, runId, file, mixedOpts, log);
    }
    let events: EventsRun | undefined;
    if (eventsFile) {
      stepStarts('events');
      // As before the mixed step: the run's contacts go first (mixed drops them itself).
      if (!has('mixed') && (wideRun?.importA || has('http'))) {
        const how = await dropAccountContacts(infra.sql, account.id);
        log(`[bench] events: the contacts of the steps before it ${how}`);
      }
      const eventsOpts = { timeoutSeconds: importOpts.timeoutSeconds, files: runFiles };
      result.events = events = await runEvents(ctx, runId, eventsFile, eventsOpts, log);
    }
    let suppressionCheck: SuppressionCheckRun | undefined;
    if (has('suppression-check'))
      result.suppressionCheck = suppressionCheck = await runSuppressionCheck(ctx, runId, opts.rows, log);
    if (childFailures().length) throw new Error(childFailures().join('; '));
    let citus: DatabaseRun | undefined;
    if (opts.citusWorkers) {
      stepStarts('citus');
      await stopService();
      await stopInfra();
      const citusOpts = {
        workers: opts.citusWorkers,
        runId,
        fileA: fileA(),
        steps: { a: has('a'), http: has('http'), small: true },
        importOpts: { ...importOpts, samples: opts.samples },
        httpOpts,
      };
      result.citus = citus = await runOnCitus(citusOpts, log, onStop);
      result.single = single;
      if (childFailures().length) throw new Error(childFailures().join('; '));
    }

    const load: LoadRow[] = shown.flatMap(loadRows);
    if (gzipRun)
      load.push({
        step: 'import A gzip',
        seconds: gzipRun.seconds,
        rows: fileA().rows,
        bytes: fileA().bytes,
        ratioToL1: wideRun?.l1 ? gzipRun.seconds / wideRun.l1.seconds : undefined,
        workerPeakRssMb: gzipRun.workerPeakRssMb,
      });
    result.load = load;
    const flat = flatRows(shown);
    const targets: Target[] = [
      ...evaluateTargets(load, http),
      ...cpuTargets(shown),
      ...flatTargets(flat),
      ...reportCostTargets(reportCost ?? []),
      ...(fair ? fairTargets(fair) : []),
      ...(mixed ? mixedTargets(mixed) : []),
      ...searched.flatMap(searchTargets),
      ...(exported ? exportTargets(exported) : []),
      ...(events ? eventsTargets(events) : []),
      ...(suppressionCheck ? suppressionCheckTargets(suppressionCheck) : []),
      ...smallTargets(citus?.small),
      ...clusterCpuTargets(single, citus),
    ];
    result.targets = targets;
    const sizes = shown.map((r) => `${SHAPES[r.shape].label('file A')} ${(r.files.a.bytes / 1e9).toFixed(2)} GB`);
    const files = sizes.length ? ` (${sizes.join(', ')})` : '';
    console.log(
      `\nBenchmark ${runId}: ${opts.rows.toLocaleString('en-US')} rows${files}, ${JSON.stringify(result.machine)}\n`,
    );
    if (load.length) console.log(`${loadTable(load)}\n`);
    for (const run of shown)
      for (const [key, imported] of [
        ['A', run.importA],
        ['B', run.importB],
      ] as const)
        if (imported) console.log(`${SHAPES[run.shape].label(`import ${key}`)} phases: ${phaseTable(imported)}\n`);
    if (gzipRun) console.log(`import A gzip phases: ${phaseTable(gzipRun)}\n`);
    if (flat.length) console.log(`${flatTable(flat)}\n`);
    if (gzipRun) console.log(`${gzipLine(fileA(), gzipRun, wideRun?.importA, wideRun?.l1)}\n`);
    if (reportCost) console.log(`${reportCostTable(reportCost)}\n`);
    if (fair) console.log(`${fairLine(fair)}\n`);
    if (profile) console.log(`read phase, component passes over file A: ${readProfileLine(profile)}\n`);
    for (const s of searched) console.log(`${searchTable(s)}\n`);
    if (http.length) console.log(`${httpTable(http)}\n`);
    if (exported) console.log(`${exportTable(exported)}\n`);
    if (mixed) console.log(`${mixedTable(mixed)}\n`);
    if (events) console.log(`${eventsTable(events)}\n`);
    if (suppressionCheck) console.log(`${suppressionCheckTable(suppressionCheck)}\n`);
    if (citus) console.log(`${sideBySide(single, citus, fileA())}\n`);
    else if (single.small) console.log(`${smallLine(single)}\n`);
    else if (runs.some((r) => r.dba || r.pgloader || r.importA?.cpu) || http.some((h) => h.cpuMsPerRequest))
      console.log(`${cpuTable([single], wideA)}\n`);
    for (const t of targets) {
      const verdict = !t.pass ? 'MISS' : t.judged === false ? 'SKIP' : 'PASS';
      console.log(`${verdict}  ${t.name}: ${t.value} (target ${t.target})`);
    }
    result.verification = 'passed';
    const imported = runs.some((r) => r.importA) || gzipRun;
    const checked = [
      imported && `import counts, contact totals, ${opts.samples} sampled contacts per import`,
      runs.some((r) => r.dba) && 'dba step: contacts written per file and the account total',
      runs.some((r) => r.pgloader) &&
        "pgloader step: as the dba step's, and per file the staged rows' count and order and a sample's cells",
      runs.some((r) => r.flat) && `the same for the ${sizeLabel(opts.flatRows)} files`,
      reportCost && 'report step: counts and contact totals per run, each report counted per reason or its 404',
      fair && `fair step: import A as import A, each small import's counts and contacts`,
      searched.length &&
        'search step: every count, first and later page against SQL of the step over the contacts, every ' +
          "stats answer against a recount, the other account's GET answers",
      http.length && 'HTTP answers and end states',
      exported &&
        `export step: each file's rows against COUNT(*) and rowCount, its header, ${exported.samples} contacts ` +
          "against GET /v1/contacts, the load's answers",
      mixed && "mixed step: the load's answers and end states, the import's counts and contacts",
      events &&
        "events step: each import's counts and contacts, every event of the feed and of the webhook once, " +
          'none missing or unknown, each of its import and brand, every batch signature',
      suppressionCheck && 'suppression-check step: every answer against the lists it was drawn from',
      single.small && 'small imports: counts and contacts of each',
      citus && `${citus.label}: ${clusterChecked(citus)} checked as on the single node`,
    ];
    console.log(`\nverification: passed (${checked.filter(Boolean).join('; ') || 'L1 row count'})`);
    console.log(`results: ${await writeResults(join(import.meta.dir, 'results'), result)}`);
    return opts.strict && targets.some((t) => !t.pass) ? 1 : 0;
  } catch (e) {
    log(`[bench] FAILED: ${e instanceof Error ? e.message : e}`);
    result.error = e instanceof Error ? e.message : String(e);
    await writeResults(join(import.meta.dir, 'results'), result).catch(() => {});
    return 1;
  } finally {
    await stopAll();
  }
}

/** What the cluster's run verified, for the verification line. */
function clusterChecked(run: DatabaseRun): string {
  const steps = [run.importA && 'import A', run.http.length > 0 && 'the HTTP step', run.small && 'the small imports'];
  return steps.filter(Boolean).join(', ');
}

// Stopped in reverse order of start, once, whether the run ends, fails or is interrupted: every
// caller waits for the same stop.
const stack: (() => Promise<void>)[] = [];
const onStop = (fn: () => Promise<void>) => void stack.push(fn);
let stopping: Promise<void> | undefined;
function stopAll(): Promise<void> {
  stopping ??= (async () => {
    for (const fn of stack.reverse()) await fn().catch((e) => log(`[bench] stop failed: ${e}`));
  })();
  return stopping;
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    log(`[bench] ${signal}: stopping what the bench started`);
    // The children a step would stop in its `finally` (the baseline server, extra APIs) first: the
    // process exits before any `finally` runs, and they hold connections to the database stopAll drops.
    // Once more after it: the run goes on while it stops, and a step may have started one meanwhile.
    void stopLiveChildren()
      .then(stopAll)
      .then(stopLiveChildren)
      .then(() => process.exit(130));
  });
}

// `bun run bench report <result.json>`: an earlier result's HTML report, drawn without a run.
if (process.argv[2] === 'report') process.exit(await reportCommand(process.argv.slice(3)));
process.exit(await main());
