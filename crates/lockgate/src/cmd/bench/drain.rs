//! The drain: `n` jobs queued behind a closed gate, the limit raised, and holders that take
//! the admitted jobs and finish them. Measured two ways in the same run:
//! - batched: a holder lists the running jobs a page (up to 1,000) at a time and finishes
//!   the page with one `POST /v1/batch/finish`;
//! - single: each job is waited for (`GET /v1/jobs/{id}/wait`) and finished
//!   (`POST /v1/jobs/{id}/finish`) on its own, two round trips per job.
//!
//! A job counts once it was admitted, handed to its holder (its lease token is in an answer)
//! and its finish was answered, which the server does only after the commit.

use super::Bench;
use lockgate_api::{BatchFinishItem, JobQuery, SubmitRequest, MAX_BATCH_ITEMS};
use lockgate_client::Client;
use lockgate_core::{JobState, Outcome};
use std::time::Instant;

/// Holder threads of each path.
const HOLDERS: usize = 4;

fn backup() -> SubmitRequest {
    SubmitRequest {
        kind: "drain".into(),
        ..Default::default()
    }
}

/// Queues `n` jobs behind a gate job holding the only slot; the gate and the job ids.
fn queue(b: &Bench, n: usize) -> anyhow::Result<(lockgate_api::JobView, Vec<u64>)> {
    b.policy("[global]\nmax_running = 1\n")?;
    let c = b.client()?;
    let gate = c.submit(&SubmitRequest {
        kind: "gate".into(),
        ..Default::default()
    })?;
    let mut ids = Vec::with_capacity(n);
    while ids.len() < n {
        let k = (n - ids.len()).min(MAX_BATCH_ITEMS);
        for item in c.submit_batch(vec![backup(); k])? {
            let job = item
                .job
                .ok_or_else(|| anyhow::anyhow!("a drain submit was refused: {:?}", item.error))?;
            ids.push(job.id);
        }
    }
    Ok((gate.0, ids))
}

/// Raises the limit and finishes the gate: the clock starts here.
fn open(b: &Bench, gate: &lockgate_api::JobView, n: usize) -> anyhow::Result<Instant> {
    let start = Instant::now();
    b.policy(&format!("[global]\nmax_running = {}\n", n + 1))?;
    let token = gate.lease.as_ref().map(|l| l.token).unwrap_or_default();
    b.client()?
        .finish_job(gate.id, token, Outcome::Succeeded, None)?;
    Ok(start)
}

/// One batched holder of the id range `ids`: lists the range's running jobs (a page of
/// up to 1,000, lowest ids first: finished ones leave the listing) and finishes the page
/// in one batch, until the whole range is finished.
fn batched_holder(c: &Client, ids: &[u64]) -> anyhow::Result<usize> {
    let (lo, hi) = (ids[0], ids[ids.len() - 1]);
    let mut left = ids.len();
    while left > 0 {
        let page = c.jobs(&JobQuery {
            state: Some("running".into()),
            kind: Some("drain".into()),
            limit: Some(MAX_BATCH_ITEMS as u32),
            after: Some(lo - 1),
            ..Default::default()
        })?;
        let fins: Vec<BatchFinishItem> = page
            .jobs
            .iter()
            .filter(|j| j.id <= hi)
            .map(|j| BatchFinishItem {
                id: j.id,
                token: j.lease.as_ref().map(|l| l.token).unwrap_or_default(),
                outcome: Outcome::Succeeded,
                message: None,
            })
            .collect();
        if fins.is_empty() {
            // Not admitted yet: do not spin on the listing (it competes for the loop).
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        }
        let done = c.finish_batch(fins)?;
        if let Some(bad) = done.iter().find(|i| i.status != 200) {
            anyhow::bail!("a drain finish was refused: {:?}", bad.error);
        }
        left -= done.len();
    }
    Ok(ids.len())
}

/// One single-request holder: wait for each job, then finish it.
fn single_holder(c: &Client, ids: &[u64]) -> anyhow::Result<usize> {
    for &id in ids {
        let mut job = c.job(id)?;
        while job.state == JobState::Queued {
            job = c.wait(id, JobState::Queued, 30)?;
        }
        let token = job.lease.as_ref().map(|l| l.token).unwrap_or_default();
        c.finish_job(id, token, Outcome::Succeeded, None)?;
    }
    Ok(ids.len())
}

/// Drains `n` queued jobs with holders running `holder` over their share; jobs per second.
fn drain(
    b: &Bench,
    n: usize,
    holder: fn(&Client, &[u64]) -> anyhow::Result<usize>,
) -> anyhow::Result<f64> {
    let (gate, ids) = queue(b, n)?;
    let share = ids.len().div_ceil(HOLDERS);
    let clients = (0..HOLDERS)
        .map(|_| b.client())
        .collect::<Result<Vec<_>, _>>()?;
    let start = open(b, &gate, n)?;
    let done = std::thread::scope(|s| -> anyhow::Result<usize> {
        let threads: Vec<_> = ids
            .chunks(share)
            .zip(&clients)
            .map(|(part, c)| s.spawn(move || holder(c, part)))
            .collect();
        let mut done = 0;
        for t in threads {
            done += t
                .join()
                .map_err(|_| anyhow::anyhow!("a holder panicked"))??;
        }
        Ok(done)
    })?;
    Ok(done as f64 / start.elapsed().as_secs_f64())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The drain, batched and single, interleaved `rounds` times: medians (jobs/s).
pub(super) fn measure(b: &Bench, n: usize, rounds: usize) -> anyhow::Result<(f64, f64)> {
    let (mut batched, mut single) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        eprintln!(
            "drain round {}/{rounds}: {n} queued jobs, batched then single ...",
            r + 1
        );
        batched.push(drain(b, n, batched_holder)?);
        single.push(drain(b, n, single_holder)?);
    }
    Ok((median(batched), median(single)))
}
