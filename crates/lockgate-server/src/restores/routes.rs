//! `/v1/restores`: create (or dry-run), list, show, result, cancel, and the node of a
//! restored pod whose volumes it copies back (`pods`).
//!
//! Who may do what: `admin` everything; `submitter` restores the backups it created and
//! sees, cancels and binds the pods of the restores it created; `viewer` reads all; `agent` nothing.
//!
//! `backup` names a backup of this server; one still queued or running is a 409
//! `not_finished`, an archive that cannot be read (damaged, truncated, of a newer format,
//! of a failed backup) a 422 `invalid_input` naming `backup`, a bad mapping a 422 naming
//! `namespace_mappings`. `existing` is a path on the server's filesystem, confined as a
//! backup's `from` is. A dry run answers the result the restore would write.

use super::{RestoreOp, Restores};
use crate::auth::Principal;
use crate::backups::confine::{input_not_allowed, refusals};
use crate::backups::routes::caller;
use crate::backups::{filters, item_selection, BackupOp};
use crate::error::ApiError;
use crate::http::JsonBody;
use crate::jobs::JobOp;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use lockgate_api::{
    check_name, BackupState, BackupView, ErrorCode, ExistingResourcePolicy, RestoreCounts,
    RestoreList, RestorePodBind, RestorePodBound, RestoreRequest, RestoreView, Role,
};
use lockgate_blocks::restore::{self, ExistingPolicy, Priorities, RestoreOptions, RestorePlan};
use lockgate_blocks::{HookPolicy, PlanOptions, RefusalReason, RefusedItem};
use std::path::PathBuf;
use std::sync::Arc;

/// State of the restore routes.
#[derive(Clone)]
pub struct Api {
    tokens: crate::auth::Tokens,
    restores: Arc<Restores>,
    sessions: crate::ui::Sessions,
}

/// The restore routes' part of the OpenAPI document (list every handler of [`router`]).
#[derive(utoipa::OpenApi)]
#[openapi(paths(create, list, show, result, cancel, bind))]
pub(crate) struct ApiDoc;

/// The routes, to merge into the main router.
pub fn router(
    tokens: crate::auth::Tokens,
    sessions: crate::ui::Sessions,
    restores: Arc<Restores>,
) -> Router {
    Router::new()
        .route("/v1/restores", post(create).get(list))
        .route("/v1/restores/{name}", get(show))
        .route("/v1/restores/{name}/result", get(result))
        .route("/v1/restores/{name}/cancel", post(cancel))
        .route("/v1/restores/{name}/pods", post(bind))
        .with_state(Api {
            tokens,
            restores,
            sessions,
        })
}

fn who(api: &Api, method: &Method, headers: &HeaderMap) -> Result<Principal, ApiError> {
    caller(&api.tokens, &api.sessions, method, headers)
}

/// Whether `p` may see what `created_by` created.
pub(crate) fn may_see(p: &Principal, created_by: &str) -> bool {
    match p.role {
        Role::Admin | Role::Viewer => true,
        Role::Submitter => created_by == p.name,
        Role::Agent => false,
    }
}

/// The finished backup `name` that `p` may restore.
async fn backup_to_restore(
    r: &Restores,
    p: &Principal,
    name: &str,
) -> Result<BackupView, ApiError> {
    let field = |e: ApiError| e.field("backup");
    let asked = name.to_string();
    let v = r
        .lp()
        .ask(p.clone(), |reply| BackupOp::Get(asked, reply))
        .await
        .map_err(field)?;
    if !may_see(p, &v.created_by) {
        return Err(field(ApiError::forbidden(format!(
            "backup {name:?} was created by {:?}; a {} token {:?} may only restore its own backups",
            v.created_by, p.role, p.name
        ))));
    }
    if !v.is_finished() {
        return Err(field(ApiError::new(
            ErrorCode::NotFinished,
            format!(
                "backup {name:?} is {}: a restore reads a finished backup's archive; wait for it to end",
                v.state
            ),
        )));
    }
    Ok(v)
}

fn options(req: &RestoreRequest) -> Result<RestoreOptions, ApiError> {
    let priorities = match &req.restore_resource_priorities {
        Some(text) => Priorities::parse(text).map_err(|e| {
            ApiError::invalid(
                "restore_resource_priorities",
                format!("restore_resource_priorities {text:?}: {e}"),
            )
        })?,
        None => Priorities::default(),
    };
    Ok(RestoreOptions {
        filters: filters(item_selection!(req))?,
        namespace_mappings: req.namespace_mappings.clone(),
        existing_policy: match req.existing_resource_policy {
            ExistingResourcePolicy::None => ExistingPolicy::None,
            ExistingResourcePolicy::Update => ExistingPolicy::Update,
        },
        restore_status: req.restore_status,
        preserve_node_ports: req.preserve_node_ports,
        priorities,
        existing: Vec::new(),
    })
}

/// A restore planned under its creator's confinement.
pub(super) struct Planned {
    pub(super) plan: RestorePlan,
    /// Items (and pods' hooks) the confinement left out.
    pub(super) refused: Vec<RefusedItem>,
    /// The policy's `[blocks].exec_template`, for the post-restore hooks.
    pub(super) exec_template: Vec<String>,
}

/// Plans a created restore again, as its creator `p` (when its job is admitted).
///
/// # Errors
/// As at creation: the backup gone or no longer readable, `existing` unreadable.
pub(super) async fn plan_again(
    r: &Restores,
    p: &Principal,
    view: &RestoreView,
) -> Result<Planned, ApiError> {
    let backup = backup_to_restore(r, p, &view.backup).await?;
    plan(r, p, &view.request, &backup).await
}

/// Reads the archive (and `existing`) and plans the restore on a blocking thread, under
/// `p`'s confinement; the refused items with it.
async fn plan(
    r: &Restores,
    p: &Principal,
    req: &RestoreRequest,
    backup: &BackupView,
) -> Result<Planned, ApiError> {
    let scope = r.backups.scope(p).await?;
    let exec_template = scope.blocks.exec_template.clone();
    let (wait_image, restore_name) = (scope.blocks.restore_wait_image.clone(), req.name.clone());
    let mut plan_options = PlanOptions::from_policy(&scope.blocks);
    plan_options.confinement = r.backups.confinement(p, &scope);
    let mut options = options(req)?;
    let existing = match &req.existing {
        Some(text) => {
            let path = PathBuf::from(text);
            if !path.is_absolute() {
                return Err(ApiError::invalid(
                    "existing",
                    format!("existing {text:?}: expected an absolute path on the server"),
                ));
            }
            Some(path)
        }
        None => None,
    };
    let archive = PathBuf::from(&backup.archive);
    let name = backup.name.clone();
    let planned = tokio::task::spawn_blocking(move || {
        if let Some(path) = existing {
            let readable = plan_options
                .confinement
                .input
                .resolve(&path)
                .map_err(|refused| input_not_allowed(&refused, "existing"))?;
            options.existing = restore::read_existing(&readable, &plan_options).map_err(|e| {
                ApiError::new(
                    ErrorCode::InvalidInput,
                    format!(
                        "existing {}: {e} (the path is read on the server)",
                        path.display()
                    ),
                )
                .field("existing")
            })?;
        }
        let read = restore::read::read(&archive, &plan_options.limits).map_err(|e| {
            ApiError::new(
                ErrorCode::InvalidInput,
                format!("backup {name:?} cannot be restored: {e}"),
            )
            .field("backup")
        })?;
        let mut plan = RestorePlan::new(&read, &options)
            .map_err(|e| ApiError::invalid("namespace_mappings", e.to_string()))?;
        let mut refused = plan.confine(&plan_options.confinement.namespaces);
        if let Some(image) = &wait_image {
            plan.wait_for_pod_volumes(&restore_name, image);
        }
        if plan_options.confinement.hooks == HookPolicy::Refuse {
            refused.extend(plan.hooks.drain(..).map(|h| RefusedItem {
                item: h.item,
                kind: "Pod".into(),
                namespace: Some(h.namespace),
                name: h.pod,
                reason: RefusalReason::HooksNotAllowed,
            }));
        }
        Ok::<_, ApiError>((plan, refused))
    })
    .await
    .map_err(|e| ApiError::internal(format!("planning the restore: {e}")))?;
    let (plan, refused) = planned?;
    Ok(Planned {
        plan,
        refused,
        exec_template,
    })
}

#[utoipa::path(post, path = "/v1/restores", tag = "restores", request_body = RestoreRequest,
    responses(
        (status = 201, description = "Created; its job is queued", body = RestoreView),
        (status = 200, description = "`dry_run`: the result it would write (`metadata/result.json`), nothing written", body = Object),
    ))]
/// Restores a finished backup into `<data-dir>/restores/<name>/` once its
/// `resource-restore` job is admitted.
// The body is read after the caller is known: a bad token wins over a bad body.
async fn create(
    State(api): State<Api>,
    headers: HeaderMap,
    body: Result<JsonBody<RestoreRequest>, Response>,
) -> Result<Response, ApiError> {
    let p = who(&api, &Method::POST, &headers)?;
    p.require(&[Role::Admin, Role::Submitter], "create restores")?;
    let JsonBody(req) = match body {
        Ok(b) => b,
        Err(rejection) => return Ok(rejection),
    };
    check_name("restore", &req.name).map_err(|m| ApiError::invalid("name", m))?;
    check_name("backup", &req.backup).map_err(|m| ApiError::invalid("backup", m))?;
    let r = &api.restores;
    if !req.dry_run {
        let name = req.name.clone();
        if r.lp()
            .ask(p.clone(), |reply| RestoreOp::Get(name, reply))
            .await
            .is_ok()
        {
            return Err(ApiError::new(
                ErrorCode::AlreadyExists,
                format!(
                    "restore {:?} already exists; restore names are unique: choose another",
                    req.name
                ),
            )
            .field("name"));
        }
    }
    let backup = backup_to_restore(r, &p, &req.backup).await?;
    // Planned here to refuse what cannot be restored and to name its namespaces; dropped
    // before it queues, and planned again once admitted.
    let Planned { plan, refused, .. } = plan(r, &p, &req, &backup).await?;
    if req.dry_run {
        return Ok(Json(plan.result(&req.name)).into_response());
    }
    let planned = plan.result(&req.name);
    let view = RestoreView {
        name: req.name.clone(),
        state: BackupState::Queued,
        phase: None,
        job: None,
        created_by: p.name.clone(),
        backup: backup.name.clone(),
        namespaces: plan.target_namespaces(),
        volumes: plan.target_volumes(),
        directory: r.directory(&req.name).display().to_string(),
        created_at: lockgate_api::time::format(lockgate_core::Timestamp(
            crate::event_loop::wall_ms(),
        )),
        started_at: None,
        finished_at: None,
        items: RestoreCounts {
            restored: planned.counts.restored,
            skipped: planned.counts.skipped,
            failed: planned.counts.failed,
        },
        files: Vec::new(),
        data_jobs: Vec::new(),
        pods_waiting: Vec::new(),
        hooks: Vec::new(),
        reasons: Vec::new(),
        cancel_requested: false,
        request: req,
        refused: refusals(&refused),
    };
    let created = r
        .lp()
        .ask(super::principal(&view.name), |reply| {
            RestoreOp::Create(Box::new(view), reply)
        })
        .await?;
    r.launch(created.clone(), p);
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

async fn view(api: &Api, p: &Principal, name: &str) -> Result<RestoreView, ApiError> {
    let asked = name.to_string();
    let v = api
        .restores
        .lp()
        .ask(p.clone(), |reply| RestoreOp::Get(asked, reply))
        .await?;
    if !may_see(p, &v.created_by) {
        return Err(ApiError::forbidden(format!(
            "restore {name:?} was created by {:?}; a {} token {:?} may only use its own restores",
            v.created_by, p.role, p.name
        )));
    }
    Ok(v)
}

#[utoipa::path(get, path = "/v1/restores", tag = "restores",
    responses((status = 200, description = "Every restore the caller may see, oldest first", body = RestoreList)))]
async fn list(State(api): State<Api>, headers: HeaderMap) -> Result<Json<RestoreList>, ApiError> {
    let p = who(&api, &Method::GET, &headers)?;
    p.require(
        &[Role::Admin, Role::Viewer, Role::Submitter],
        "list restores",
    )?;
    let all = api.restores.lp().ask(p.clone(), RestoreOp::List).await?;
    let restores = all
        .restores
        .into_iter()
        .filter(|v| may_see(&p, &v.created_by))
        .collect();
    Ok(Json(RestoreList { restores }))
}

#[utoipa::path(get, path = "/v1/restores/{name}", tag = "restores", params(("name" = String, Path, description = "The restore's name")),
    responses((status = 200, description = "The restore", body = RestoreView)))]
async fn show(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<RestoreView>, ApiError> {
    let p = who(&api, &Method::GET, &headers)?;
    Ok(Json(view(&api, &p, &name).await?))
}

#[utoipa::path(get, path = "/v1/restores/{name}/result", tag = "restores", params(("name" = String, Path, description = "The restore's name")),
    responses((status = 200, description = "`metadata/result.json` of the finished restore: its files and every item's status", body = Object)))]
/// `metadata/result.json` of the restore's directory.
async fn result(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    let p = who(&api, &Method::GET, &headers)?;
    let v = view(&api, &p, &name).await?;
    if !v.is_finished() {
        return Err(ApiError::new(
            ErrorCode::NotFinished,
            format!(
                "restore {name:?} is {}: its result is written when it ends",
                v.state
            ),
        ));
    }
    let dir = PathBuf::from(&v.directory);
    let read = tokio::task::spawn_blocking(move || restore::read_result(&dir))
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    match read {
        Ok(res) => Ok(Json(res).into_response()),
        Err(e) => Err(ApiError::not_found(format!(
            "restore {name:?} has no files ({e}){}",
            v.reasons
                .first()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ))),
    }
}

#[utoipa::path(post, path = "/v1/restores/{name}/cancel", tag = "restores", params(("name" = String, Path, description = "The restore's name")),
    responses((status = 200, description = "Cancel asked for", body = RestoreView)))]
/// Cancels a restore: a queued one ends before anything is written; a running one has
/// its files written whole or not at all.
async fn cancel(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<Json<RestoreView>, ApiError> {
    let p = who(&api, &Method::POST, &headers)?;
    p.require(&[Role::Admin, Role::Submitter], "cancel restores")?;
    let mut v = view(&api, &p, &name).await?;
    if v.is_finished() {
        return Err(ApiError::new(
            ErrorCode::AlreadyEnded,
            format!(
                "restore {name:?} already ended ({})",
                v.phase.as_deref().unwrap_or("finished")
            ),
        ));
    }
    let r = &api.restores;
    r.cancel_running(&name);
    if let Some(job) = v.job {
        // Queued: the job ends at once and the driver records the restore as cancelled.
        let _ = r
            .lp()
            .ask(super::principal(&name), |reply| {
                JobOp::Cancel(job, false, reply)
            })
            .await;
    }
    v.cancel_requested = true;
    Ok(Json(v))
}

#[utoipa::path(post, path = "/v1/restores/{name}/pods", tag = "restores", request_body = RestorePodBind,
    params(("name" = String, Path, description = "The restore's name")),
    responses((status = 200, description = "The pod's pod-volume-restore jobs, pinned to its node", body = RestorePodBound)))]
/// Tells a running restore the node a restored pod was scheduled to (one of its
/// `pods_waiting`): its volumes are copied back there by `pod-volume-restore` jobs.
/// `409 wrong_state` when the restore is not waiting for that pod (not yet running, the
/// pod bound already or unknown, the restore ended).
async fn bind(
    State(api): State<Api>,
    headers: HeaderMap,
    Path(name): Path<String>,
    body: Result<JsonBody<RestorePodBind>, Response>,
) -> Result<Response, ApiError> {
    let p = who(&api, &Method::POST, &headers)?;
    p.require(&[Role::Admin, Role::Submitter], "bind restored pods")?;
    let JsonBody(req) = match body {
        Ok(b) => b,
        Err(rejection) => return Ok(rejection),
    };
    // Refused before the restore is asked: a bad name (an unexpanded `$(LOCKGATE_NODE)`)
    // leaves the pod waiting.
    crate::nodes::check_node_name("node", &req.node)?;
    let v = view(&api, &p, &name).await?;
    // Asked of the record first: a restore not yet waiting (queued, writing) answers at
    // once instead of holding the call until its driver listens.
    if !v.pods_waiting.contains(&req.pod) {
        return Err(super::not_waiting(&name, &req.pod, &v.pods_waiting));
    }
    let jobs = api
        .restores
        .bind(&name, req.pod.clone(), req.node.clone())
        .await?;
    let bound = RestorePodBound {
        restore: name,
        pod: req.pod,
        node: req.node,
        jobs,
    };
    Ok(Json(bound).into_response())
}
