//! `/v1/backups`: create (or dry-run), list, show, result, cancel.
//!
//! Who may do what: `admin` everything; `submitter` creates backups and sees and cancels
//! the ones it created; `viewer` reads all; `agent` nothing.
//!
//! `from` is a path on the **server's** filesystem, read by the server process. For an
//! admin, any problem with it (missing, unreadable, a malformed file or item) is a 422
//! `invalid_input` naming the path, file and item, and nothing is recorded or started. For
//! anyone else it must be an existing path inside a backup input root, else 403
//! `input_not_allowed` with one body whatever the path; inside a root the same 422s apply.
//! A `[blocks]` cap exceeded is 422 `input_too_large` naming the cap. A dry run answers
//! `{blocks, refused, warnings}` ([`BackupDryRun`]).

use super::{BackupOp, BackupScope, Backups};
use crate::auth::{authenticate, Principal};
use crate::error::ApiError;
use crate::http::JsonBody;
use crate::jobs::JobOp;
use axum::extract::{Path, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use lockgate_api::{
    check_backup_name, BackupDryBlock, BackupDryRun, BackupList, BackupProgress, BackupRequest,
    BackupState, BackupView, ErrorCode, Role,
};
use lockgate_blocks::{Cancel, LoadError, Plan};
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

/// At most this many input problems are listed in an error message.
const SHOWN_INPUT_ERRORS: usize = 20;

/// State of the backup routes.
#[derive(Clone)]
pub struct Api {
    tokens: crate::auth::Tokens,
    backups: Arc<Backups>,
    /// The dashboard's sessions: a session cookie is a credential here too.
    sessions: crate::ui::Sessions,
}

/// The backup routes' part of the OpenAPI document (list every handler of [`router`] here).
#[derive(utoipa::OpenApi)]
#[openapi(paths(create, list, show, result, cancel))]
pub(crate) struct ApiDoc;

/// The routes, to merge into the main router.
pub fn router(
    tokens: crate::auth::Tokens,
    sessions: crate::ui::Sessions,
    backups: Arc<Backups>,
) -> Router {
    Router::new()
        .route("/v1/backups", post(create).get(list))
        .route("/v1/backups/{name}", get(show))
        .route("/v1/backups/{name}/result", get(result))
        .route("/v1/backups/{name}/cancel", post(cancel))
        .with_state(Api {
            tokens,
            backups,
            sessions,
        })
}

/// The bearer token's principal, or else the dashboard session's (CSRF-checked for a
/// `method` that is not a read), as [`crate::http::Auth`] reads it.
pub(crate) fn caller(
    tokens: &crate::auth::Tokens,
    sessions: &crate::ui::Sessions,
    method: &axum::http::Method,
    headers: &HeaderMap,
) -> Result<Principal, ApiError> {
    let header = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
    if header.is_none() {
        let session = crate::ui::session::session_principal(sessions, tokens, method, headers)?;
        if let Some(p) = session {
            return Ok(p);
        }
    }
    authenticate(tokens, header)
}

fn who(api: &Api, method: &axum::http::Method, headers: &HeaderMap) -> Result<Principal, ApiError> {
    caller(&api.tokens, &api.sessions, method, headers)
}

/// Whether `p` may see backup `v`.
fn may_see(p: &Principal, v: &BackupView) -> bool {
    crate::restores::routes::may_see(p, &v.created_by)
}

fn input_error(message: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidInput, message).field("from")
}

/// Reads and plans the input on a blocking thread, under `p`'s confinement and the
/// `[blocks]` caps.
///
/// # Cancel safety
/// The plan stops soon after this future is dropped (the client went away): it holds a
/// `CancelOnDrop` of the plan's `Cancel` token until the plan returns.
async fn plan(
    b: &Backups,
    p: &Principal,
    req: &BackupRequest,
    scope: &BackupScope,
) -> Result<Plan, ApiError> {
    let mut options = super::plan_options(req, &scope.blocks)?;
    options.confinement = b.confinement(p, scope);
    let from = PathBuf::from(&req.from);
    if !from.is_absolute() {
        return Err(ApiError::invalid(
            "from",
            format!(
                "from {:?}: expected an absolute path on the server (the server reads the input from its own filesystem)",
                req.from
            ),
        ));
    }
    let cancel = Cancel::new();
    options.cancel = cancel.clone();
    let stop_when_client_leaves = cancel.on_drop();
    let lp = b.lp.clone();
    let runtime = tokio::runtime::Handle::current();
    let loaded = tokio::task::spawn_blocking(move || {
        let loaded = Plan::load(&from, &options);
        // Counted from here, not by the handler: a canceled handler is gone by now.
        let outcome = match &loaded {
            Ok(_) => "made",
            Err(LoadError::Refused(_)) => "refused",
            Err(LoadError::Limit { .. }) => "too_large",
            Err(LoadError::Canceled) => "canceled",
            Err(_) => "failed",
        };
        runtime.spawn(async move {
            let _ = lp
                .ask(Principal::system(), |r| BackupOp::Planned(outcome, r))
                .await;
        });
        loaded
    })
    .await
    .map_err(|e| ApiError::internal(format!("planning the backup: {e}")))?;
    stop_when_client_leaves.disarm();
    let plan = match loaded {
        Ok(p) => p,
        Err(e @ LoadError::Option { option, .. }) => {
            return Err(ApiError::invalid(option, e.to_string()))
        }
        Err(e) => {
            return Err(super::confine::load_error(&e)
                .unwrap_or_else(|| input_error(format!("{e} (the path is read on the server)"))))
        }
    };
    let errors = plan.input_errors();
    if !errors.is_empty() {
        let mut lines: Vec<String> = errors
            .iter()
            .take(SHOWN_INPUT_ERRORS)
            .map(|e| e.to_string())
            .collect();
        if errors.len() > SHOWN_INPUT_ERRORS {
            lines.push(format!("and {} more", errors.len() - SHOWN_INPUT_ERRORS));
        }
        return Err(input_error(format!(
            "{} bad items or files in the input; nothing was started: {}",
            errors.len(),
            lines.join("; ")
        )));
    }
    Ok(plan)
}

/// The dry run's answer: the blocks, the refused items and the notes.
fn dry_run_answer(plan: &Plan, refused: Vec<lockgate_api::BackupRefusal>) -> BackupDryRun {
    let report = plan.dry_run_report();
    BackupDryRun {
        blocks: report
            .blocks
            .iter()
            .map(|d| BackupDryBlock {
                index: d.index,
                items: d.items.iter().map(|s| s.to_string()).collect(),
            })
            .collect(),
        refused,
        warnings: report.warnings.to_vec(),
    }
}

#[utoipa::path(post, path = "/v1/backups", tag = "backups", request_body = BackupRequest,
    responses(
        (status = 201, description = "Created; its job is queued", body = BackupView),
        (status = 200, description = "`dry_run`: the plan, nothing run", body = BackupDryRun),
    ))]
// The body is read after the caller is known: a bad token wins over a bad body.
async fn create(
    State(api): State<Api>,
    headers: HeaderMap,
    body: Result<JsonBody<BackupRequest>, Response>,
) -> Result<Response, ApiError> {
    let p = who(&api, &axum::http::Method::POST, &headers)?;
    p.require(&[Role::Admin, Role::Submitter], "create backups")?;
    let JsonBody(req) = match body {
        Ok(b) => b,
        Err(rejection) => return Ok(rejection),
    };
    check_backup_name(&req.name).map_err(|m| ApiError::invalid("name", m))?;
    let b = &api.backups;
    if !req.dry_run {
        let name = req.name.clone();
        if b.lp
            .ask(p.clone(), |r| BackupOp::Get(name, r))
            .await
            .is_ok()
        {
            return Err(ApiError::new(
                ErrorCode::AlreadyExists,
                format!(
                    "backup {:?} already exists; backup names are unique: choose another",
                    req.name
                ),
            )
            .field("name"));
        }
    }
    let scope = b.scope(&p).await?;
    let plan = plan(b, &p, &req, &scope).await?;
    let refused = super::confine::refusals(plan.refused());
    if req.dry_run {
        return Ok(Json(dry_run_answer(&plan, refused)).into_response());
    }
    let blocks = scope.blocks;
    let view = BackupView {
        name: req.name.clone(),
        state: BackupState::Queued,
        phase: None,
        job: None,
        created_by: p.name.clone(),
        namespaces: plan.namespaces().iter().map(|s| s.to_string()).collect(),
        archive: b.archive_path(&req.name).display().to_string(),
        created_at: lockgate_api::time::format(lockgate_core::Timestamp(
            crate::event_loop::wall_ms(),
        )),
        started_at: None,
        finished_at: None,
        progress: BackupProgress {
            blocks_total: plan.block_count(),
            items_total: plan.item_count(),
            ..BackupProgress::default()
        },
        items: None,
        blocks: None,
        reasons: Vec::new(),
        cancel_requested: false,
        request: req,
        refused,
    };
    let created =
        b.lp.ask(super::principal(&view.name), |r| {
            BackupOp::Create(Box::new(view), r)
        })
        .await?;
    let job = created
        .job
        .ok_or_else(|| ApiError::internal("a backup recorded without its job"))?;
    b.launch(created.clone(), plan, blocks, job);
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

async fn view(api: &Api, p: &Principal, name: &str) -> Result<BackupView, ApiError> {
    let v = api
        .backups
        .lp
        .ask(p.clone(), |r| BackupOp::Get(name.to_string(), r))
        .await?;
    if !may_see(p, &v) {
        return Err(ApiError::forbidden(format!(
            "backup {name:?} was created by {:?}; a {} token {:?} may only use its own backups",
            v.created_by, p.role, p.name
        )));
    }
    Ok(api.backups.live(v))
}

#[utoipa::path(get, path = "/v1/backups", tag = "backups",
    responses((status = 200, description = "Every backup the caller may see, oldest first", body = BackupList)))]
async fn list(State(api): State<Api>, headers: HeaderMap) -> Result<Json<BackupList>, ApiError> {
    let p = who(&api, &axum::http::Method::GET, &headers)?;
    p.require(
        &[Role::Admin, Role::Viewer, Role::Submitter],
        "list backups",
    )?;
    let all = api.backups.lp.ask(p.clone(), BackupOp::List).await?;
    let backups = all
        .backups
        .into_iter()
        .filter(|v| may_see(&p, v))
        .map(|v| api.backups.live(v))
        .collect();
    Ok(Json(BackupList { backups }))
}

#[utoipa::path(get, path = "/v1/backups/{name}", tag = "backups", params(("name" = String, Path, description = "The backup's name")),
    responses((status = 200, description = "The backup, with live progress", body = BackupView)))]
async fn show(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<BackupView>, ApiError> {
    let p = who(&api, &axum::http::Method::GET, &headers)?;
    Ok(Json(view(&api, &p, &name).await?))
}

#[utoipa::path(get, path = "/v1/backups/{name}/result", tag = "backups", params(("name" = String, Path, description = "The backup's name")),
    responses((status = 200, description = "`metadata/result.json` of the finished backup's archive, as stored there", body = Object)))]
/// `metadata/result.json` of the archive, as stored there.
async fn result(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let p = who(&api, &axum::http::Method::GET, &headers)?;
    let v = view(&api, &p, &name).await?;
    if !v.is_finished() {
        return Err(ApiError::new(
            ErrorCode::NotFinished,
            format!(
                "backup {name:?} is {}: its result is written when it ends",
                v.state
            ),
        ));
    }
    let path = PathBuf::from(&v.archive);
    let read = tokio::task::spawn_blocking(move || {
        read_entry(&path, lockgate_blocks::result::RESULT_ENTRY)
    })
    .await
    .map_err(|e| ApiError::internal(e.to_string()))?;
    match read {
        Ok(Some(bytes)) => Ok(([(CONTENT_TYPE, "application/json")], bytes).into_response()),
        Ok(None) => Err(ApiError::not_found(format!(
            "the archive {} of backup {name:?} has no metadata/result.json",
            v.archive
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ApiError::not_found(format!(
            "backup {name:?} has no archive ({}): it never started{}",
            v.archive,
            v.reasons
                .first()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ))),
        Err(e) => Err(ApiError::internal(format!(
            "cannot read the archive {}: {e}",
            v.archive
        ))),
    }
}

/// One entry of a tar.gz archive, read by streaming through it.
fn read_entry(archive: &std::path::Path, entry: &str) -> std::io::Result<Option<Vec<u8>>> {
    let file = std::fs::File::open(archive)?;
    let gz = flate2::read::GzDecoder::new(std::io::BufReader::new(file));
    let mut tar = tar::Archive::new(gz);
    for e in tar.entries()? {
        let mut e = e?;
        if e.path()?.as_os_str() == entry {
            let mut buf = Vec::with_capacity(e.size() as usize);
            e.read_to_end(&mut buf)?;
            return Ok(Some(buf));
        }
    }
    Ok(None)
}

#[utoipa::path(post, path = "/v1/backups/{name}/cancel", tag = "backups", params(("name" = String, Path, description = "The backup's name")),
    responses((status = 200, description = "Cancel asked for", body = BackupView)))]
async fn cancel(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<BackupView>, ApiError> {
    let p = who(&api, &axum::http::Method::POST, &headers)?;
    p.require(&[Role::Admin, Role::Submitter], "cancel backups")?;
    let mut v = view(&api, &p, &name).await?;
    if v.is_finished() {
        return Err(ApiError::new(
            ErrorCode::AlreadyEnded,
            format!(
                "backup {name:?} already ended ({})",
                v.phase.as_deref().unwrap_or("finished")
            ),
        ));
    }
    let b = &api.backups;
    if let Some(run) = b.running(&name) {
        b.cancel_running(&run).await;
    }
    if let Some(job) = v.job {
        // Queued: the job ends at once and the driver records the backup as cancelled.
        // Admitted: the job gets `cancel_requested`; the pool already stopped its blocks.
        let _ =
            b.lp.ask(super::principal(&name), |r| JobOp::Cancel(job, false, r))
                .await;
    }
    v.cancel_requested = true;
    Ok(Json(v))
}
