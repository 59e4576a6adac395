//! The restore calls: create (or dry-run), list, show, result, cancel, bind a pod.

use super::encode;
use crate::{Client, ClientError};
use lockgate_api::{RestoreList, RestorePodBind, RestorePodBound, RestoreRequest, RestoreView};

impl Client {
    /// `POST /v1/restores` without `dry_run`: the new restore, queued.
    ///
    /// # Errors
    /// See [`ClientError`]; 409 `not_finished` for a backup still running, 422 for an
    /// archive that cannot be read or a bad option, naming the field.
    pub fn create_restore(&self, req: &RestoreRequest) -> Result<RestoreView, ClientError> {
        self.call("POST", "/v1/restores", Some(req))
    }

    /// `POST /v1/restores` with `dry_run`: the result the restore would write, decoded
    /// into `T`.
    ///
    /// # Errors
    /// As [`Client::create_restore`].
    pub fn dry_run_restore<T: serde::de::DeserializeOwned>(
        &self,
        req: &RestoreRequest,
    ) -> Result<T, ClientError> {
        let req = RestoreRequest {
            dry_run: true,
            ..req.clone()
        };
        self.call("POST", "/v1/restores", Some(&req))
    }

    /// `GET /v1/restores`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn restores(&self) -> Result<RestoreList, ClientError> {
        self.call("GET", "/v1/restores", None::<&()>)
    }

    /// `GET /v1/restores/{name}`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn restore(&self, name: &str) -> Result<RestoreView, ClientError> {
        self.call(
            "GET",
            &format!("/v1/restores/{}", encode(name)),
            None::<&()>,
        )
    }

    /// `GET /v1/restores/{name}/result`: `metadata/result.json` of a finished restore,
    /// decoded into `T`.
    ///
    /// # Errors
    /// See [`ClientError`]; 409 `not_finished` while it runs, 404 when it wrote no files.
    pub fn restore_result<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<T, ClientError> {
        self.call(
            "GET",
            &format!("/v1/restores/{}/result", encode(name)),
            None::<&()>,
        )
    }

    /// `POST /v1/restores/{name}/cancel`.
    ///
    /// # Errors
    /// See [`ClientError`]; 409 `already_ended` for a finished restore.
    pub fn cancel_restore(&self, name: &str) -> Result<RestoreView, ClientError> {
        self.call(
            "POST",
            &format!("/v1/restores/{}/cancel", encode(name)),
            None::<&()>,
        )
    }

    /// `POST /v1/restores/{name}/pods`: the node restored pod `pod` (`<namespace>/<pod>`)
    /// was scheduled to; the answer lists its `pod-volume-restore` jobs.
    ///
    /// # Errors
    /// See [`ClientError`]; 409 `wrong_state` when the restore is not waiting for that
    /// pod, 422 naming `node` for an invalid node name.
    pub fn bind_restore_pod(
        &self,
        name: &str,
        pod: &str,
        node: &str,
    ) -> Result<RestorePodBound, ClientError> {
        let req = RestorePodBind {
            pod: pod.to_string(),
            node: node.to_string(),
        };
        self.call(
            "POST",
            &format!("/v1/restores/{}/pods", encode(name)),
            Some(&req),
        )
    }
}
