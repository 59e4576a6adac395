//! Tokens and roles.
//!
//! A token is 32 random bytes from the OS (256 bits), shown once as 64 hex digits; the
//! store keeps only its SHA-256. Requests carry `Authorization: Bearer <token>`; the
//! [`Tokens`] table maps hashes to principals and is shared read-mostly with the HTTP
//! handlers (the event loop replaces entries after the store committed them).

use crate::error::ApiError;
use lockgate_api::Role;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Name: the owner of the jobs it submits.
    pub name: String,
    /// Role.
    pub role: Role,
    /// The node an agent token is bound to.
    pub node: Option<String>,
}

impl Principal {
    /// The server itself (SIGHUP reloads and the like).
    pub fn system() -> Principal {
        Principal {
            name: "system".into(),
            role: Role::Admin,
            node: None,
        }
    }

    /// Fails unless the role is one of `roles`.
    ///
    /// # Errors
    /// 403 naming the role.
    pub fn require(&self, roles: &[Role], what: &str) -> Result<(), ApiError> {
        if roles.contains(&self.role) {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "{} token {:?} may not {what}",
                self.role, self.name
            )))
        }
    }
}

/// Token hash -> principal.
#[derive(Debug, Clone, Default)]
pub struct Tokens(Arc<RwLock<HashMap<String, Principal>>>);

impl Tokens {
    /// The principal of a bearer token.
    pub fn lookup(&self, token: &str) -> Option<Principal> {
        self.0
            .read()
            .expect("token table lock")
            .get(&hash(token))
            .cloned()
    }

    /// Adds or replaces one entry.
    pub fn insert(&self, hash: String, p: Principal) {
        self.0.write().expect("token table lock").insert(hash, p);
    }

    /// Whether a token with this hash is in the table (not revoked).
    pub fn has_hash(&self, hash: &str) -> bool {
        self.0.read().expect("token table lock").contains_key(hash)
    }

    /// Makes this table hold exactly what `other` holds (a replica's takeover: the
    /// database's tokens replace what an earlier term had).
    pub fn replace_with(&self, other: &Tokens) {
        let fresh = other.0.read().expect("token table lock").clone();
        *self.0.write().expect("token table lock") = fresh;
    }

    /// Removes every entry of a principal.
    pub fn remove_name(&self, name: &str) {
        self.0
            .write()
            .expect("token table lock")
            .retain(|_, p| p.name != name);
    }
}

/// Name prefixes of the server's own principals: a schedule's runs are owned by
/// `schedule:NAME`, a backup's jobs by `backup:NAME`, a restore's by `restore:NAME`. No
/// token may carry one, or it could pre-submit a schedule's next run or cancel a backup's
/// or a restore's jobs.
pub const RESERVED_PREFIXES: [&str; 3] = ["schedule:", "backup:", "restore:"];

/// The reserved prefix `name` starts with, if any.
pub fn reserved_prefix(name: &str) -> Option<&'static str> {
    RESERVED_PREFIXES.into_iter().find(|p| name.starts_with(p))
}

/// A new random token.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    hex(&bytes)
}

/// SHA-256 of a token, lowercase hex.
pub fn hash(token: &str) -> String {
    hex(&Sha256::digest(token.trim().as_bytes()))
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Authenticates a request's `Authorization` header.
///
/// # Errors
/// 401 when the header is missing, malformed or the token unknown.
pub fn authenticate(tokens: &Tokens, header: Option<&str>) -> Result<Principal, ApiError> {
    let Some(value) = header else {
        return Err(ApiError::unauthorized(
            "missing Authorization header: send `Authorization: Bearer <token>`",
        ));
    };
    let Some(token) = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
    else {
        return Err(ApiError::unauthorized(
            "malformed Authorization header: expected `Bearer <token>`",
        ));
    };
    tokens
        .lookup(token)
        .ok_or_else(|| ApiError::unauthorized("unknown or revoked token"))
}
