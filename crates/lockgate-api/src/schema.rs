//! OpenAPI schemas of the engine's enums that the wire types carry (feature `openapi`).
//!
//! `lockgate-core` knows nothing of OpenAPI, so its `JobState`, `Executor`, `Outcome` and
//! `CancelReason`
//! are described here by marker types that a wire type names with
//! `#[schema(value_type = JobStateSchema)]`. Each schema is built from the enum itself
//! (`JobState::ALL`, or every variant through `serde_json`), never from a copied list.
//!
//! # Invariant
//! The `enum` of each schema is exactly the set of serde names of the engine enum: a new
//! variant in core fails to compile here ([`executor_names`], [`outcome_names`] match
//! exhaustively) until it is listed.

use lockgate_core::job::{CancelReason, JobState};
use lockgate_core::policy::Executor;
use lockgate_core::Outcome;
use std::borrow::Cow;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;

/// A string enum schema with a description.
fn string_enum(names: Vec<String>, description: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(names))
        .description(Some(description))
        .into()
}

/// The serde name of a unit variant.
fn wire_name<T: serde::Serialize>(v: T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        other => unreachable!("a unit enum variant serializes as a string, got {other:?}"),
    }
}

/// Every `Executor` as the API writes it.
pub fn executor_names() -> Vec<String> {
    // Exhaustive: a new variant must be added to the list below.
    let _listed = |e: Executor| match e {
        Executor::Client | Executor::Agent => (),
    };
    [Executor::Client, Executor::Agent]
        .into_iter()
        .map(wire_name)
        .collect()
}

/// Every `Outcome` as the API writes it.
pub fn outcome_names() -> Vec<String> {
    let _listed = |o: Outcome| match o {
        Outcome::Succeeded | Outcome::Failed | Outcome::Cancelled => (),
    };
    [Outcome::Succeeded, Outcome::Failed, Outcome::Cancelled]
        .into_iter()
        .map(wire_name)
        .collect()
}

/// The schema of a job's state (`JobState` in the document).
pub struct JobStateSchema;

impl utoipa::PartialSchema for JobStateSchema {
    fn schema() -> RefOr<Schema> {
        let names = JobState::ALL.iter().map(|s| s.as_str().to_string());
        string_enum(names.collect(), "A job's state, in life-cycle order.")
    }
}

impl utoipa::ToSchema for JobStateSchema {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("JobState")
    }
}

/// The schema of who runs a job (`Executor` in the document).
pub struct ExecutorSchema;

impl utoipa::PartialSchema for ExecutorSchema {
    fn schema() -> RefOr<Schema> {
        string_enum(
            executor_names(),
            "Who runs a job: `client` (the submitter holds the lease) or `agent` (the node's agent).",
        )
    }
}

impl utoipa::ToSchema for ExecutorSchema {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Executor")
    }
}

/// The schema of how a holder ends its job (`Outcome` in the document).
pub struct OutcomeSchema;

impl utoipa::PartialSchema for OutcomeSchema {
    fn schema() -> RefOr<Schema> {
        string_enum(outcome_names(), "How a holder ends its job.")
    }
}

impl utoipa::ToSchema for OutcomeSchema {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Outcome")
    }
}

/// Every `CancelReason` as the API writes it.
pub fn cancel_reason_names() -> Vec<String> {
    let _listed = |r: CancelReason| match r {
        CancelReason::Cancel | CancelReason::MaxRun | CancelReason::Preempted => (),
    };
    [
        CancelReason::Cancel,
        CancelReason::MaxRun,
        CancelReason::Preempted,
    ]
    .into_iter()
    .map(wire_name)
    .collect()
}

/// The schema of why a holder is asked to stop (`CancelReason` in the document).
pub struct CancelReasonSchema;

impl utoipa::PartialSchema for CancelReasonSchema {
    fn schema() -> RefOr<Schema> {
        string_enum(
            cancel_reason_names(),
            "Why the holder is asked to stop: a cancel, max_run, or a preemption (the job is queued again).",
        )
    }
}

impl utoipa::ToSchema for CancelReasonSchema {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("CancelReason")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_serde_names() {
        assert_eq!(executor_names(), ["client", "agent"]);
        assert_eq!(outcome_names(), ["succeeded", "failed", "cancelled"]);
        for s in JobState::ALL {
            assert_eq!(wire_name(s), s.as_str());
        }
    }
}
