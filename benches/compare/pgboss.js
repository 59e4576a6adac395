// pg-boss peer for benches/compare/run. Usage: node pgboss.js MODE CONN N CONC
//   cycles / drain / fill as in gw.js. Settings as pg-boss's docs recommend: defaults,
//   except pollingIntervalSeconds 0.5 (its documented minimum) so a closed loop is not
//   bound by the 2 s default poll; batchSize = CONC for the drain.
const PgBoss = require("pg-boss");
const [mode, conn, nArg, concArg] = process.argv.slice(2);
const N = Number(nArg), CONC = Number(concArg || 16);
const Q = "t";
async function main() {
  const boss = new PgBoss({ connectionString: conn, max: CONC + 4 });
  boss.on("error", (e) => console.error(e));
  await boss.start();
  await boss.createQueue(Q);
  if (mode === "fill" || mode === "drain") {
    for (let i = 0; i < N; i += 1000) {
      await boss.insert([...Array(Math.min(1000, N - i))].map((_, k) => ({ name: Q, data: { i: i + k } })));
    }
  }
  if (mode === "fill") { console.log(JSON.stringify({ queued: N })); await boss.stop({ graceful: false }); return; }
  const waiters = new Map(); let done = 0, finished;
  const all = new Promise((r) => (finished = r));
  const start = process.hrtime.bigint();
  const opts = { pollingIntervalSeconds: 0.5, batchSize: mode === "drain" ? 100 : 1 };
  const workers = mode === "drain" ? CONC : CONC;
  for (let w = 0; w < workers; w++) {
    await boss.work(Q, opts, async (jobs) => {
      for (const j of jobs) {
        done++;
        const r = waiters.get(j.data.i); if (r) { waiters.delete(j.data.i); setImmediate(r); }
      }
      if (mode === "drain" && done >= N) finished();
    });
  }
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
        await boss.send(Q, { i });
        await p; cycles++;
      }
    }));
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    console.log(JSON.stringify({ cycles, secs: s, cycles_per_s: cycles / s }));
  }
  await boss.stop({ graceful: false, wait: false });
}
main().then(() => process.exit(0)).catch((e) => { console.error(e); process.exit(1); });
