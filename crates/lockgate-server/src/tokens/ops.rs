//! The token operations inside the loop.

use super::{Revoked, TokenOp};
use crate::auth::{self, Principal};
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{ErrorCode, Role, TokenCreate, TokenCreated, TokenInfo};
use lockgate_core::Timestamp;
use lockgate_store::TokenRecord;

impl Loop {
    /// Applies one token operation.
    pub(crate) fn token_op(&mut self, p: &Principal, op: TokenOp, now: Timestamp) {
        match op {
            TokenOp::Create(req, reply) => {
                let r = self.token_create(p, req, now);
                self.answer(reply, r);
            }
            TokenOp::List(reply) => {
                let r = self.token_list(p);
                self.answer(reply, r);
            }
            TokenOp::Revoke(name, reply) => {
                let r = self.token_revoke(p, name);
                self.answer(reply, r);
            }
        }
    }

    fn token_create(
        &mut self,
        p: &Principal,
        req: TokenCreate,
        now: Timestamp,
    ) -> Result<TokenCreated, ApiError> {
        p.require(&[Role::Admin], "create tokens")?;
        let valid = !req.name.is_empty()
            && req.name.len() <= 64
            && req
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._:@-".contains(c));
        if !valid {
            return Err(ApiError::invalid(
                "name",
                format!(
                    "invalid token name {:?}: 1 to 64 letters, digits or . _ : @ -",
                    req.name
                ),
            ));
        }
        if let Some(prefix) = auth::reserved_prefix(&req.name) {
            return Err(ApiError::invalid(
                "name",
                format!(
                    "invalid token name {:?}: the prefix {prefix:?} is reserved for the server's own principals",
                    req.name
                ),
            ));
        }
        match (req.role, &req.node) {
            (Role::Agent, None) => {
                return Err(ApiError::invalid(
                    "node",
                    "an agent token must be bound to a node: give --node NODE",
                ))
            }
            (r, Some(_)) if r != Role::Agent => {
                return Err(ApiError::invalid(
                    "node",
                    format!("only agent tokens are bound to a node, not {r}"),
                ))
            }
            _ => {}
        }
        if let Some(node) = &req.node {
            crate::nodes::check_node_name("node", node)?;
        }
        if self.store_tokens()?.iter().any(|t| t.name == req.name) {
            return Err(ApiError::new(
                ErrorCode::Exists,
                format!("a token named {:?} exists; revoke it first", req.name),
            ));
        }
        let token = auth::new_token();
        let rec = TokenRecord {
            name: req.name.clone(),
            role: req.role,
            node: req.node.clone(),
            hash: auth::hash(&token),
            created_at: now,
        };
        self.tokens.insert(
            rec.hash.clone(),
            Principal {
                name: rec.name.clone(),
                role: req.role,
                node: req.node.clone(),
            },
        );
        self.batch.tokens.push(rec);
        Ok(TokenCreated {
            name: req.name,
            role: req.role,
            node: req.node,
            token,
        })
    }

    /// The tokens as the next commit will leave them.
    fn store_tokens(&mut self) -> Result<Vec<TokenRecord>, ApiError> {
        let mut all = self.store.load_tokens()?;
        all.extend(self.batch.tokens.iter().cloned());
        all.retain(|t| !self.batch.revoked_tokens.contains(&t.name));
        Ok(all)
    }

    fn token_list(&mut self, p: &Principal) -> Result<Vec<TokenInfo>, ApiError> {
        p.require(&[Role::Admin], "list tokens")?;
        Ok(self
            .store_tokens()?
            .into_iter()
            .map(|t| TokenInfo {
                name: t.name,
                role: t.role,
                node: t.node,
                created_at: lockgate_api::time::format(t.created_at),
            })
            .collect())
    }

    fn token_revoke(&mut self, p: &Principal, name: String) -> Result<Revoked, ApiError> {
        p.require(&[Role::Admin], "revoke tokens")?;
        if !self.store_tokens()?.iter().any(|t| t.name == name) {
            return Err(ApiError::not_found(format!("no token named {name:?}")));
        }
        self.tokens.remove_name(&name);
        self.batch.revoked_tokens.push(name.clone());
        Ok(Revoked { revoked: name })
    }
}
