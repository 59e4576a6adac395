//! Issue 12's "Must show" with real processes: a real PostgreSQL cluster of the test's own
//! (`TestCluster`: initdb and pg_ctl in a temporary directory, as the `postgres` user when
//! root), real `lockgate server` processes on it, real `lockgate agent`s and `lockgate run`
//! wrappers whose commands record their own start and end ([`records`]). The checker
//! sweeps those records: no instant over a limit, every acknowledged job ran exactly once,
//! every job done.
//!
//! These tests FAIL where PostgreSQL is missing (CI installs it; see
//! scripts/checks/postgres): a skipped failover test would show nothing.

mod dbloss;
mod hold;
mod leader_crash;
mod paused;
mod procs;
mod records;
mod replicas;

use lockgate_store::postgres::testdb::TestCluster;

/// The limits of every failover test: 8 in all, 2 per datastore.
pub const GLOBAL: i32 = 8;
pub const PER_DATASTORE: i32 = 2;

/// The policy: the limits above and a lease TTL of `ttl_s` seconds.
pub fn policy(ttl_s: u64) -> String {
    format!(
        "[global]\nmax_running = {GLOBAL}\n\n[leases]\nttl = \"{ttl_s}s\"\n\n\
         [[limit]]\nname = \"per-datastore\"\nper = [\"datastore\"]\nmax = {PER_DATASTORE}\n"
    )
}

/// A PostgreSQL cluster of this test's own (it is stopped and started): a failure, not a
/// skip, when PostgreSQL is not installed.
pub fn own_cluster() -> TestCluster {
    TestCluster::start().unwrap_or_else(|e| {
        panic!(
            "the failover tests need PostgreSQL (initdb, pg_ctl; see scripts/checks/postgres): {e}"
        )
    })
}
