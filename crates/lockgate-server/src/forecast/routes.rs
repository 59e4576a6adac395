//! `GET /v1/forecast`.

use super::ops::report;
use super::snapshot::compute;
use super::{ForecastOp, FORWARD_BUDGET};
use crate::error::ApiError;
use crate::http::{ok, ApiResult, AppState, Auth, Q};
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use lockgate_api::{ForecastQuery, ForecastView};

/// The forecast routes' part of the OpenAPI document (list every handler of [`routes`] here).
#[derive(utoipa::OpenApi)]
#[openapi(paths(forecast))]
pub(crate) struct ApiDoc;

/// The forecast routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/forecast", get(forecast))
}

#[utoipa::path(get, path = "/v1/forecast", tag = "forecast", params(ForecastQuery),
    responses((status = 200, description = "When the queue and the scheduled runs up to `until` are done (p50/p90), which jobs would miss `until`, and the bottleneck scope", body = ForecastView)))]
async fn forecast(
    State(st): State<AppState>,
    Auth(p): Auth,
    Q(q): Q<ForecastQuery>,
) -> ApiResult<ForecastView> {
    let input = st.lp.ask(p, |r| ForecastOp::Get(q.clone(), r)).await?;
    let view = tokio::task::spawn_blocking(move || report(&compute(*input, FORWARD_BUDGET), &q))
        .await
        .map_err(|e| ApiError::internal(format!("forecast: {e}")))?;
    ok(view)
}
