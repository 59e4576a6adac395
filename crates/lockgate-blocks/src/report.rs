//! The end of a backup: waiting for data still moving, the result, and the metadata files.
//!
//! Invariants: `metadata/blocks.json` lists every block of the plan, those that started in
//! the order they started (then those that never did, without times);
//! `metadata/result.json` is the [`BackupResult`] plus `item_status`, one line per item
//! of the plan in plan order. Both are serialized straight from the plan and the run state.

use crate::archive::{self, PendingUpload, Tar};
use crate::backup::{Backup, RunState};
use crate::plan::Plan;
use crate::result::{BackupResult, Counts, ItemResult, ItemStatus, Phase};
use serde::ser::{SerializeSeq, Serializer};
use serde::Serialize;
use std::io;
use std::time::SystemTime;

/// RFC 3339 in UTC with the clock's precision.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .map_or_else(|_| "1970-01-01T00:00:00Z".to_string(), |ts| ts.to_string())
}

/// Waits for every upload still moving; failures fail their PVC item.
pub(crate) fn finish_uploads(backup: &Backup, pending: Vec<PendingUpload>) {
    for mut p in pending {
        let outcome = p.handle.wait_finished();
        let ms = p.submitted.elapsed().as_millis() as u64;
        let mut st = backup.state();
        st.uploads[p.record].finished_ms = Some(ms);
        if let Err(e) = outcome {
            st.uploads[p.record].error = Some(e.to_string());
            st.items[p.item as usize] = ItemStatus::Failed;
            st.messages.entry(p.item).or_default().0 = Some(format!("data upload failed: {e}"));
        }
    }
}

/// The result of a backup whose blocks are all accounted.
pub(crate) fn result(backup: &Backup, now: SystemTime) -> BackupResult {
    let st = backup.state();
    let plan = &backup.plan;
    let (items, not_completed) = item_results(plan, &st);
    let blocks = block_counts(plan, &st);
    let input_errors: Vec<String> = plan.input_errors().iter().map(|e| e.to_string()).collect();
    let mut refused = plan.refused().to_vec();
    refused.extend(st.refused.iter().cloned());
    let canceled = backup.is_canceled();
    let reasons = reasons(&st, canceled, &items, input_errors.len(), refused.len());
    let phase = if canceled || st.fatal.is_some() {
        Phase::Failed
    } else if reasons.is_empty() {
        Phase::Completed
    } else {
        Phase::PartiallyFailed
    };
    BackupResult {
        name: backup.config.name.clone(),
        phase,
        reasons,
        started_at: rfc3339(backup.started),
        finished_at: rfc3339(now),
        duration_ms: now
            .duration_since(backup.started)
            .map_or(0, |d| d.as_millis() as u64),
        blocks,
        item_counts: items,
        items: not_completed,
        hooks: st.hooks.clone(),
        uploads: st.uploads.clone(),
        input_errors,
        warnings: st.warnings.clone(),
        refused,
    }
}

/// Item counts, and one [`ItemResult`] per item that did not complete, in plan order (an
/// item still pending at the end counts, and is reported, as failed).
fn item_results(plan: &Plan, st: &RunState) -> (Counts, Vec<ItemResult>) {
    let mut items = Counts {
        total: plan.item_count(),
        ..Counts::default()
    };
    let mut not_completed = Vec::new();
    for (i, status) in st.items.iter().enumerate() {
        match status {
            ItemStatus::Completed => items.completed += 1,
            ItemStatus::Skipped => items.skipped += 1,
            ItemStatus::Failed | ItemStatus::Pending => items.failed += 1,
        }
        if *status != ItemStatus::Completed {
            let (error, note) = st.messages.get(&(i as u32)).cloned().unwrap_or_default();
            let status = if *status == ItemStatus::Pending {
                ItemStatus::Failed
            } else {
                *status
            };
            not_completed.push(ItemResult {
                item: plan.item(i).name.to_string(),
                status,
                error,
                note,
            });
        }
    }
    (items, not_completed)
}

/// Block counts: a block that never started is skipped, one with an item that did not
/// complete failed.
fn block_counts(plan: &Plan, st: &RunState) -> Counts {
    let mut blocks = Counts {
        total: plan.block_count(),
        ..Counts::default()
    };
    for b in 0..plan.block_count() {
        if st.block_times[b].0.is_none() {
            blocks.skipped += 1;
        } else if plan
            .block(b)
            .all(|i| st.items[i.index] == ItemStatus::Completed)
        {
            blocks.completed += 1;
        } else {
            blocks.failed += 1;
        }
    }
    blocks
}

/// Why the phase is not `Completed`: the fatal error and the cancel first, then the run's
/// own reasons, then the failed, skipped, bad and refused counts.
fn reasons(
    st: &RunState,
    canceled: bool,
    items: &Counts,
    input_errors: usize,
    refused: usize,
) -> Vec<String> {
    let mut reasons = st.reasons.clone();
    if canceled {
        reasons.insert(0, "backup canceled".to_string());
    }
    if let Some(f) = &st.fatal {
        reasons.insert(0, f.clone());
    }
    if items.failed > 0 {
        reasons.push(format!("{} of {} items failed", items.failed, items.total));
    }
    if items.skipped > 0 {
        reasons.push(format!(
            "{} of {} items skipped",
            items.skipped, items.total
        ));
    }
    if input_errors > 0 {
        reasons.push(format!("{input_errors} bad items or files in the input"));
    }
    if refused > 0 {
        reasons.push(format!(
            "{refused} items or hooks refused by the backup's confinement (see refused)"
        ));
    }
    reasons
}

/// Writes `metadata/blocks.json` and `metadata/result.json`.
pub(crate) fn write_metadata(
    backup: &Backup,
    result: &BackupResult,
    tar: &mut Tar,
) -> io::Result<()> {
    let archive = &backup.config.archive_path;
    archive::append_streamed(tar, archive, "metadata/blocks.json", |w| {
        serde_json::to_writer_pretty(w, &BlocksDoc { backup }).map_err(io::Error::other)
    })?;
    archive::append_streamed(tar, archive, crate::result::RESULT_ENTRY, |w| {
        let doc = ResultDoc {
            format: crate::restore::ARCHIVE_FORMAT,
            result,
            item_status: ItemLines { backup },
        };
        serde_json::to_writer_pretty(w, &doc).map_err(io::Error::other)
    })
}

struct BlocksDoc<'a> {
    backup: &'a Backup,
}

impl Serialize for BlocksDoc<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let st = self.backup.state();
        let times = &st.block_times;
        let mut order: Vec<usize> = (0..times.len()).collect();
        order.sort_by_key(|&b| (times[b].0.is_none(), times[b].0, b));
        let mut seq = s.serialize_seq(Some(order.len()))?;
        for b in order {
            seq.serialize_element(&BlockLine {
                index: b,
                items: BlockItems {
                    backup: self.backup,
                    block: b,
                },
                started_at: times[b].0.map(rfc3339),
                finished_at: times[b].1.map(rfc3339),
            })?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct BlockLine<'a> {
    index: usize,
    items: BlockItems<'a>,
    started_at: Option<String>,
    finished_at: Option<String>,
}

struct BlockItems<'a> {
    backup: &'a Backup,
    block: usize,
}

impl Serialize for BlockItems<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.backup.plan.block(self.block).map(|i| i.name))
    }
}

#[derive(Serialize)]
struct ResultDoc<'a> {
    /// The archive's format (`crate::restore::ARCHIVE_FORMAT`), read back by a restore.
    format: u64,
    #[serde(flatten)]
    result: &'a BackupResult,
    item_status: ItemLines<'a>,
}

struct ItemLines<'a> {
    backup: &'a Backup,
}

#[derive(Serialize)]
struct ItemLine<'a> {
    item: &'a str,
    status: ItemStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
}

impl Serialize for ItemLines<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let st = self.backup.state();
        let plan = &self.backup.plan;
        s.collect_seq((0..plan.item_count()).map(|i| {
            let msg = st.messages.get(&(i as u32));
            ItemLine {
                item: plan.item(i).name,
                status: st.items[i],
                error: msg.and_then(|m| m.0.as_deref()),
                note: msg.and_then(|m| m.1.as_deref()),
            }
        }))
    }
}
