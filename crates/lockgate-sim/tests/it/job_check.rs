//! One definition of a valid job: the engine's submit, a schedule's job in the policy and a
//! workload line of the simulator refuse the same specs, with the same field and message
//! (all three go through `JobSpec::check`).

use lockgate_core::job::{JobSpec, SubmitError};
use lockgate_core::{Engine, Mode, Policy, Timestamp};
use lockgate_sim::{parse_nodes, parse_workload, simulate};
use serde_json::json;

/// (case, the job as a JSON object, field, start of the message).
const CASES: &[(&str, &str, &str, &str)] = &[
    (
        "empty kind",
        r#"{"kind": ""}"#,
        "kind",
        "expected a job kind",
    ),
    (
        "kind with a space",
        r#"{"kind": "a b"}"#,
        "kind",
        "expected a job kind in Kubernetes label-key syntax",
    ),
    (
        "kind with a NUL byte",
        r#"{"kind": "a\u0000b"}"#,
        "kind",
        "expected a job kind in Kubernetes label-key syntax",
    ),
    (
        "reserved kind",
        r#"{"kind": "a", "attrs": {"kind": "x"}}"#,
        "attrs.kind",
        "`kind` is reserved",
    ),
    (
        "reserved owner",
        r#"{"kind": "a", "attrs": {"owner": "x"}}"#,
        "attrs.owner",
        "`owner` is reserved",
    ),
    (
        "reserved node",
        r#"{"kind": "a", "attrs": {"node": "x"}}"#,
        "attrs.node",
        "`node` is reserved",
    ),
    (
        "name with a comma",
        r#"{"kind": "a", "attrs": {"a,b": "x"}}"#,
        "attrs.a,b",
        "expected an attribute name in Kubernetes label-key syntax",
    ),
    (
        "name with a bang",
        r#"{"kind": "a", "attrs": {"a!": "x"}}"#,
        "attrs.a!",
        "expected an attribute name in Kubernetes label-key syntax",
    ),
    (
        "value with a space",
        r#"{"kind": "a", "attrs": {"a": "x y"}}"#,
        "attrs.a",
        "attribute values may not contain whitespace",
    ),
    (
        "value with a control character",
        r#"{"kind": "a", "attrs": {"a": "x\u0007"}}"#,
        "attrs.a",
        "attribute values may not contain whitespace or control characters",
    ),
    (
        "empty node",
        r#"{"kind": "a", "node": " "}"#,
        "node",
        "expected a node name",
    ),
    (
        "pinned and movable",
        r#"{"kind": "a", "node": "n1", "node_selector": ""}"#,
        "node_selector",
        "a job is either pinned",
    ),
    (
        "bad selector",
        r#"{"kind": "a", "node_selector": "zone in eu"}"#,
        "node_selector",
        "invalid label selector",
    ),
];

fn engine_error(job: &serde_json::Value) -> SubmitError {
    let spec: JobSpec = serde_json::from_value(job.clone()).unwrap();
    let mut e = Engine::new(Policy::unlimited(), Mode::Indexed);
    e.submit(spec, Timestamp(0)).unwrap_err()
}

fn toml_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(m) => {
            let fields: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{} = {}", json!(k), toml_value(v)))
                .collect();
            format!("{{ {} }}", fields.join(", "))
        }
        other => other.to_string(),
    }
}

#[test]
fn engine_schedules_and_simulator_refuse_the_same_jobs() {
    let nodes = parse_nodes(r#"[{"name": "n1"}]"#, "nodes.json").unwrap();
    for &(case, job, field, message) in CASES {
        let job: serde_json::Value = serde_json::from_str(job).unwrap();
        let SubmitError::Invalid {
            field: got_field,
            message: got_message,
        } = engine_error(&job);
        assert_eq!(got_field, field, "{case}: engine field");
        assert!(
            got_message.starts_with(message),
            "{case}: engine: {got_message}"
        );

        let toml = format!(
            "[[schedule]]\nname = \"s\"\nwhen = \"daily\"\njob = {}\n",
            toml_value(&job)
        );
        let e = Policy::from_toml(&toml, None).unwrap_err();
        assert_eq!(e.message, got_message, "{case}: policy message ({toml})");
        assert_eq!(e.line, Some(4), "{case}: policy line");
        let bare = |f: &str| f.replace(['"', '\''], "");
        assert_eq!(
            bare(&e.field),
            format!("schedule[0].job.{field}"),
            "{case}: policy field"
        );

        let mut line = job.clone();
        line["at"] = json!(0);
        line["run_s"] = json!(1);
        let jobs = parse_workload(&line.to_string(), "jobs.jsonl").unwrap();
        let e = simulate(&Policy::unlimited(), &nodes, &jobs).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("workload job 1: {got_field}: {got_message}"),
            "{case}: simulator"
        );
    }
}

/// A schedule's job used to be validated without the engine's attribute-name rules, so a
/// policy could be accepted and then have every run refused at submit.
#[test]
fn schedule_job_with_an_attribute_name_the_engine_refuses_is_rejected_by_the_policy() {
    let toml = "[[schedule]]\nname = \"s\"\nwhen = \"daily\"\njob = { kind = \"verify\", attrs = { \"vm id\" = \"100\" } }\n";
    let e = Policy::from_toml(toml, Some("lockgate.toml")).unwrap_err();
    assert_eq!(e.line, Some(4));
    assert!(e.field.starts_with("schedule[0].job.attrs"), "{e}");
    assert!(e.message.contains("\"vm id\""), "{e}");
    let toml = "[[schedule]]\nname = \"s\"\nwhen = \"daily\"\njob = { kind = \"verify\", attrs = { group = \"vm 100\" } }\n";
    let e = Policy::from_toml(toml, None).unwrap_err();
    assert_eq!(e.field, "schedule[0].job.attrs.group");
}
