//! `GET /v1/forecast`: answered from the cached forecast once it reflects the engine as it
//! was when asked (waiting at most [`GET_WAIT`]); another `until` replays that forecast's
//! own state, off the loop.

use super::ops::report;
use super::snapshot::{compute, Snapshot};
use super::{Cached, ForecastOp, FORWARD_BUDGET, GET_WAIT};
use crate::error::ApiError;
use crate::http::{ok, ApiResult, AppState, Auth, Q};
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use lockgate_api::{ForecastQuery, ForecastView};

/// The forecast routes' part of the OpenAPI document (list every handler of [`routes`] here).
#[derive(utoipa::OpenApi)]
#[openapi(paths(forecast, super::gantt::gantt_svg))]
pub(crate) struct ApiDoc;

/// The forecast routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/forecast", get(forecast))
        .route("/v1/forecast/gantt", get(super::gantt::gantt_svg))
}

#[utoipa::path(get, path = "/v1/forecast", tag = "forecast", params(ForecastQuery),
    responses((status = 200, description = "When the queue and the scheduled runs up to `until` are done (p50/p90), which jobs would miss `until`, and the bottleneck scope", body = ForecastView)))]
async fn forecast(
    State(st): State<AppState>,
    Auth(p): Auth,
    Q(q): Q<ForecastQuery>,
) -> ApiResult<ForecastView> {
    let cached = st
        .lp
        .ask(p.clone(), |r| ForecastOp::Get(q.clone(), r))
        .await?;
    let until = cached.until;
    let snap = current(cached).await?;
    let input = match until {
        None => None,
        Some(until) => {
            let from = snap.computed_at;
            let arrivals = st.lp.ask(p, |r| ForecastOp::Plan(from, until, r)).await?;
            let mut input = snap.input.clone();
            (input.arrivals, input.until) = (arrivals, until);
            Some(input)
        }
    };
    let view = tokio::task::spawn_blocking(move || match input {
        None => report(&snap, &q),
        Some(input) => report(&compute(input, FORWARD_BUDGET), &q),
    })
    .await
    .map_err(|e| ApiError::internal(format!("forecast: {e}")))?;
    ok(view)
}

/// The published forecast of at least the generation asked for, or after [`GET_WAIT`] the
/// latest one (503 when there is none yet).
pub(super) async fn current(cached: Cached) -> Result<std::sync::Arc<Snapshot>, ApiError> {
    let Cached {
        mut rx, generation, ..
    } = cached;
    let fresh = |s: &super::Published| s.as_ref().is_some_and(|s| s.generation >= generation);
    let _ = tokio::time::timeout(GET_WAIT, rx.wait_for(fresh)).await;
    let latest = rx.borrow().clone();
    latest.ok_or_else(|| ApiError::unavailable("no forecast computed yet; try again"))
}
