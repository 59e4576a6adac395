//! The OpenAPI 3.1 document of the whole HTTP API, served at `GET /v1/openapi.json` (no
//! token needed: it says nothing `docs/openapi.json` in the repository does not) and built
//! from the same Rust types the handlers take and answer (utoipa derives on the
//! `lockgate-api` wire types, `#[utoipa::path]` on the handlers).
//!
//! # Adding a route
//! 1. Put `#[utoipa::path(METHOD, path = "/v1/...", tag = "FEATURE", params(..),
//!    request_body = T, responses((status = 200, description = "..", body = T)))]` on its
//!    handler. List only what it answers on success: every operation gets the `4XX` and
//!    `5XX` answers with an [`ErrorBody`] here (`with_error_answers`).
//! 2. Name the handler in its feature's `ApiDoc` (`#[openapi(paths(..))]` beside
//!    `routes()` in `FEATURE/routes.rs`); a new feature's `ApiDoc` is merged in
//!    [`document`].
//! 3. New wire types in `lockgate-api` get
//!    `#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]` (engine enums a
//!    `schema(value_type = ..)` from `lockgate_api::schema`).
//! 4. `UPDATE_OPENAPI=1 cargo test -p lockgate-server openapi` rewrites `docs/openapi.json`.
//!
//! # Invariants
//! - Every route of the router is an operation of the document, with its method (the
//!   server test `openapi::every_route_is_in_the_document` in `tests/it` reads the
//!   routers' sources).
//! - Every operation documents its errors as `4XX`/`5XX` with the one [`ErrorBody`] shape.
//! - Every operation needs the bearer token unless it says `security: [{}]` (health,
//!   readiness, metrics, this document).
//! - The document is built once and is the same bytes on every call.

use crate::http::NoQuery;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use lockgate_api::{ErrorBody, ErrorCode, StreamCut};
use std::sync::OnceLock;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi as Document, Ref, RefOr};
use utoipa::OpenApi;

/// The document's root: info, tags, the security scheme and the routes of no feature.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "lockgate HTTP API",
        description = "lockgate admits backup jobs: clients submit jobs, the server decides \
            when each may hold its slots, holders keep a lease alive while they work. \
            See docs/api.md. Every error answer is `{\"error\": {code, message, field}}`.",
    ),
    paths(serve),
    components(schemas(ErrorBody, ErrorCode, StreamCut)),
    security(("bearer" = [])),
    tags(
        (name = "jobs", description = "Submit, watch and hold jobs"),
        (name = "nodes", description = "Nodes and their agents' assignments"),
        (name = "policy", description = "The active policy document"),
        (name = "tokens", description = "API tokens (admin)"),
        (name = "events", description = "The committed event log"),
        (name = "schedules", description = "Schedules that submit jobs"),
        (name = "backups", description = "Item-block backups the server runs"),
        (name = "restores", description = "Restores of item-block backups into manifests to apply"),
        (name = "server", description = "Health, readiness, metrics and this document"),
        (name = "audit", description = "Who changed or tried to change what (admin)"),
        (name = "notify", description = "Notification targets ([[notify]] in the policy)"),
    )
)]
struct Root;

/// The whole document.
pub fn document() -> Document {
    let mut doc = Root::openapi();
    // One line per feature: its `ApiDoc` lists its handlers.
    doc.merge(crate::http::ApiDoc::openapi());
    doc.merge(crate::jobs::ApiDoc::openapi());
    doc.merge(crate::nodes::ApiDoc::openapi());
    doc.merge(crate::policy::ApiDoc::openapi());
    doc.merge(crate::tokens::ApiDoc::openapi());
    doc.merge(crate::events::ApiDoc::openapi());
    doc.merge(crate::schedules::ApiDoc::openapi());
    doc.merge(crate::backups::routes::ApiDoc::openapi());
    doc.merge(crate::restores::routes::ApiDoc::openapi());
    doc.merge(crate::queue::ApiDoc::openapi());
    doc.merge(crate::rpo::ApiDoc::openapi());
    doc.merge(crate::audit::ApiDoc::openapi());
    doc.merge(crate::joblogs::ApiDoc::openapi());
    doc.merge(crate::notify::ApiDoc::openapi());
    doc.merge(crate::forecast::ApiDoc::openapi());
    doc.merge(crate::ui::ApiDoc::openapi());
    doc.merge(crate::cluster::ApiDoc::openapi());
    with_error_answers(doc)
}

/// The document as pretty JSON with a final newline (what `docs/openapi.json` holds), its
/// unsigned integers marked as such (`unsigned_formats`).
pub fn json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let mut doc = serde_json::to_value(document()).expect("the document serializes");
        unsigned_formats(&mut doc);
        let mut text = serde_json::to_string_pretty(&doc).expect("the document serializes");
        text.push('\n');
        text
    })
}

/// utoipa writes a `u64` as `format: int64` with `minimum: 0` (and a `u32` as `int32`):
/// the format's range then says the server refuses ids, limits and tokens above
/// 2^63 - 1 (2^31 - 1), which it takes. Such integers get `uint64` (`uint32`) here, as
/// the OpenAPI format registry names them (utoipa's `non_strict_integers` would write
/// `u-int64`).
fn unsigned_formats(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            let unsigned = map.get("minimum").and_then(serde_json::Value::as_f64) == Some(0.0);
            if unsigned {
                if let Some(f) = map.get_mut("format") {
                    if f == "int64" {
                        *f = "uint64".into();
                    } else if f == "int32" {
                        *f = "uint32".into();
                    }
                }
            }
            map.values_mut().for_each(unsigned_formats);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(unsigned_formats),
        _ => {}
    }
}

/// The bearer scheme, the shared error answers, those answers on every operation, and
/// operation ids unique across features.
fn with_error_answers(mut doc: Document) -> Document {
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "`Authorization: Bearer <token>`: the admin token from the data dir's \
                     `admin.token`, or one made with `POST /v1/tokens`",
                ))
                .build(),
        ),
    );
    components
        .responses
        .insert("ClientError".into(), RefOr::T(error_answer(false)));
    components
        .responses
        .insert("ServerError".into(), RefOr::T(error_answer(true)));
    for item in doc.paths.paths.values_mut() {
        let ops = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
        ];
        for op in ops.into_iter().flatten() {
            // Handlers of different features share names (`list`, `show`): the id is
            // `<tag>_<handler>`, unique in the document.
            if let (Some(tag), Some(id)) =
                (op.tags.as_ref().and_then(|t| t.first()), &op.operation_id)
            {
                op.operation_id = Some(format!("{tag}_{id}"));
            }
            let answers = &mut op.responses.responses;
            for (status, name) in [("4XX", "ClientError"), ("5XX", "ServerError")] {
                answers
                    .entry(status.into())
                    .or_insert_with(|| RefOr::Ref(Ref::from_response_name(name)));
            }
        }
    }
    doc
}

/// The `4XX` (or `5XX`) answer: an [`ErrorBody`], its codes and statuses listed from
/// [`ErrorCode::ALL`].
fn error_answer(server: bool) -> Response {
    let codes: Vec<String> = ErrorCode::ALL
        .iter()
        .filter(|c| (c.http_status() >= 500) == server)
        .map(|c| format!("`{}` {}", c.as_str(), c.http_status()))
        .collect();
    let what = if server {
        "The server failed or is not available"
    } else {
        "The request was refused"
    };
    ResponseBuilder::new()
        .description(format!(
            "{what}; `error.code` is one of: {}",
            codes.join(", ")
        ))
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        )
        .build()
}

// Cancel safety: cancel safe, it builds a document and changes nothing. (A plain comment:
// utoipa serves the doc comment below as the operation's description.)
/// `GET /v1/openapi.json`.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "server", security(()),
    responses((status = 200, description = "This document (OpenAPI 3.1)", body = Object)))]
pub(crate) async fn serve(_: NoQuery) -> impl IntoResponse {
    ([(CONTENT_TYPE, "application/json")], json())
}
