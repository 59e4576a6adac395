//! The processes of a failover test: `lockgate run` wrappers and `lockgate agent`s pointed
//! at every replica URL (comma-separated `LOCKGATE_SERVER`), and the test's own client.

use super::records;
use crate::harness::{eventually, BIN};
use lockgate_api::{JobQuery, JobView};
use lockgate_client::Client;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `lockgate run` whose command records itself under `key`.
pub struct Wrapper {
    pub key: String,
    report: PathBuf,
    err: PathBuf,
    child: Child,
}

impl Wrapper {
    /// `lockgate run --attr datastore=DS --idempotency-key KEY -- sh -c RECORD; sleep SECS`
    /// against `servers` (comma-separated), its report and stderr in `dir`.
    pub fn spawn(
        servers: &str,
        token: &str,
        dir: &Path,
        key: &str,
        ds: &str,
        secs: &str,
    ) -> Wrapper {
        let report = dir.join(format!("{key}.json"));
        let err = dir.join(format!("{key}.err"));
        let script = records::script(&dir.join("records"), key, ds, secs);
        let child = Command::new(BIN)
            .args([
                "run",
                "--kind",
                "backup",
                "--attr",
                &format!("datastore={ds}"),
            ])
            .args([
                "--idempotency-key",
                key,
                "--connect-timeout",
                "60s",
                "--report",
            ])
            .arg(&report)
            .args(["--", "sh", "-c", &script])
            .env("LOCKGATE_SERVER", servers)
            .env("LOCKGATE_TOKEN", token)
            .env("LOCKGATE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        Wrapper {
            key: key.into(),
            report,
            err,
            child,
        }
    }

    /// Waits for the exit; asserts success and returns the job of the final report.
    pub fn finish(mut self) -> JobView {
        let status = self.child.wait().unwrap();
        let err = std::fs::read_to_string(&self.err).unwrap_or_default();
        assert!(
            status.success(),
            "wrapper {} exited {status}: {err}",
            self.key
        );
        let text = std::fs::read_to_string(&self.report)
            .unwrap_or_else(|e| panic!("wrapper {}: no report ({e}): {err}", self.key));
        serde_json::from_str(&text).unwrap()
    }
}

impl Drop for Wrapper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `lockgate agent` whose handler `move` records itself as `a<job id>` on the
/// job's datastore and lasts `attr.s` seconds.
pub struct Agent {
    child: Child,
}

impl Agent {
    /// Starts the agent for `node` with its own bound token; waits until it is ready.
    pub fn start(admin: &Client, servers: &str, dir: &Path, node: &str) -> Agent {
        let token = crate::harness::agent_token(admin, node);
        let script = records::script(
            &dir.join("records"),
            "a{job.id}",
            "{attr.datastore}",
            "{attr.s}",
        );
        let cfg = dir.join(format!("agent-{node}.toml"));
        let config = format!(
            "[agent]\ngrace = \"500ms\"\n\n[handlers.move]\nrun = [\"sh\", \"-c\", {}]\n",
            toml_string(&script)
        );
        std::fs::write(&cfg, config).unwrap();
        let log = std::fs::File::create(dir.join(format!("agent-{node}.log"))).unwrap();
        let child = Command::new(BIN)
            .args(["agent", "--node", node, "--config"])
            .arg(&cfg)
            .env("LOCKGATE_SERVER", servers)
            .env("LOCKGATE_TOKEN", &token)
            .env("LOCKGATE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let ready = eventually(Duration::from_secs(20), || {
            admin.node(node).is_ok_and(|n| n.state == "ready")
        });
        assert!(ready, "agent {node} did not register");
        Agent { child }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

/// A movable agent job of kind `move` on `ds` lasting `secs`.
pub fn agent_job(ds: &str, secs: &str, key: &str) -> lockgate_api::SubmitRequest {
    lockgate_api::SubmitRequest {
        kind: "move".into(),
        attrs: [("datastore", ds), ("s", secs)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        node_selector: Some(String::new()),
        executor: Some(lockgate_core::policy::Executor::Agent),
        idempotency_key: Some(key.into()),
        ..Default::default()
    }
}

/// Every job the service holds (following pages).
pub fn all_jobs(c: &Client) -> Vec<JobView> {
    let mut all = Vec::new();
    let mut q = JobQuery {
        limit: Some(1000),
        ..Default::default()
    };
    loop {
        let page = c.jobs(&q).unwrap();
        all.extend(page.jobs);
        match page.next {
            Some(n) => q.after = Some(n),
            None => return all,
        }
    }
}
