//! `GET /v1/forecast/gantt`: the cached forecast's p50 run as a picture, drawn by the
//! simulator's own writer ([`lockgate_sim::gantt`]), for the dashboard's overview card.
//!
//! # Invariants
//! - Nothing here runs a forecast: the picture is drawn from a published snapshot (the
//!   one `GET /v1/forecast` would answer from), off the loop.
//! - Times are milliseconds from the snapshot's `computed_at`; a job admitted before it
//!   starts at 0. Only jobs arriving within `hours` are drawn, cut at that horizon.
//! - The markup comes only from [`lockgate_sim::svg::Svg`], so it is well-formed XML.

use super::routes::current;
use super::snapshot::{Entry, Snapshot};
use super::ForecastOp;
use crate::error::ApiError;
use crate::http::{AppState, Auth, Q};
use axum::extract::State;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use lockgate_api::{time, ForecastQuery};
use lockgate_core::job::JobId;
use lockgate_sim::gantt::{gantt_labelled, Labels};
use lockgate_sim::input::WorkloadJob;
use lockgate_sim::sim::{JobRecord, NodeSlots, Run};
use lockgate_sim::svg::{a, Svg};
use serde::Deserialize;

/// The query of `GET /v1/forecast/gantt`.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct GanttQuery {
    /// Ignored: lets a page ask again past a cache (`?at=` its clock).
    #[serde(default)]
    #[allow(dead_code)] // read by serde only, so that `?at=` is accepted
    pub at: Option<String>,
    /// Hours ahead of the forecast's start drawn (default 6, from 0.1 to 168).
    #[serde(default)]
    #[param(minimum = 0.1, maximum = 168)]
    pub hours: Option<f64>,
}

/// Default of [`GanttQuery::hours`].
const DEFAULT_HOURS: f64 = 6.0;

#[utoipa::path(get, path = "/v1/forecast/gantt", tag = "forecast", params(GanttQuery),
    responses((status = 200, description = "The cached forecast's p50 run as an SVG picture: one group of lanes per node, a bar per job named by its id, a time axis from the forecast's start, a legend by kind, and each limited scope's occupancy (admin, viewer)",
        body = String, content_type = "image/svg+xml"),
        (status = 422, description = "`invalid_field` naming `hours`: outside 0.1 to 168",
            body = lockgate_api::ErrorBody)))]
pub(super) async fn gantt_svg(
    State(st): State<AppState>,
    Auth(p): Auth,
    Q(q): Q<GanttQuery>,
) -> Result<Response, ApiError> {
    let hours = q.hours.unwrap_or(DEFAULT_HOURS);
    if !(0.1..=168.0).contains(&hours) {
        return Err(ApiError::invalid(
            "hours",
            format!("expected hours from 0.1 to 168, got {hours}"),
        ));
    }
    let asked = ForecastQuery::default();
    let cached = st.lp.ask(p, |r| ForecastOp::Get(asked, r)).await?;
    let snap = current(cached).await?;
    let svg = tokio::task::spawn_blocking(move || draw(&snap, hours))
        .await
        .map_err(|e| ApiError::internal(format!("forecast gantt: {e}")))?;
    let mut r = svg.into_response();
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("image/svg+xml"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    Ok(r)
}

/// The picture of `snap`'s p50 run, `hours` ahead.
pub(crate) fn draw(snap: &Snapshot, hours: f64) -> String {
    let origin = snap.computed_at.0;
    let horizon = (hours * 3_600_000.0) as u64;
    let mut jobs = Vec::new();
    let mut run = Run {
        jobs: Vec::new(),
        scopes: Vec::new(),
        nodes: Vec::new(),
    };
    let mut labels = Labels {
        jobs: Vec::new(),
        axis: Some(format!("from {}", time::format(snap.computed_at))),
        unadmitted: Some(format!("not started within {hours} h")),
    };
    let policy = snap.input.state.policy();
    for (entry, id) in snap.entries() {
        let arrives = entry.arrives().map_or(0, |t| t.0.saturating_sub(origin));
        if arrives >= horizon {
            continue;
        }
        let f = id.and_then(|id| snap.p50.jobs.get(&id)).copied();
        let at = |t: Option<lockgate_core::Timestamp>| {
            t.map(|t| t.0.saturating_sub(origin))
                .filter(|&ms| ms < horizon)
        };
        let admitted = at(f.and_then(|f| f.start));
        let finished = admitted.and(
            f.and_then(|f| f.end)
                .map(|t| t.0.saturating_sub(origin).min(horizon)),
        );
        let node = entry.key_value("node").map(str::to_string);
        if let Some(n) = &node {
            if !run.nodes.iter().any(|s| &s.name == n) {
                run.nodes.push(NodeSlots {
                    name: n.clone(),
                    slots: slots_of(snap, n),
                });
            }
        }
        labels.jobs.push(label(&entry, id));
        jobs.push(workload_job(&entry, arrives));
        run.jobs.push(JobRecord {
            submitted_ms: arrives,
            admitted_ms: admitted,
            started_ms: admitted,
            // Still running, or still waiting, at the horizon: drawn up to it (a job that
            // waits past it is a grey band across the whole picture).
            finished_ms: finished.or(Some(horizon)),
            node,
            outcome: None,
            run_alone_ms: None,
        });
    }
    if jobs.is_empty() {
        return empty(hours);
    }
    run.nodes.sort_by(|x, y| x.name.cmp(&y.name));
    let title = "Forecast (p50)";
    gantt_labelled(policy, &jobs, &run, title, &labels).svg
}

/// A registered node's number (slots) under the snapshot's policy; `None` when it is
/// unlimited or the node is not registered.
fn slots_of(snap: &Snapshot, node: &str) -> Option<u32> {
    let state = &snap.input.state;
    let record = state.nodes().iter().find(|r| r.registration.name == node)?;
    state.policy().node_number(&record.registration.labels).0
}

/// A job's name in the picture: its id, or its schedule for a run not yet submitted.
fn label(entry: &Entry<'_>, id: Option<JobId>) -> String {
    match (entry, id) {
        (Entry::Live(j), _) => format!("job {}", j.id),
        (Entry::Planned(_), Some(id)) => format!("job {id} (planned)"),
        (Entry::Planned(a), None) => format!("{} (planned)", a.schedule),
    }
}

/// The workload line the simulator's picture reads a job from (kind, attributes,
/// owner, node and cost: what its scopes and colour depend on).
fn workload_job(entry: &Entry<'_>, at_ms: u64) -> WorkloadJob {
    let (kind, attrs, owner, priority, node, node_selector, cost, two_stage) = match entry {
        Entry::Live(j) => (
            j.kind.clone(),
            j.attrs.to_map(),
            j.owner.clone(),
            Some(j.priority),
            entry.key_value("node").map(str::to_string),
            None,
            Some(j.cost.clone()),
            Some(j.two_stage),
        ),
        Entry::Planned(a) => (
            a.spec.kind.clone(),
            a.spec.attrs.clone(),
            a.spec.owner.clone(),
            a.spec.priority,
            a.spec.node.clone(),
            a.spec.node_selector.clone(),
            a.spec.cost.clone(),
            a.spec.two_stage,
        ),
    };
    WorkloadJob {
        at: at_ms as f64 / 1000.0,
        kind,
        attrs,
        owner: Some(owner),
        priority,
        node,
        node_selector,
        two_stage,
        prepare_s: None,
        run_s: 0.0,
        cost,
        size_mb: None,
    }
}

/// The picture of a forecast with nothing in it.
fn empty(hours: f64) -> String {
    let mut svg = Svg::new(600.0, 60.0);
    svg.leaf(
        "rect",
        &[
            a("width", "100%"),
            a("height", "100%"),
            a("fill", "#ffffff"),
        ],
        None,
    );
    let text = format!("Nothing queued or running, and no scheduled run in the next {hours} h.");
    svg.text(
        10.0,
        34.0,
        &[a("class", "empty"), a("font-size", 14), a("fill", "#333")],
        &text,
    );
    svg.finish()
}
