//! Every JSON request body the server accepts, read the way the server reads it
//! (`lockgate_server::error::parse_json`), then checked the way the server checks it
//! through public functions. Each input is tried as every body type.
//!
//! Properties, per body type, for a body that parses:
//! - it serialises and re-parses to an equal value;
//! - `SubmitRequest`: turned into a `JobSpec` as the event loop does and submitted to an
//!   engine under `examples/mixed/policy.toml`, it is either refused naming a field or
//!   accepted as a job with its kind and attributes, the engine's invariants hold, the
//!   job's `JobView` round-trips, and an idempotent resubmission returns the same job;
//! - `FinishRequest`: against a leased job, it succeeds exactly when its token is the
//!   lease's, ending the job in the outcome's state;
//! - `NodeRegister`: registered, the node carries its labels and the invariants hold;
//! - `ScheduleRequest`: validated with `lockgate_server::schedules::validate`, the
//!   request rebuilt from the result (`ScheduleRequest::from_spec`, what `GET` shows)
//!   validates to the same schedule, and its runner's next time is in the future;
//! - `BackupRequest`: a name `check_backup_name` accepts is one path component;
//! - `TokenCreate`: its role's name parses back to the role;
//! - `PUT /v1/policy` JSON: a policy that validates round-trips through its JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockgate_api::{
    check_backup_name, BackupRequest, FinishRequest, JobView, LeaseRequest, NodeRegister, Role,
    ScheduleRequest, SubmitRequest, TokenCreate,
};
use lockgate_core::engine::{NodeRegistration, SubmitError};
use lockgate_core::schedule::Runner;
use lockgate_core::{Engine, JobSpec, Mode, Policy, Timestamp};
use lockgate_server::error::parse_json;
use serde::{de::DeserializeOwned, Serialize};
use std::fmt::Debug;
use std::sync::OnceLock;
use std::time::Duration;

const NOW: Timestamp = Timestamp(1_711_800_000_000);

fn policy() -> &'static Policy {
    static P: OnceLock<Policy> = OnceLock::new();
    P.get_or_init(|| {
        Policy::from_toml(include_str!("../../examples/mixed/policy.toml"), None)
            .expect("the example policy validates")
    })
}

fuzz_target!(|data: &[u8]| {
    if let Some(req) = parsed::<SubmitRequest>(data) {
        submit(req);
    }
    if let Some(req) = parsed::<FinishRequest>(data) {
        finish(req);
    }
    parsed::<LeaseRequest>(data);
    if let Some(reg) = parsed::<NodeRegister>(data) {
        node(reg);
    }
    if let Some(req) = parsed::<ScheduleRequest>(data) {
        schedule(req);
    }
    if let Some(req) = parsed::<BackupRequest>(data) {
        if check_backup_name(&req.name).is_ok() {
            assert!(
                !req.name.contains('/') && !req.name.starts_with('.'),
                "{:?} would leave the backups directory",
                req.name
            );
        }
    }
    if let Some(req) = parsed::<TokenCreate>(data) {
        assert_eq!(Role::parse(req.role.as_str()), Some(req.role));
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(p) = Policy::from_json(text) {
            let json = p.to_json_value().to_string();
            assert_eq!(Policy::from_json(&json).as_ref(), Ok(&p), "{json}");
        }
    }
});

/// The body parsed as the server parses it, after checking it round-trips.
fn parsed<T: DeserializeOwned + Serialize + PartialEq + Debug>(data: &[u8]) -> Option<T> {
    let v: T = parse_json(data).ok()?;
    let bytes = serde_json::to_vec(&v).expect("a request serialises");
    let again: T = parse_json(&bytes).unwrap_or_else(|e| {
        panic!(
            "{v:?} written as {:?} does not parse: {e:?}",
            String::from_utf8_lossy(&bytes)
        )
    });
    assert_eq!(
        again,
        v,
        "round trip through {:?}",
        String::from_utf8_lossy(&bytes)
    );
    Some(v)
}

/// `SubmitRequest` -> `JobSpec`, with the conversion the server uses (owner from the token).
fn spec(req: SubmitRequest, owner: &str) -> Option<JobSpec> {
    req.into_spec(owner.to_string()).ok()
}

fn submit(req: SubmitRequest) {
    if req.idempotency_key.as_deref() == Some("") {
        return; // refused by the server before the engine sees it
    }
    let Some(spec) = spec(req.clone(), "fuzz") else {
        return;
    };
    let mut engine = Engine::new(policy().clone(), Mode::Indexed);
    match engine.submit(spec.clone(), NOW) {
        Err(SubmitError::Invalid { field, message }) => {
            assert!(!field.is_empty() && !message.is_empty(), "{req:?}");
        }
        Ok(s) => {
            assert!(!s.existing);
            assert_eq!(s.job.kind, req.kind);
            assert_eq!(s.job.owner, "fuzz");
            for (k, v) in &req.attrs {
                assert_eq!(s.job.attrs.get(k), Some(v.as_str()), "{req:?}");
            }
            engine
                .check_invariants()
                .unwrap_or_else(|e| panic!("{req:?}: {e}"));
            let view = JobView::from_job(&s.job, Duration::from_secs(30));
            let json = serde_json::to_string(&view).expect("a view serialises");
            let back: JobView = serde_json::from_str(&json).expect("a view parses");
            assert_eq!(back, view);
            if spec.idempotency_key.is_some() {
                let again = engine
                    .submit(spec, NOW)
                    .expect("a resubmission is accepted");
                assert!(again.existing && again.job.id == s.job.id, "{req:?}");
            }
        }
    }
}

fn finish(req: FinishRequest) {
    let mut engine = Engine::new(Policy::unlimited(), Mode::Indexed);
    let job = JobSpec {
        kind: "backup".into(),
        owner: "fuzz".into(),
        ..JobSpec::default()
    };
    let job = engine
        .submit(job, NOW)
        .expect("a plain job is accepted")
        .job;
    let Some(lease) = job.lease else {
        panic!("a client job under the empty policy is leased at once: {job:?}");
    };
    let result = engine.finish(job.id, req.token, req.outcome, req.message.clone(), NOW);
    assert_eq!(
        result.is_ok(),
        req.token == lease.token,
        "{req:?} against {lease:?}"
    );
    if let Ok(j) = result {
        assert_eq!(j.state, req.outcome.state());
    }
    engine
        .check_invariants()
        .unwrap_or_else(|e| panic!("{req:?}: {e}"));
}

fn node(reg: NodeRegister) {
    let mut engine = Engine::new(policy().clone(), Mode::Indexed);
    let reg = NodeRegistration {
        name: "fuzz-node".into(),
        labels: reg.labels,
        resources: reg.resources,
        kinds: reg.kinds,
        instance: reg.instance,
    };
    let node = engine.register_node(reg.clone(), NOW);
    assert_eq!(node.labels, reg.labels);
    engine
        .check_invariants()
        .unwrap_or_else(|e| panic!("{reg:?}: {e}"));
}

fn schedule(req: ScheduleRequest) {
    let Ok(spec) = lockgate_server::schedules::validate(&req, policy()) else {
        return;
    };
    let shown = ScheduleRequest::from_spec(&spec);
    let again = lockgate_server::schedules::validate(&shown, policy())
        .unwrap_or_else(|e| panic!("{req:?} validated, but as shown ({shown:?}): {e:?}"));
    assert_eq!(again, spec, "{req:?} shown as {shown:?}");
    if let Ok(runner) = Runner::new(spec, "UTC") {
        if let Some(next) = runner.next_after(NOW) {
            assert!(next > NOW, "{req:?}: next {next:?}");
        }
    }
}
