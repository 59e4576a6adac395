//! The cluster call: the replicas on one database and which one leads.

use crate::{Client, ClientError};
use lockgate_api::ClusterView;

impl Client {
    /// `GET /v1/cluster` (answered by standbys too): the replicas, the leader, the term.
    ///
    /// # Errors
    /// See [`ClientError`]; 404 from a server that is not part of a cluster.
    pub fn cluster(&self) -> Result<ClusterView, ClientError> {
        self.call("GET", "/v1/cluster", None::<&()>)
    }
}
