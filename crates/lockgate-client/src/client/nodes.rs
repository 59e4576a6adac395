//! The node calls: list, show, register, cordon, remove, and the agent's own (node
//! heartbeat, assignments long-poll, acknowledgement).

use super::encode;
use crate::{Client, ClientError, CALL_TIMEOUT};
use lockgate_api::{AssignmentList, NodeList, NodeRegister, NodeView};
use std::time::Duration;

impl Client {
    /// `GET /v1/nodes`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn nodes(&self) -> Result<NodeList, ClientError> {
        self.call("GET", "/v1/nodes", None::<&()>)
    }

    /// `GET /v1/nodes/{name}`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn node(&self, name: &str) -> Result<NodeView, ClientError> {
        self.call("GET", &format!("/v1/nodes/{}", encode(name)), None::<&()>)
    }

    /// `PUT /v1/nodes/{name}`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn register_node(&self, name: &str, reg: &NodeRegister) -> Result<NodeView, ClientError> {
        self.call("PUT", &format!("/v1/nodes/{}", encode(name)), Some(reg))
    }

    /// `POST /v1/nodes/{name}/cordon` or `/uncordon`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn cordon(&self, name: &str, cordon: bool) -> Result<NodeView, ClientError> {
        let verb = if cordon { "cordon" } else { "uncordon" };
        self.call(
            "POST",
            &format!("/v1/nodes/{}/{verb}", encode(name)),
            None::<&()>,
        )
    }

    /// `DELETE /v1/nodes/{name}`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn remove_node(&self, name: &str) -> Result<serde_json::Value, ClientError> {
        self.call(
            "DELETE",
            &format!("/v1/nodes/{}", encode(name)),
            None::<&()>,
        )
    }

    /// `POST /v1/nodes/{name}/heartbeat`: the node is alive (a 404 when the server has
    /// forgotten it: register again).
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn node_heartbeat(&self, name: &str) -> Result<serde_json::Value, ClientError> {
        let path = format!("/v1/nodes/{}/heartbeat", encode(name));
        self.call("POST", &path, None::<&()>)
    }

    /// `GET /v1/nodes/{name}/assignments?timeout_s=..`: the jobs placed on the node that
    /// its agent has not acknowledged, waiting up to `timeout` for one.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn assignments(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<AssignmentList, ClientError> {
        let (poll, within) = self.long_poll(timeout, CALL_TIMEOUT);
        let path = format!(
            "/v1/nodes/{}/assignments?timeout_s={}",
            encode(name),
            poll.as_secs_f64()
        );
        self.call_status("GET", &path, None::<&()>, within)
            .map(|(_, v)| v)
    }

    /// `POST /v1/nodes/{name}/assignments/{id}/ack`: the agent has taken the job.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub fn ack_assignment(&self, name: &str, id: u64) -> Result<serde_json::Value, ClientError> {
        let path = format!("/v1/nodes/{}/assignments/{id}/ack", encode(name));
        self.call("POST", &path, None::<&()>)
    }
}
