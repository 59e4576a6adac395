//! `POST /v1/notify/{name}/test`: a test message through one target, now (admin).

use super::NotifyOp;
use crate::event_loop::wall_ms;
use crate::http::{ok, ApiResult, AppState, Auth, NoQuery};
use axum::extract::{Path, State};
use axum::routing::post;
use axum::Router;
use lockgate_api::{EventView, NotifyTestResult, Role};
use lockgate_core::Timestamp;
use std::time::Instant;

/// The notification routes' part of the OpenAPI document.
#[derive(utoipa::OpenApi)]
#[openapi(paths(test))]
pub(crate) struct ApiDoc;

/// The notification routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new().route("/v1/notify/{name}/test", post(test))
}

#[utoipa::path(post, path = "/v1/notify/{name}/test", tag = "notify",
    params(("name" = String, Path, description = "The [[notify]] target's name")),
    responses((status = 200, description = "What sending a test event (`type` `notify_test`, `seq` 0) through the target did (admin); `ok` false when it was not delivered", body = NotifyTestResult)))]
async fn test(
    State(st): State<AppState>,
    _: NoQuery,
    Auth(p): Auth,
    Path(name): Path<String>,
) -> ApiResult<NotifyTestResult> {
    p.require(&[Role::Admin], "test a notification target")?;
    let target = st.lp.ask(p, |r| NotifyOp::Target(name.clone(), r)).await?;
    let mut data = serde_json::Map::new();
    data.insert("type".into(), "notify_test".into());
    data.insert("severity".into(), "info".into());
    data.insert("target".into(), name.clone().into());
    data.insert(
        "message".into(),
        format!("a test message through the lockgate notification target {name:?}").into(),
    );
    let view = EventView {
        seq: 0,
        at: lockgate_api::time::format(Timestamp(wall_ms())),
        data,
    };
    let body = serde_json::to_string(&view).expect("events serialize");
    let start = Instant::now();
    let r = super::send::send(&target, &body).await;
    let elapsed_ms = start.elapsed().as_millis() as u64;
    let (ok_, detail) = match r {
        Ok(d) => (true, d),
        Err(d) => (false, d),
    };
    ok(NotifyTestResult {
        target: name,
        ok: ok_,
        detail,
        elapsed_ms,
    })
}
