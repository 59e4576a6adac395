// graphile-worker peer for benches/compare/run. Usage: node gw.js MODE CONN N CONC
//   cycles: N seconds of closed loop (CONC clients: add_job, wait until its task ran)
//   drain:  N jobs added in one SQL statement, then CONC workers; time to all completed
//   fill:   N jobs queued (no worker) for the memory and disk measure
// Prints one JSON line. Settings as graphile-worker's docs recommend: defaults
// (pollInterval 2 s, LISTEN/NOTIFY on), concurrency = CONC.
const { run, makeWorkerUtils } = require("graphile-worker");
const [mode, conn, nArg, concArg] = process.argv.slice(2);
const N = Number(nArg), CONC = Number(concArg || 16);
const waiters = new Map();
// One statement through graphile-worker's batch function (add_jobs), as its docs advise
// for bulk enqueueing.
const ADD_JOBS = `select graphile_worker.add_jobs(array(
  select json_populate_record(null::graphile_worker.job_spec,
    json_build_object('identifier', 't', 'payload', json_build_object('i', g)))
  from generate_series(1, $1) g))`;
let done = 0;
async function main() {
  const utils = await makeWorkerUtils({ connectionString: conn });
  await utils.migrate();
  if (mode === "fill") {
    await utils.withPgClient((c) => c.query(
      ADD_JOBS, [N]));
    console.log(JSON.stringify({ queued: N }));
    await utils.release();
    return;
  }
  if (mode === "drain") {
    await utils.withPgClient((c) => c.query(
      ADD_JOBS, [N]));
  }
  let finished;
  const all = new Promise((r) => (finished = r));
  const start = process.hrtime.bigint();
  const runner = await run({
    connectionString: conn, concurrency: CONC, noHandleSignals: true, logger: quiet(),
    taskList: { t: async (p) => {
      done++;
      const w = waiters.get(p.i); if (w) { waiters.delete(p.i); setImmediate(w); }
      if (mode === "drain" && done === N) finished();
    } },
  });
  if (mode === "drain") {
    await all;
    const s = Number(process.hrtime.bigint() - start) / 1e9;
    console.log(JSON.stringify({ jobs: N, secs: s, jobs_per_s: N / s }));
  } else {
    let seq = 0, cycles = 0; const end = Date.now() + N * 1000;
    const t0 = process.hrtime.bigint();
    await Promise.all([...Array(CONC)].map(async () => {
      while (Date.now() < end) {
        const i = ++seq;
        const p = new Promise((r) => waiters.set(i, r));
        await utils.addJob("t", { i });
        await p; cycles++;
      }
    }));
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    console.log(JSON.stringify({ cycles, secs: s, cycles_per_s: cycles / s }));
  }
  await runner.stop();
  await utils.release();
}
function quiet() {
  const { Logger } = require("graphile-worker");
  return new Logger(() => () => {});
}
main().catch((e) => { console.error(e); process.exit(1); });
