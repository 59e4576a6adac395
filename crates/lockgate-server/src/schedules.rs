//! Periodic schedules (design `schedules.md`) in the server.
//!
//! - [`server_zone`]: the zone for times without one (`TZ`, else `/etc/localtime`, else
//!   UTC; `lockgate_host::zone`, read at the edge, never in `lockgate-core`).
//! - [`validate`]: a schedule created through the API is checked with the policy's own
//!   rules (the same validator as a `[[schedule]]` table, against the active policy's pools),
//!   plus a stricter name rule (it becomes a URL path segment).
//!
//! The loop side is in `planner.rs` (planning runs at their planned times, the history)
//! and `ops.rs` (the API operations, [`ScheduleOp`]); the handlers in `routes.rs`;
//! `after.rs` makes a run wait for another schedule's run (`after = "<name>"`).
//!
//! # Policy-file schedules and API-created ones
//! Both live in one namespace: a name belongs to at most one schedule. `POST /v1/schedules`
//! with a name the policy uses is refused (409), and so is a policy (`PUT /v1/policy`,
//! SIGHUP, start) that would take the name of an API-created schedule. Policy schedules
//! are changed in the policy only: `DELETE /v1/schedules/{name}` answers 409 for them.

mod after;
mod ops;
mod planner;
mod routes;

pub(crate) use planner::Schedules;
pub(crate) use routes::routes;
pub(crate) use routes::ApiDoc;

use crate::error::ApiError;
use crate::nodes::Removed;
use crate::protocol::Reply;
use lockgate_api::{ScheduleList, ScheduleRequest, ScheduleView};
use lockgate_core::policy::ScheduleSpec;
use lockgate_core::Policy;

/// A schedule operation of the API.
#[derive(Debug)]
pub enum ScheduleOp {
    /// `POST /v1/schedules`.
    Create(Box<ScheduleRequest>, Reply<ScheduleView>),
    /// `GET /v1/schedules`.
    List(Reply<ScheduleList>),
    /// `GET /v1/schedules/{name}?limit=N`.
    Get(String, Option<usize>, Reply<ScheduleView>),
    /// `DELETE /v1/schedules/{name}`.
    Delete(String, Reply<Removed>),
}

/// A name the new policy takes from an API-created schedule: its index and name.
fn taken_names(
    policy: &Policy,
    by_name: &std::collections::BTreeMap<String, planner::Sched>,
) -> Option<(usize, String)> {
    policy.schedules.iter().enumerate().find_map(|(i, s)| {
        by_name
            .get(&s.name)
            .filter(|x| x.source == lockgate_store::ScheduleSource::Api)
            .map(|_| (i, s.name.clone()))
    })
}

fn taken_message(name: &str) -> String {
    format!(
        "{name:?} is already the name of a schedule created through the API; rename this one, or remove the other first (lockgate schedule rm {name})"
    )
}

/// The server's zone: [`lockgate_host::zone::local_zone_checked`], logging why it fell back
/// to UTC.
pub fn server_zone() -> String {
    let (zone, why) = lockgate_host::zone::local_zone_checked();
    match why {
        Some(why) => tracing::warn!("schedules: {why}"),
        None => tracing::info!("schedules: times without a zone are {zone} times"),
    }
    zone
}

/// The JSON field of a policy field path inside one `[[schedule]]` (`schedule[0].jitter`
/// -> `jitter_s`).
fn api_field(policy_field: &str) -> String {
    let f = policy_field
        .strip_prefix("schedule[0]")
        .map(|f| f.trim_start_matches('.'))
        .unwrap_or(policy_field);
    let seconds = [
        "max_start_delay",
        "jitter",
        "retry.interval",
        "job.max_wait",
        "job.max_run",
    ];
    if seconds.contains(&f) {
        format!("{f}_s")
    } else if f.is_empty() {
        "schedule".into()
    } else {
        f.to_string()
    }
}

/// Checks an API schedule with the rules of a policy `[[schedule]]` under `policy` (its pools
/// and kinds), giving the validated schedule.
///
/// # Errors
/// 422 naming the JSON field: a bad name, expression (the part of it to fix), duration,
/// selector, cost pool, `duplicates` or `misfire` value. `after` is passed through: the
/// loop checks it against every schedule (`after.rs`).
pub fn validate(req: &ScheduleRequest, policy: &Policy) -> Result<ScheduleSpec, ApiError> {
    if !lockgate_core::schedule::valid_name(&req.name) {
        return Err(ApiError::invalid(
            "name",
            format!(
                "invalid schedule name {:?}: {}",
                req.name,
                lockgate_core::schedule::NAME_RULE
            ),
        ));
    }
    let mut raw = req
        .to_raw()
        .map_err(|e| ApiError::invalid(e.field.clone(), e.to_string()))?;
    // Checked by the loop against every schedule, the API's as well as the policy's.
    let after = raw.after.take();
    let mut doc = policy.raw.clone();
    doc.schedule = vec![raw];
    let checked = Policy::from_raw(doc).map_err(|e| {
        let field = api_field(&e.field);
        ApiError::invalid(field.clone(), format!("{field}: {}", e.message))
    })?;
    let mut spec = checked
        .schedules
        .into_iter()
        .next()
        .expect("one schedule was validated");
    spec.after = after;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_named_as_the_api_writes_them() {
        assert_eq!(api_field("schedule[0].when"), "when");
        assert_eq!(api_field("schedule[0].jitter"), "jitter_s");
        assert_eq!(api_field("schedule[0].retry.interval"), "retry.interval_s");
        assert_eq!(api_field("schedule[0].job.cost.tape"), "job.cost.tape");
    }
}
