//! The batch job operations inside the loop: many submits, finishes or heartbeats applied
//! one after another in one turn of the loop.
//!
//! # Invariants
//! - Each item goes through the same function as its single route (roles, ownership,
//!   quotas, lease checks), so a batch can do nothing its items could not do one by one.
//! - The items are applied in one turn of the loop: their writes share the turn's group
//!   commit, and the answer (like every answer) is sent only after that commit.
//! - A failed item is recorded in the audit log as the single route's refusal would be.

use super::BatchItems;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use crate::protocol::Reply;
use lockgate_api::{BatchAnswer, BatchItem, JobView};
use lockgate_core::Timestamp;

/// One item's answer as the wire carries it.
fn item(r: Result<(u16, JobView), ApiError>) -> BatchItem {
    match r {
        Ok((status, job)) => BatchItem {
            status,
            job: Some(job),
            error: None,
        },
        Err(e) => BatchItem {
            status: e.status().as_u16(),
            job: None,
            error: Some(e.body()),
        },
    }
}

impl Loop {
    /// Applies a batch and answers all its items at once.
    pub(crate) fn job_batch(
        &mut self,
        p: &Principal,
        items: BatchItems,
        reply: Reply<BatchAnswer>,
        now: Timestamp,
    ) {
        let mut out = Vec::with_capacity(items.len());
        match items {
            BatchItems::Submit(reqs) => {
                for req in reqs {
                    let r = self
                        .submit(p, req, now)
                        .map(|s| (if s.created { 201 } else { 200 }, s.job));
                    out.push(self.batch_item(r));
                }
            }
            BatchItems::Finish(fins) => {
                for f in fins {
                    let id = f.id;
                    let r = self.finish(p, id, f.request(), now).map(|j| (200, j));
                    out.push(self.batch_item(r));
                }
            }
            BatchItems::Heartbeat(leases) => {
                for l in leases {
                    let id = l.id;
                    let req = lockgate_api::LeaseRequest::new(l.token);
                    let r = self
                        .lease_call(p, id, &req, now, |e| {
                            e.heartbeat(id, l.token, now).map(|_| ())
                        })
                        .map(|j| (200, j));
                    out.push(self.batch_item(r));
                }
            }
        }
        self.answer(reply, Ok(BatchAnswer { items: out }));
    }

    /// One item's answer; a refusal gets its audit row.
    fn batch_item(&mut self, r: Result<(u16, JobView), ApiError>) -> BatchItem {
        if let Err(e) = &r {
            if self.audit_cur.is_some() {
                self.audit_answered(Some(e));
            }
        }
        item(r)
    }
}
