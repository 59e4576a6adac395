//! The audit operations inside the loop, and the hooks the loop calls when it answers a
//! tagged message (see [`crate::audit`]).

use super::AuditOp;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{AuditEntry, AuditList, AuditOutcome, PolicyAnswer, Role};
use lockgate_core::Timestamp;
use lockgate_store::{AuditFilter, AuditRecord};

/// At most this many policy labels are named in a summary.
const SHOWN_LABELS: usize = 8;

impl Loop {
    /// Applies one audit operation.
    pub(crate) fn audit_op(&mut self, p: &Principal, op: AuditOp, now: Timestamp) {
        match op {
            AuditOp::Record {
                tag,
                outcome,
                error,
                reply,
            } => {
                let row = tag.row(outcome, error, None, now);
                self.audit_put(row);
                self.answer(reply, Ok(()));
            }
            AuditOp::List(filter, reply) => {
                let r = self.audit_list(p, &filter);
                self.answer(reply, r);
            }
        }
    }

    fn audit_list(&mut self, p: &Principal, f: &AuditFilter) -> Result<AuditList, ApiError> {
        p.require(&[Role::Admin], "read the audit log")?;
        let rows = self.store.audit(f)?;
        Ok(AuditList {
            entries: rows.into_iter().map(entry).collect(),
        })
    }

    /// Called by `Loop::answer` for the message being handled: writes its tag's row (if it
    /// has one) with the outcome of `err`, or on success the outcome an operation noted
    /// ([`Loop::audit_policy`]), else `ok` (`unchanged` for a dry run).
    pub(crate) fn audit_answered(&mut self, err: Option<&ApiError>) {
        let Some(tag) = self.audit_cur.clone() else {
            return;
        };
        let note = self.audit_note.take();
        let (outcome, error, detail) = match (err, note) {
            (Some(e), _) => (
                AuditOutcome::of_status(e.status().as_u16()),
                Some(format!("{}: {}", e.code, e.message)),
                None,
            ),
            (None, Some((o, d))) => (o, None, Some(d)),
            (None, None) if tag.dry_run => (AuditOutcome::Unchanged, None, None),
            (None, None) => (AuditOutcome::Ok, None, None),
        };
        let row = tag.row(outcome, error, detail, Timestamp(self.last_now));
        self.audit_put(row);
    }

    /// Notes what a policy apply or reload did, for its audit row: `unchanged` when
    /// nothing changed (or a dry run), and the new digest with the labels it changes.
    pub(crate) fn audit_policy(&mut self, r: &Result<PolicyAnswer, ApiError>) {
        let Ok(a) = r else { return };
        if self.audit_cur.is_none() {
            return;
        }
        let outcome = if a.dry_run || a.diff.is_empty() {
            AuditOutcome::Unchanged
        } else {
            AuditOutcome::Ok
        };
        self.audit_note = Some((outcome, policy_summary(a)));
    }

    /// Adds a row to the batch, replacing one of the same request.
    fn audit_put(&mut self, row: AuditRecord) {
        match self
            .batch
            .audit
            .iter_mut()
            .find(|r| r.request == row.request)
        {
            Some(r) => *r = row,
            None => self.batch.audit.push(row),
        }
    }
}

/// `digest D; N change(s): label, label, ...`: the labels only, never a value (a value
/// may be a secret's place).
fn policy_summary(a: &PolicyAnswer) -> String {
    let labels: Vec<String> = a.diff.iter().map(|l| diff_label(l)).collect();
    let mut text = format!(
        "digest {}; {} change(s)",
        &a.digest[..a.digest.len().min(16)],
        a.diff.len()
    );
    if !labels.is_empty() {
        text.push_str(": ");
        text.push_str(&labels[..labels.len().min(SHOWN_LABELS)].join(", "));
        if labels.len() > SHOWN_LABELS {
            text.push_str(&format!(" and {} more", labels.len() - SHOWN_LABELS));
        }
    }
    text
}

/// The label of one diff line: `+ kinds.backup: ...` is `+kinds.backup`, `limit "x":
/// max 3 -> 4` is `limit "x" max`.
fn diff_label(line: &str) -> String {
    if let Some(rest) = line.strip_prefix("+ ").or_else(|| line.strip_prefix("- ")) {
        let label = rest.split(": ").next().unwrap_or(rest);
        return format!("{}{label}", &line[..1]);
    }
    match line.split_once(": ") {
        Some((label, rest)) => {
            let field = rest.split(' ').next().unwrap_or("");
            format!("{label} {field}")
        }
        None => line.to_string(),
    }
}

fn entry(r: AuditRecord) -> AuditEntry {
    AuditEntry {
        seq: r.seq,
        at: lockgate_api::time::format(r.at),
        principal: r.principal,
        role: r.role,
        method: r.method,
        path: r.path,
        summary: r.summary,
        outcome: r.outcome,
        error: r.error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditTag;
    use crate::auth::Tokens;
    use crate::jobs::JobOp;
    use crate::policy::PolicySource;
    use crate::protocol::Msg;
    use lockgate_core::{Engine, Mode, Policy};

    /// The row of a tagged cancel is in the batch that cancels the job (one transaction),
    /// and a waiter answered in that batch (another request) does not overwrite it.
    #[test]
    fn an_acts_row_is_in_the_batch_of_its_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.db");
        let store = lockgate_store::SqliteStore::open(&path).unwrap();
        let policy = Policy::from_toml("[[limit]]\nname = \"none\"\nmax = 0\n", None).unwrap();
        let (events, _) = tokio::sync::broadcast::channel(16);
        let mut lp = Loop::new(
            Engine::new(policy, Mode::Indexed),
            Box::new(store),
            Tokens::default(),
            PolicySource::Store,
            events,
            0,
            0,
        );
        let now = lp.now();
        let (reply, mut submitted) = tokio::sync::oneshot::channel();
        let req = lockgate_api::SubmitRequest {
            kind: "backup".into(),
            ..Default::default()
        };
        let msg = |op: crate::protocol::Op, audit| Msg {
            principal: Principal::system(),
            op,
            audit,
        };
        lp.handle(msg(JobOp::Submit(Box::new(req), reply).into(), None), now);
        lp.drain_events(now);
        lp.commit().unwrap();
        lp.send_replies();
        let id = submitted.try_recv().unwrap().unwrap().job.id;
        assert!(
            lp.batch.audit.is_empty(),
            "an untagged message writes no row"
        );

        let (reply, _wait) = tokio::sync::oneshot::channel();
        let wait = JobOp::Wait {
            id,
            from: lockgate_core::JobState::Queued,
            or_cancel: false,
            reply,
        };
        lp.handle(msg(wait.into(), None), now);
        let tag = AuditTag::new(
            Some(Principal::system()),
            "POST",
            format!("/v1/jobs/{id}/cancel"),
            String::new(),
            false,
        );
        let (reply, _cancelled) = tokio::sync::oneshot::channel();
        lp.handle(msg(JobOp::Cancel(id, false, reply).into(), Some(tag)), now);
        lp.drain_events(now);
        assert_eq!(lp.batch.audit.len(), 1);
        assert_eq!(lp.batch.audit[0].outcome, AuditOutcome::Ok);
        assert!(
            lp.batch.events.iter().any(|e| e.data.contains("cancelled")),
            "the cancel's events are in the same batch"
        );
        lp.commit().unwrap();
        let rows = lp
            .store
            .audit(&AuditFilter {
                limit: 10,
                ..AuditFilter::default()
            })
            .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].path, format!("/v1/jobs/{id}/cancel"));
    }

    #[test]
    fn a_policy_summary_names_labels_never_values() {
        let a = PolicyAnswer {
            digest: "0123456789abcdef0123".into(),
            diff: vec![
                "+ kinds.backup: max_running 2".into(),
                "- limit \"old\"".into(),
                "limit \"repo\": max 3 -> 4".into(),
                "notify \"ops\": url https://u:p@h -> https://u:q@h".into(),
            ],
            admitted_now: vec![],
            over_limit: vec![],
            dry_run: false,
        };
        let s = policy_summary(&a);
        assert_eq!(
            s,
            "digest 0123456789abcdef; 4 change(s): +kinds.backup, -limit \"old\", limit \"repo\" max, notify \"ops\" url"
        );
    }
}
