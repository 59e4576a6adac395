//! The audit call: a page of the audit log (admins only).

use crate::client::encode;
use crate::{Client, ClientError};
use lockgate_api::AuditList;

/// The filters of `GET /v1/audit`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Only entries at or after this time (RFC 3339).
    pub since: Option<String>,
    /// Only this token name's entries.
    pub principal: Option<String>,
    /// Only entries with a larger `seq`.
    pub after: u64,
    /// Page size (the server's default 100 when `None`, at most 1000).
    pub limit: Option<usize>,
}

impl Client {
    /// `GET /v1/audit` (admin): one page, oldest first.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn audit(&self, q: &AuditQuery) -> Result<AuditList, ClientError> {
        let mut path = format!("/v1/audit?after={}", q.after);
        if let Some(s) = &q.since {
            path.push_str(&format!("&since={}", encode(s)));
        }
        if let Some(p) = &q.principal {
            path.push_str(&format!("&principal={}", encode(p)));
        }
        if let Some(l) = q.limit {
            path.push_str(&format!("&limit={l}"));
        }
        self.call("GET", &path, None::<&()>)
    }
}
