//! The item-block backup calls: create, list, show, result, cancel.

use super::encode;
use crate::{Client, ClientError};
use lockgate_api::{BackupList, BackupRequest, BackupView};

impl Client {
    /// `POST /v1/backups` (without `dry_run`): the new backup, queued or running.
    ///
    /// # Errors
    /// See [`ClientError`]; bad input is a 422 naming the file, item or field.
    pub fn create_backup(&self, req: &BackupRequest) -> Result<BackupView, ClientError> {
        self.call("POST", "/v1/backups", Some(req))
    }

    /// `GET /v1/backups`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn backups(&self) -> Result<BackupList, ClientError> {
        self.call("GET", "/v1/backups", None::<&()>)
    }

    /// `GET /v1/backups/{name}`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn backup(&self, name: &str) -> Result<BackupView, ClientError> {
        self.call("GET", &format!("/v1/backups/{}", encode(name)), None::<&()>)
    }

    /// `GET /v1/backups/{name}/result`: `metadata/result.json` of a finished backup's
    /// archive, decoded into `T`.
    ///
    /// # Errors
    /// See [`ClientError`]; 409 `not_finished` while it runs, 404 when it has no archive.
    pub fn backup_result<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<T, ClientError> {
        self.call(
            "GET",
            &format!("/v1/backups/{}/result", encode(name)),
            None::<&()>,
        )
    }

    /// `POST /v1/backups/{name}/cancel`.
    ///
    /// # Errors
    /// See [`ClientError`]; 409 `already_ended` for a finished backup.
    pub fn cancel_backup(&self, name: &str) -> Result<BackupView, ClientError> {
        self.call(
            "POST",
            &format!("/v1/backups/{}/cancel", encode(name)),
            None::<&()>,
        )
    }
}
