//! `GET /v1/jobs`: one page of the job listing, oldest or newest first, filtered in the
//! store (state, active, kind, owner, node) and, for `attr`, by a job selector here.
//!
//! # Invariants
//! - Paging moves on: `next` is the id of the last job this page *read* (returned or
//!   skipped by the selector), so the next page starts past it and never repeats a job.
//! - `next` is `null` only when the store holds nothing further in the listing's order;
//!   a page cut short by the byte cap or the scan budget has a `next` even when it holds
//!   fewer than `limit` jobs (or none, when the budget ran out before a match).
//! - One request reads at most [`SCAN_BUDGET`] rows, so a selector that matches nothing
//!   cannot hold the event loop for the whole table.

use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{JobList, JobOrder, JobQuery, JobView, Role};
use lockgate_core::job::{JobId, JobState};
use lockgate_core::selector::Selector;
use lockgate_store::JobFilter;

/// A page ends before the job that would take its JSON past this many bytes (4 MiB), with
/// `next` set, whatever `limit` asked for (at most 1000 jobs in any case).
pub(crate) const MAX_LIST_BYTES: usize = 4 << 20;

/// The most store rows one request reads while an `attr` selector skips jobs.
pub(crate) const SCAN_BUDGET: usize = 10_000;

/// Rows read per store query while a selector filters.
const CHUNK: usize = 500;

fn parse_state(state: Option<&str>) -> Result<Option<JobState>, ApiError> {
    let Some(s) = state else { return Ok(None) };
    JobState::parse(s).map(Some).ok_or_else(|| {
        let all: Vec<&str> = JobState::ALL.iter().map(|s| s.as_str()).collect();
        ApiError::invalid(
            "state",
            format!("unknown state {s:?}: expected one of {}", all.join(", ")),
        )
    })
}

fn parse_attr(attr: Option<&str>) -> Result<Option<Selector>, ApiError> {
    let Some(text) = attr else { return Ok(None) };
    Selector::parse_jobs(text).map(Some).map_err(|e| {
        ApiError::invalid(
            "attr",
            format!("attr {text:?}: {e} (a selector: KEY=VALUE pairs joined by ',')"),
        )
    })
}

/// The filter's cursor moved past `id` in its order.
fn advance(f: &mut JobFilter, id: JobId) {
    if f.newest_first {
        f.before = Some(id);
    } else {
        f.after = Some(id);
    }
}

impl Loop {
    /// One page of `GET /v1/jobs` for `p`: a submitter sees only its own jobs, an agent
    /// only those on its node.
    pub(super) fn list(&mut self, p: &Principal, q: JobQuery) -> Result<JobList, ApiError> {
        let limit = q.limit.unwrap_or(100).clamp(1, 1000) as usize;
        let selector = parse_attr(q.attr.as_deref())?;
        let mut f = JobFilter {
            state: parse_state(q.state.as_deref())?,
            kind: q.kind,
            owner: q.owner,
            node: q.node,
            active: q.active.unwrap_or(false),
            after: q.after,
            before: q.before,
            newest_first: q.order == Some(JobOrder::Desc),
            limit: if selector.is_some() { CHUNK } else { limit },
        };
        match p.role {
            Role::Submitter => f.owner = Some(p.name.clone()),
            Role::Agent => f.node = p.node.clone(),
            _ => {}
        }
        let mut views: Vec<JobView> = Vec::new();
        let (mut bytes, mut scanned) = (0, 0);
        loop {
            let jobs = self.store.jobs(&f)?;
            let exhausted = jobs.len() < f.limit;
            for j in jobs {
                if let Some(sel) = &selector {
                    scanned += 1;
                    if !sel.matches(|k| j.key_value(k)) {
                        advance(&mut f, j.id);
                        continue;
                    }
                }
                let view = self.current_view(j);
                bytes += serde_json::to_vec(&view).map_or(0, |v| v.len());
                // At least one job per page, so paging always moves on.
                if bytes > MAX_LIST_BYTES && !views.is_empty() {
                    let next = views.last().map(|v| v.id);
                    return Ok(JobList { jobs: views, next });
                }
                advance(&mut f, view.id);
                views.push(view);
                if views.len() == limit {
                    let next = views.last().map(|v| v.id);
                    return Ok(JobList { jobs: views, next });
                }
            }
            if exhausted {
                return Ok(JobList {
                    jobs: views,
                    next: None,
                });
            }
            if scanned >= SCAN_BUDGET {
                let next = if f.newest_first { f.before } else { f.after };
                return Ok(JobList { jobs: views, next });
            }
        }
    }
}
