//! Helpers shared by the engine tests.

use lockgate_core::engine::{Engine, Mode, NodeRegistration};
use lockgate_core::job::{JobId, JobSpec, JobState};
use lockgate_core::{Policy, Timestamp};
use std::collections::BTreeMap;

pub fn policy(toml: &str) -> Policy {
    Policy::from_toml(toml, Some("test.toml"))
        .unwrap_or_else(|e| panic!("test policy is invalid: {e}"))
}

pub fn engine(toml: &str) -> Engine {
    Engine::new(policy(toml), Mode::Indexed)
}

pub fn attrs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn spec(kind: &str, pairs: &[(&str, &str)]) -> JobSpec {
    JobSpec {
        kind: kind.into(),
        attrs: attrs(pairs),
        owner: "alice".into(),
        ..JobSpec::default()
    }
}

pub fn submit(e: &mut Engine, s: JobSpec, now: u64) -> JobId {
    e.submit(s, Timestamp(now)).expect("valid job").job.id
}

pub fn state(e: &Engine, id: JobId) -> Option<JobState> {
    e.job(id).map(|j| j.state)
}

pub fn token(e: &Engine, id: JobId) -> u64 {
    e.job(id)
        .and_then(|j| j.lease)
        .expect("admitted job has a lease")
        .token
}

pub fn node(e: &mut Engine, name: &str, labels: &[(&str, &str)], kinds: &[&str], now: u64) {
    e.register_node(
        NodeRegistration {
            name: name.into(),
            labels: attrs(labels),
            resources: BTreeMap::new(),
            kinds: kinds.iter().map(|k| k.to_string()).collect(),
            instance: None,
        },
        Timestamp(now),
    );
}

pub fn count(e: &Engine, s: JobState) -> usize {
    e.jobs().filter(|j| j.state == s).count()
}
