//! The worker pool shared by every backup of a server.
//!
//! One dispatcher thread hands blocks to `workers` threads through a bounded channel of
//! `channel_capacity` jobs, taking the next block from each running backup in turn
//! (round-robin), so a large backup delays a small one by at most the channel's worth of
//! blocks. A job is only a block index: the worker that runs it reads the block's items from
//! the input, so item contents are in memory only for the blocks being run (at most
//! `workers` blocks at a time), whatever the size of the backups.
//!
//! Invariants:
//! - ordered blocks (the first `ordered_block_count` of a plan) are handed out one at a time:
//!   the next block of that backup is handed out only after the previous one has finished,
//!   and the first unordered block only after the last ordered one has finished;
//! - a canceled backup gets no new block from the moment the dispatcher reads the cancel:
//!   a job staged for it is dropped, its remaining blocks are marked skipped; a job already
//!   in the channel is skipped by the worker that receives it;
//! - every block handed out or skipped is accounted exactly once (see `backup.rs`).

use crate::archive;
use crate::backup::{Backup, BackupConfig, BackupHandle, StartError};
use crate::block;
use crate::plan::Plan;
use crossbeam_channel::{bounded, unbounded, Receiver, Select, Sender};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Size of the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Worker threads (`--item-block-workers`); default: the number of CPUs. More workers
    /// overlap more hooks and snapshot waits; each holds one block's items in memory.
    pub workers: usize,
    /// Jobs waiting in the channel; default: `workers`. Larger smooths bursts, smaller
    /// lets a newly started backup get its first block sooner.
    pub channel_capacity: usize,
}

impl Default for PoolConfig {
    fn default() -> Self {
        let workers = std::thread::available_parallelism().map_or(4, |n| n.get());
        PoolConfig {
            workers,
            channel_capacity: workers,
        }
    }
}

/// Messages to the dispatcher.
pub(crate) enum Ctrl {
    Add(Arc<Backup>),
    Done(u64),
    Cancel(u64),
    Shutdown,
}

/// One block to run.
pub(crate) struct Job {
    backup: Arc<Backup>,
    block: usize,
}

/// The worker pool. Dropping it cancels running backups and joins its threads.
pub struct WorkerPool {
    ctrl: Sender<Ctrl>,
    threads: Vec<JoinHandle<()>>,
    next_id: AtomicU64,
}

impl WorkerPool {
    /// Starts the dispatcher and the workers.
    pub fn new(config: PoolConfig) -> WorkerPool {
        let (ctrl, ctrl_rx) = unbounded();
        let (jobs, jobs_rx) = bounded(config.channel_capacity.max(1));
        let mut threads = vec![std::thread::Builder::new()
            .name("blocks-dispatch".into())
            .spawn(move || dispatch(ctrl_rx, jobs))
            .expect("spawn dispatcher")];
        for n in 0..config.workers.max(1) {
            let (rx, ctrl) = (jobs_rx.clone(), ctrl.clone());
            let t = std::thread::Builder::new()
                .name(format!("blocks-worker-{n}"))
                .spawn(move || work(rx, ctrl));
            threads.push(t.expect("spawn worker"));
        }
        WorkerPool {
            ctrl,
            threads,
            next_id: AtomicU64::new(1),
        }
    }

    /// Starts a backup of `plan`; returns at once.
    ///
    /// # Errors
    /// [`StartError`] when the archive cannot be created, the exec template is unusable or
    /// the pool has shut down.
    pub fn start(&self, plan: Plan, config: BackupConfig) -> Result<BackupHandle, StartError> {
        let t = &config.exec_template;
        if t.is_empty() || !t.iter().any(|p| p.contains("{command}")) {
            return Err(StartError::Template {
                template: t.clone(),
            });
        }
        let tar = archive::create(&config.archive_path)?;
        let (wtx, wrx) = bounded(archive::QUEUE);
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let backup = Arc::new(Backup::new(id, plan, config, wtx));
        archive::spawn_writer(backup.clone(), tar, wrx);
        if backup.plan.block_count() == 0 {
            backup.account(0);
        } else if self.ctrl.send(Ctrl::Add(backup.clone())).is_err() {
            backup.canceled.store(true, Ordering::Release);
            return Err(StartError::PoolStopped);
        }
        Ok(BackupHandle {
            backup,
            ctrl: self.ctrl.clone(),
        })
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        let _ = self.ctrl.send(Ctrl::Shutdown);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A running backup as the dispatcher sees it.
struct Slot {
    backup: Arc<Backup>,
    next: usize,
    in_flight: usize,
}

impl Slot {
    fn eligible(&self) -> bool {
        let ordered = self.backup.plan.ordered_block_count();
        self.next < self.backup.plan.block_count()
            && (ordered == 0 || self.next > ordered || self.in_flight == 0)
    }

    fn finished(&self) -> bool {
        self.next >= self.backup.plan.block_count() && self.in_flight == 0
    }

    /// Skips every block not handed out yet.
    fn cancel(&mut self) {
        let total = self.backup.plan.block_count();
        for b in self.next..total {
            self.backup
                .skip_block(b, "backup canceled before the block started");
        }
        let skipped = total - self.next.min(total);
        self.next = total;
        self.backup.account(skipped);
    }
}

#[derive(Default)]
struct Sched {
    slots: Vec<Slot>,
    cursor: usize,
}

impl Sched {
    /// The next block, round-robin over the backups that may hand one out.
    fn pick(&mut self) -> Option<Job> {
        let n = self.slots.len();
        for k in 0..n {
            let i = (self.cursor + k) % n;
            let slot = &mut self.slots[i];
            if slot.eligible() {
                self.cursor = (i + 1) % n;
                slot.next += 1;
                slot.in_flight += 1;
                return Some(Job {
                    backup: slot.backup.clone(),
                    block: slot.next - 1,
                });
            }
        }
        None
    }

    fn slot(&mut self, id: u64) -> Option<usize> {
        self.slots.iter().position(|s| s.backup.id == id)
    }

    fn retire(&mut self, i: usize) {
        if self.slots[i].finished() {
            self.slots.remove(i);
            if i < self.cursor {
                self.cursor -= 1;
            }
            self.cursor = if self.slots.is_empty() {
                0
            } else {
                self.cursor % self.slots.len()
            };
        }
    }

    fn handle(&mut self, msg: Ctrl, staged: &mut Option<Job>) -> bool {
        match msg {
            Ctrl::Add(b) => self.slots.push(Slot {
                backup: b,
                next: 0,
                in_flight: 0,
            }),
            Ctrl::Done(id) => {
                if let Some(i) = self.slot(id) {
                    self.slots[i].in_flight -= 1;
                    self.retire(i);
                }
            }
            Ctrl::Cancel(id) => self.cancel(id, staged),
            Ctrl::Shutdown => {
                let ids: Vec<u64> = self.slots.iter().map(|s| s.backup.id).collect();
                for id in ids {
                    self.cancel(id, staged);
                }
                return false;
            }
        }
        true
    }

    fn cancel(&mut self, id: u64, staged: &mut Option<Job>) {
        let Some(i) = self.slot(id) else { return };
        self.slots[i].backup.canceled.store(true, Ordering::Release);
        if staged.as_ref().is_some_and(|j| j.backup.id == id) {
            let job = staged.take().expect("checked");
            self.slots[i].next = job.block;
            self.slots[i].in_flight -= 1;
        }
        self.slots[i].cancel();
        self.retire(i);
    }
}

/// The dispatcher: stages the next job and offers it to the channel while listening for
/// control messages, so a cancel or a new backup is seen even when the channel is full.
fn dispatch(ctrl: Receiver<Ctrl>, jobs: Sender<Job>) {
    let mut sched = Sched::default();
    let mut staged: Option<Job> = None;
    loop {
        if staged.is_none() {
            staged = sched.pick();
        }
        let msg = match staged.take() {
            None => match ctrl.recv() {
                Ok(m) => m,
                Err(_) => return,
            },
            Some(job) => {
                let mut sel = Select::new();
                let recv = sel.recv(&ctrl);
                sel.send(&jobs);
                let op = sel.select();
                if op.index() != recv {
                    if op.send(&jobs, job).is_err() {
                        return;
                    }
                    continue;
                }
                staged = Some(job);
                match op.recv(&ctrl) {
                    Ok(m) => m,
                    Err(_) => return,
                }
            }
        };
        if !sched.handle(msg, &mut staged) {
            return;
        }
    }
}

/// A worker: runs jobs until the dispatcher is gone.
fn work(jobs: Receiver<Job>, ctrl: Sender<Ctrl>) {
    for job in jobs {
        let b = &job.backup;
        if b.is_canceled() {
            b.skip_block(job.block, "backup canceled before the block started");
        } else if std::panic::catch_unwind(AssertUnwindSafe(|| block::run(b, job.block))).is_err() {
            block::record_panic(b, job.block);
        }
        let _ = ctrl.send(Ctrl::Done(b.id));
        b.account(1);
    }
}

/// Runs `plan` on a private pool of `workers` and waits for it: for tools and tests.
///
/// # Errors
/// See [`WorkerPool::start`].
pub fn run_to_completion(
    plan: Plan,
    config: BackupConfig,
    workers: usize,
) -> Result<crate::BackupResult, StartError> {
    let pool = WorkerPool::new(PoolConfig {
        workers,
        channel_capacity: workers,
    });
    let handle = pool.start(plan, config)?;
    Ok(handle.wait())
}
