//! Nodes: `PUT/GET/DELETE /v1/nodes/{name}`, `GET /v1/nodes`, heartbeats, cordon, and the
//! agents' assignments (`GET /v1/nodes/{name}/assignments`, a long-poll, and its `ack`).
//!
//! `routes.rs` holds the handlers; [`NodeOp`] the loop operations, applied in `ops.rs`.
//!
//! # Invariants
//! - An agent job admitted on a node is *offered* to that node until the agent
//!   acknowledges it, the job ends or its lease changes. Offers are not durable: after a
//!   restart every admitted agent job is offered again (`Loop::reoffer`), so an agent
//!   recognises a job it already runs by its id.
//! - A node long-poll is answered after the commit that made an offer (or with an empty
//!   list when its timeout passes); a foreign node is refused before waiting.

mod ops;
mod routes;

pub(crate) use ops::NodeWaiter;
pub(crate) use routes::routes;
pub(crate) use routes::ApiDoc;

use crate::auth::Principal;
use crate::error::ApiError;
use crate::protocol::Reply;
use lockgate_api::{AssignmentList, NodeList, NodeRegister, NodeView, Role};
use lockgate_core::job::JobId;
use serde::Serialize;

/// A node's name is a DNS subdomain (at most 253 characters): the rule of
/// `PUT /v1/nodes/{name}` and of an agent token's `node`, so no token is bound to a node
/// that could never register.
///
/// # Errors
/// 422 naming `field` and the rule.
pub(crate) fn check_node_name(field: &str, name: &str) -> Result<(), ApiError> {
    lockgate_core::selector::validate_dns_subdomain(name).map_err(|m| {
        let name = lockgate_core::limits::shorten(name);
        ApiError::invalid(field, format!("invalid node name {name:?}: {m}"))
    })
}

/// `{"removed": name}`: the answer of a `DELETE`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Removed {
    /// What was removed.
    pub removed: String,
}

/// `{"acknowledged": id}`: the answer of an assignment's `ack`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Acknowledged {
    /// The job.
    #[schema(value_type = u64)]
    pub acknowledged: JobId,
}

/// Node operations of the loop.
#[derive(Debug)]
pub enum NodeOp {
    /// `PUT /v1/nodes/{name}`.
    Put(String, NodeRegister, Reply<NodeView>),
    /// `DELETE /v1/nodes/{name}`.
    Delete(String, Reply<Removed>),
    /// `POST /v1/nodes/{name}/heartbeat`.
    Heartbeat(String, Reply<NodeView>),
    /// `GET /v1/nodes`.
    List(Reply<NodeList>),
    /// `GET /v1/nodes/{name}`.
    Get(String, Reply<NodeView>),
    /// `POST /v1/nodes/{name}/cordon` (true) or `/uncordon`.
    Cordon(String, bool, Reply<NodeView>),
    /// `GET /v1/nodes/{name}/assignments`: answered when there is something to take.
    Assignments(String, Reply<AssignmentList>),
    /// `POST /v1/nodes/{name}/assignments/{job}/ack`.
    Ack(String, JobId, Reply<Acknowledged>),
}

/// Whether `p` may manage node `name`: admins, and the agent token bound to it.
///
/// # Errors
/// 403 naming the node.
pub(crate) fn may_manage_node(p: &Principal, name: &str) -> Result<(), ApiError> {
    match p.role {
        Role::Admin => Ok(()),
        Role::Agent if p.node.as_deref() == Some(name) => Ok(()),
        _ => Err(ApiError::forbidden(format!(
            "{} token {:?} may not manage node {name:?} (admin, or an agent token bound to it)",
            p.role, p.name
        ))),
    }
}
