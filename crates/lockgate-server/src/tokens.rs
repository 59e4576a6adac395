//! Tokens: `POST /v1/tokens`, `GET /v1/tokens`, `DELETE /v1/tokens/{name}` (admins only).
//!
//! `routes.rs` holds the handlers; [`TokenOp`] the loop operations, applied in `ops.rs`.
//!
//! # Invariants
//! - The secret is shown once, in the answer to its creation; the store keeps only its
//!   SHA-256 ([`crate::auth`]).
//! - No token is named with a reserved prefix ([`crate::auth::RESERVED_PREFIXES`]):
//!   creation refuses one, and one left in an older store is not loaded.
//! - Names are unique; an agent token is bound to exactly one node, no other token is.
//! - The shared token table changes in the same batch as the store rows (a revoked token
//!   is refused from the next request on).

mod ops;
mod routes;

pub(crate) use routes::routes;
pub(crate) use routes::ApiDoc;

use crate::protocol::Reply;
use lockgate_api::{TokenCreate, TokenCreated, TokenInfo};
use serde::Serialize;

/// `{"revoked": name}`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Revoked {
    /// The token's name.
    pub revoked: String,
}

/// Token operations of the loop.
#[derive(Debug)]
pub enum TokenOp {
    /// `POST /v1/tokens`.
    Create(TokenCreate, Reply<TokenCreated>),
    /// `GET /v1/tokens`.
    List(Reply<Vec<TokenInfo>>),
    /// `DELETE /v1/tokens/{name}`.
    Revoke(String, Reply<Revoked>),
}
