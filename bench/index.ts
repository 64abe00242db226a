/**
 * `bun run bench [-- --rows N] [--duration S] [--connections C] [--strict] [--lean]
 *   [--steps l1,dba,a,b,http,profile,gzip,report,fair] [--citus] [--citus-workers N]`
 * Brings up the service (embedded defaults or configured URLs), generates the CSV files, runs
 * L1, the dba step, import A, import B and the HTTP load (and, when asked for, profile, gzip, report
 * and fair), verifies each after timing, prints the tables and writes bench/results/<timestamp>.json.
 * With --citus, import A and the HTTP step run again on the embedded Citus cluster after that, and a
 * table sets the two side by side with what each node's CPU did per row and per request.
 * Exit 1 when a run or a verification fails (and with --strict when a target is missed).
 */
import { join } from 'node:path';
import { mkdir } from 'node:fs/promises';
import { abandonOpenBenchImports, createBenchAccount, dropAccountContacts } from './account';
import { runDba, type DbaRun } from './dba';
import { checkDiskSpace, walOnDisk } from './disk';
import { RunFiles } from './files';
import { fairLine, fairTargets, runFair, type FairRun } from './fair';
import { generateCsv } from './generate';
import { gzipFile, runGzipImport, type GzipRun } from './gzip-import';
import { type HttpOptions } from './http';
import { runImportFlow, type ImportRun } from './import-flow';
import { runMixed, type MixedRun } from './mixed';
import { runL1, type L1Result } from './l1';
import { profileRead, readProfileLine } from './profile-read';
import {
  describeMachine,
  gzipLine,
  httpTable,
  loadTable,
  mixedTable,
  reportCostTable,
  sideBySide,
  cpuTable,
  writeResults,
  type HttpRow,
  type LoadRow,
} from './report';
import { cleanFile, cleanPath, runReportCost, type ReportCostFile } from './report-cost';
import { childFailures, once, startInfra, startService, type Infra } from './services';
import { checkImport } from './verify';
import { evaluateTargets, mixedTargets, phaseTable, reportCostTargets, type Target } from './summary';
import { runOnCitus, type DatabaseRun } from './citus';
import { cpuSampler, httpStep, importA } from './steps';
import { contactStorage } from './storage';

/**
 * Only when asked for: `profile` (the read phase's components, one pass each over file A), `gzip`
 * (import A again from file A gzip-compressed, into a fresh account: as long as import A again, plus
 * compressing the file the first time, and disk for a second set of A's contacts) and `report` (what
 * the rejected-rows report costs: file A and a clean file imported 24 times each, report off, on,
 * on, off, then on, off, off, on, three times: as long as 48 imports of A, and disk for the clean
 * file and one more set of contacts)
 * and `fair` (file A into a fresh account alone, then while 20 other accounts each import 10 rows
 * 10 s into it, then alone again: as long as three imports of A, and disk for three more sets).
 */
const STEPS = ['l1', 'dba', 'a', 'b', 'http', 'mixed', 'profile', 'gzip', 'report', 'fair'] as const;
const DEFAULT_STEPS: Step[] = ['l1', 'dba', 'a', 'b', 'http', 'mixed'];
/** Issue 15's targets: import A and B as multiples of L1, and of the dba step for the same file. */
const TARGET_X_L1 = { a: 8, b: 11 } as const;
const TARGET_X_DBA = 0.5;
type Step = (typeof STEPS)[number];

function parseArgs(argv: string[]) {
  const opts = {
    rows: 25_000_000,
    duration: 10,
    warmup: 2,
    connections: 64,
    samples: 200,
    pollMs: 1000,
    steps: DEFAULT_STEPS,
    strict: false,
    /** delete each generated file after its read even when the disk could keep it (bench/files.ts) */
    lean: false,
    /** Citus workers of the cluster side (0: no cluster side) */
    citusWorkers: 0,
  };
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
    if (flag === '--rows') opts.rows = num(1000);
    else if (flag === '--duration') opts.duration = num(1);
    else if (flag === '--warmup') opts.warmup = num(0);
    else if (flag === '--connections') opts.connections = num(1);
    else if (flag === '--samples') opts.samples = num(1);
    else if (flag === '--poll-ms') opts.pollMs = num(100);
    else if (flag === '--strict') opts.strict = true;
    else if (flag === '--lean') opts.lean = true;
    else if (flag === '--citus') opts.citusWorkers ||= 2;
    else if (flag === '--citus-workers') opts.citusWorkers = num(1);
    else if (flag === '--steps') {
      const steps = value()
        .split(',')
        .map((s) => s.trim()) as Step[];
      const bad = steps.find((s) => !STEPS.includes(s));
      if (bad) throw new Error(`--steps takes ${STEPS.join(',')}; got "${bad}"`);
      opts.steps = steps;
    } else if (flag === '--help' || flag === '-h') {
      console.error(
        'usage: bun run bench [-- --rows N] [--duration S] [--warmup S] [--connections C] [--samples K] ' +
          `[--poll-ms MS] [--steps ${STEPS.join(',')}] [--strict] [--lean] [--citus] [--citus-workers N]`,
      );
      process.exit(2);
    } else throw new Error(`unknown flag ${flag} (see --help)`);
  }
  if (opts.steps.includes('b') && !opts.steps.includes('a'))
    throw new Error('step b updates the contacts of step a: add a');
  if (opts.citusWorkers && !opts.steps.includes('a') && !opts.steps.includes('http'))
    throw new Error('--citus runs steps a and http on the cluster: add a or http to --steps');
  return opts;
}

const log = (m: string) => console.error(m);

async function main(): Promise<number> {
  const opts = parseArgs(process.argv.slice(2));
  const runId = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
  const has = (s: Step) => opts.steps.includes(s);
  log(`[bench] run ${runId}: ${opts.rows.toLocaleString('en-US')} rows, steps ${opts.steps.join(',')}`);
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
    const paths = { a: join(dir, `contacts-${opts.rows}-a.csv`), b: join(dir, `contacts-${opts.rows}-b.csv`) };
    // Only the embedded cluster keeps its data (and the uploaded objects) in the data directory.
    let lean = opts.lean;
    if (!infra.config.databaseUrl) {
      const files = [paths.a, ...(has('b') ? [paths.b] : [])];
      const derived = has('report') ? [cleanPath(paths.a)] : [];
      // gzip, report or fair after A: A's contacts stay while a second import of A, into another
      // account, peaks (the report step deletes each of its runs' contacts before the next). The mixed
      // step drops them first: its import peaks like import A alone.
      const secondImport = has('a') && (has('gzip') || has('report') || has('fair'));
      const importA = has('a') || has('gzip') || has('report') || has('fair') || has('dba') || has('mixed');
      // Import B, and the dba step's statement for file B, load B over A's contacts.
      const importB = has('b');
      const dataDir = infra.config.dataDir;
      const walSegments = await walOnDisk(dataDir);
      const plan = { dataDir, rows: opts.rows, files, derived, importA, importB, secondImport, walOnDisk: walSegments };
      lean = (await checkDiskSpace(plan, log, { lean })).lean;
    }
    const fileA = await generateCsv(paths.a, opts.rows, 0, log);
    const fileB = has('b') ? await generateCsv(paths.b, opts.rows, 1, log) : undefined;
    const fileGz = has('gzip') ? await gzipFile(fileA, log) : undefined;
    const fileClean = has('report') ? await cleanFile(fileA, log) : undefined;
    result.files = { a: fileA, b: fileB, gzip: fileGz, clean: fileClean, lean };
    const runFiles = new RunFiles(lean, fileB ? [fileA, fileB] : [fileA], log);

    let l1: L1Result | undefined;
    if (has('l1')) {
      await runFiles.ready(fileA);
      result.l1 = l1 = await runL1(infra.sql, fileA);
      await runFiles.read(fileA);
    }
    let dba: DbaRun | undefined;
    if (has('dba')) result.dba = dba = await runDba(infra, runId, { a: fileA, b: fileB }, runFiles, log);
    let profile: Awaited<ReturnType<typeof profileRead>> | undefined;
    if (has('profile')) {
      await runFiles.ready(fileA);
      result.readProfile = profile = await profileRead(infra.sql, fileA.path, log);
      await runFiles.read(fileA);
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
    const imports: Record<string, ImportRun> = {};
    const single: DatabaseRun = { label: 'single node', http: [], dba };
    if (has('a')) {
      imports.a = single.importA = await importA(
        ctx,
        account,
        fileA,
        { ...importOpts, samples: opts.samples, sampleCpu },
        log,
      );
      if (opts.citusWorkers) single.storage = await contactStorage(infra.sql);
    }
    if (has('b') && fileB) {
      const run =
        (imports.b =
        single.importB =
          await runImportFlow(ctx, account, fileB, 'import B', { ...importOpts, strategy: 'overwrite', sampleCpu }));
      await checkImport(ctx, account, fileB, run.view, {
        label: 'import B',
        mode: 'updated',
        variants: [0, 1],
        samples: opts.samples,
      });
      log(`[bench] import B verified: ${JSON.stringify(run.view)}`);
    }
    let gzipRun: GzipRun | undefined;
    if (fileGz) {
      gzipRun = await runGzipImport(
        ctx,
        runId,
        fileA,
        fileGz,
        { ...importOpts, strategy: 'overwrite', samples: opts.samples },
        log,
      );
      imports.gzip = gzipRun;
    }
    result.imports = imports;
    let reportCost: ReportCostFile[] | undefined;
    if (fileClean) {
      const reportOpts = { ...importOpts, strategy: 'overwrite' as const, samples: opts.samples };
      reportCost = await runReportCost(ctx, service, runId, { a: fileA, clean: fileClean }, reportOpts, log);
      result.reportCost = reportCost;
    }
    let fair: FairRun | undefined;
    if (has('fair')) {
      const fairOpts = { ...importOpts, strategy: 'overwrite' as const, samples: opts.samples };
      result.fair = fair = await runFair(ctx, runId, fileA, fairOpts, log);
    }

    let http: HttpRow[] = [];
    const httpOpts: HttpOptions = { connections: opts.connections, seconds: opts.duration, warmupSeconds: opts.warmup };
    if (has('http')) {
      const importedRows = has('a') ? fileA.rows : 0;
      result.http =
        single.http =
        http =
          await httpStep(infra, service, account, importedRows, { ...httpOpts, sampleCpu }, runId, log);
    }
    let mixed: MixedRun | undefined;
    if (has('mixed')) {
      const mixedOpts = {
        ...importOpts,
        strategy: 'overwrite' as const,
        samples: opts.samples,
        seconds: opts.duration,
        warmupSeconds: opts.warmup,
      };
      // Nothing after needs the run's contacts: gone before the mixed step imports file A into another
      // account, which then peaks like import A alone (after A and B, 25M rows would not fit beside them).
      if (has('a')) {
        const how = await dropAccountContacts(infra.sql, account.id);
        log(`[bench] mixed: the contacts of the imports before it ${how}`);
      }
      result.mixed = mixed = await runMixed(ctx, runId, fileA, mixedOpts, log);
    }
    if (childFailures().length) throw new Error(childFailures().join('; '));
    let citus: DatabaseRun | undefined;
    if (opts.citusWorkers) {
      await stopService();
      await stopInfra();
      const citusOpts = {
        workers: opts.citusWorkers,
        runId,
        fileA,
        steps: { a: has('a'), http: has('http') },
        importOpts: { ...importOpts, samples: opts.samples },
        httpOpts,
      };
      result.citus = citus = await runOnCitus(citusOpts, log, onStop);
      result.single = single;
      if (childFailures().length) throw new Error(childFailures().join('; '));
    }

    const load: LoadRow[] = [];
    if (l1) load.push({ step: 'L1 COPY (baseline)', seconds: l1.seconds, rows: l1.rows, bytes: l1.bytes });
    for (const key of ['a', 'b'] as const) {
      const d = dba?.[key];
      const file = key === 'a' ? fileA : fileB!;
      if (d)
        load.push({
          step: `dba ${key.toUpperCase()} (COPY + upsert)`,
          seconds: d.seconds,
          rows: file.rows,
          bytes: file.bytes,
          ratioToL1: l1 ? d.seconds / l1.seconds : undefined,
        });
    }
    for (const key of ['a', 'b'] as const) {
      const run = imports[key];
      const file = key === 'a' ? fileA : fileB!;
      const d = dba?.[key];
      if (run)
        load.push({
          step: `import ${key.toUpperCase()}`,
          seconds: run.seconds,
          rows: file.rows,
          bytes: file.bytes,
          ratioToL1: l1 ? run.seconds / l1.seconds : undefined,
          target: TARGET_X_L1[key],
          ratioToDba: d ? run.seconds / d.seconds : undefined,
          dbaTarget: d ? TARGET_X_DBA : undefined,
          workerPeakRssMb: run.workerPeakRssMb,
        });
    }
    if (gzipRun)
      load.push({
        step: 'import A gzip',
        seconds: gzipRun.seconds,
        rows: fileA.rows,
        bytes: fileA.bytes,
        ratioToL1: l1 ? gzipRun.seconds / l1.seconds : undefined,
        workerPeakRssMb: gzipRun.workerPeakRssMb,
      });
    const targets: Target[] = [
      ...evaluateTargets(load, http),
      ...reportCostTargets(reportCost ?? []),
      ...(fair ? fairTargets(fair) : []),
      ...(mixed ? mixedTargets(mixed) : []),
    ];
    result.targets = targets;
    console.log(
      `\nBenchmark ${runId}: ${opts.rows.toLocaleString('en-US')} rows (${(fileA.bytes / 1e9).toFixed(2)} GB), ` +
        `${JSON.stringify(result.machine)}\n`,
    );
    if (load.length) console.log(`${loadTable(load)}\n`);
    for (const [key, run] of Object.entries(imports))
      console.log(`import ${key === 'gzip' ? 'A gzip' : key.toUpperCase()} phases: ${phaseTable(run)}\n`);
    if (gzipRun) console.log(`${gzipLine(fileA, gzipRun, imports.a, l1)}\n`);
    if (reportCost) console.log(`${reportCostTable(reportCost)}\n`);
    if (fair) console.log(`${fairLine(fair)}\n`);
    if (profile) console.log(`read phase, component passes over file A: ${readProfileLine(profile)}\n`);
    if (http.length) console.log(`${httpTable(http)}\n`);
    if (mixed) console.log(`${mixedTable(mixed)}\n`);
    if (citus) console.log(`${sideBySide(single, citus, fileA)}\n`);
    else if (single.importA?.cpu || single.dba || http.some((h) => h.cpuMsPerRequest))
      console.log(`${cpuTable([single], fileA)}\n`);
    for (const t of targets) {
      const verdict = !t.pass ? 'MISS' : t.judged === false ? 'SKIP' : 'PASS';
      console.log(`${verdict}  ${t.name}: ${t.value} (target ${t.target})`);
    }
    result.verification = 'passed';
    const checked = [
      Object.keys(imports).length && `import counts, contact totals, ${opts.samples} sampled contacts per import`,
      dba && 'dba step: contacts written per file and the account total',
      reportCost && 'report step: counts and contact totals per run, each report counted per reason or its 404',
      fair && `fair step: import A as import A, each small import's counts and contacts`,
      http.length && 'HTTP answers and end states',
      mixed && "mixed step: the load's answers and end states, the import's counts and contacts",
      citus && `${citus.label}: import A and the HTTP step checked as on the single node`,
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
    void stopAll().then(() => process.exit(130));
  });
}

process.exit(await main());
