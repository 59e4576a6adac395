//! The token calls: create, list, revoke.

use super::encode;
use crate::{Client, ClientError};
use lockgate_api::{TokenCreate, TokenCreated, TokenInfo};

impl Client {
    /// `POST /v1/tokens`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn create_token(&self, req: &TokenCreate) -> Result<TokenCreated, ClientError> {
        self.call("POST", "/v1/tokens", Some(req))
    }

    /// `GET /v1/tokens`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn tokens(&self) -> Result<Vec<TokenInfo>, ClientError> {
        self.call("GET", "/v1/tokens", None::<&()>)
    }

    /// `DELETE /v1/tokens/{name}`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn revoke_token(&self, name: &str) -> Result<serde_json::Value, ClientError> {
        self.call(
            "DELETE",
            &format!("/v1/tokens/{}", encode(name)),
            None::<&()>,
        )
    }
}
