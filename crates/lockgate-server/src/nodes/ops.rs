//! The node operations inside the loop, and the offers of agent jobs to their nodes.

use super::{may_manage_node, Acknowledged, NodeOp, Removed};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use crate::protocol::Reply;
use lockgate_api::{Assignment, AssignmentList, NodeList, NodeRegister, NodeView, Role};
use lockgate_core::engine::{NodeRecord, NodeRegistration};
use lockgate_core::event::JobChange;
use lockgate_core::job::{Job, JobId, JobState};
use lockgate_core::policy::Executor;
use lockgate_core::Timestamp;

/// A long-poll on a node's assignments.
#[derive(Debug)]
pub(crate) struct NodeWaiter {
    principal: Principal,
    reply: Reply<AssignmentList>,
}

impl Loop {
    /// Applies one node operation.
    pub(crate) fn node_op(&mut self, p: Principal, op: NodeOp, now: Timestamp) {
        match op {
            NodeOp::Put(name, reg, reply) => {
                let r = self.node_put(&p, name, reg, now);
                self.answer(reply, r);
            }
            NodeOp::Delete(name, reply) => {
                let r = self.node_delete(&p, name, now);
                self.answer(reply, r);
            }
            NodeOp::Heartbeat(name, reply) => {
                let r = self.node_heartbeat(&p, &name, now);
                self.answer(reply, r);
            }
            NodeOp::List(reply) => {
                let nodes = self.engine.nodes().map(|n| self.sampled(n)).collect();
                self.answer(reply, Ok(NodeList { nodes }));
            }
            NodeOp::Get(name, reply) => {
                let r = self.node_view(&name);
                self.answer(reply, r);
            }
            NodeOp::Cordon(name, on, reply) => {
                let r = self.cordon(&p, &name, on, now);
                self.answer(reply, r);
            }
            NodeOp::Assignments(node, reply) => match self.assignments(&p, &node) {
                Ok(Some(list)) => self.answer(reply, Ok(list)),
                Ok(None) => {
                    let ws = self.node_waiters.entry(node).or_default();
                    ws.retain(|w| !w.reply.is_closed());
                    ws.push(NodeWaiter {
                        principal: p,
                        reply,
                    });
                }
                Err(e) => self.answer(reply, Err(e)),
            },
            NodeOp::Ack(node, id, reply) => {
                let r = self.ack(&p, &node, id);
                self.answer(reply, r);
            }
        }
    }

    fn node_record(&self, name: &str) -> Option<NodeRecord> {
        self.engine.node(name).map(|n| NodeRecord {
            registration: NodeRegistration {
                name: n.name.clone(),
                labels: n.labels.clone(),
                resources: n.resources.clone(),
                kinds: n.kinds.clone(),
                instance: n.instance.clone(),
            },
            cordoned: n.cordoned,
        })
    }

    /// The view of `n` with its last fresh sample.
    fn sampled(&self, n: &lockgate_core::engine::Node) -> NodeView {
        let mut view = NodeView::from_node(n);
        view.sample = self.node_meters.view(&n.name, Timestamp(self.last_now));
        view.guarded = self.engine.node_guarded(&n.name);
        view
    }

    fn node_view(&self, name: &str) -> Result<NodeView, ApiError> {
        self.engine
            .node(name)
            .map(|n| self.sampled(n))
            .ok_or_else(|| ApiError::not_found(format!("node {name:?} is not registered")))
    }

    fn node_put(
        &mut self,
        p: &Principal,
        name: String,
        reg: NodeRegister,
        now: Timestamp,
    ) -> Result<NodeView, ApiError> {
        may_manage_node(p, &name)?;
        use lockgate_core::limits::{self, MAX_NODE_KINDS, MAX_NODE_LABELS, MAX_NODE_RESOURCES};
        use lockgate_core::selector::{validate_label_key, validate_label_value};
        crate::nodes::check_node_name("name", &name)?;
        limits::count("labels", reg.labels.len(), MAX_NODE_LABELS)?;
        limits::count("kinds", reg.kinds.len(), MAX_NODE_KINDS)?;
        limits::count("resources", reg.resources.len(), MAX_NODE_RESOURCES)?;
        for k in &reg.kinds {
            validate_label_key(k).map_err(|m| {
                let k = limits::shorten(k);
                ApiError::invalid("kinds", format!("invalid job kind {k:?}: {m}"))
            })?;
        }
        for k in reg.resources.keys() {
            validate_label_key(k).map_err(|m| {
                let k = limits::shorten(k);
                ApiError::invalid(
                    format!("resources.{k}"),
                    format!("invalid pool name {k:?}: {m}"),
                )
            })?;
        }
        for (k, v) in &reg.labels {
            validate_label_key(k).map_err(|m| {
                ApiError::invalid(
                    format!("labels.{k}"),
                    format!("invalid label key {k:?}: {m}"),
                )
            })?;
            validate_label_value(v).map_err(|m| {
                ApiError::invalid(
                    format!("labels.{k}"),
                    format!("invalid value {v:?} of label {k:?}: {m}"),
                )
            })?;
        }
        let reg = NodeRegistration {
            name: name.clone(),
            labels: reg.labels,
            resources: reg.resources,
            kinds: reg.kinds,
            instance: reg.instance,
        };
        self.engine.register_node(reg, now);
        if let Some(r) = self.node_record(&name) {
            self.batch.nodes.push(r);
        }
        self.node_view(&name)
    }

    fn node_delete(
        &mut self,
        p: &Principal,
        name: String,
        now: Timestamp,
    ) -> Result<Removed, ApiError> {
        p.require(&[Role::Admin], "remove nodes")?;
        if !self.engine.remove_node(&name, now) {
            return Err(ApiError::not_found(format!(
                "node {name:?} is not registered"
            )));
        }
        self.offered.remove(&name);
        self.batch.removed_nodes.push(name.clone());
        Ok(Removed { removed: name })
    }

    fn node_heartbeat(
        &mut self,
        p: &Principal,
        name: &str,
        now: Timestamp,
    ) -> Result<NodeView, ApiError> {
        may_manage_node(p, name)?;
        if !self.engine.node_heartbeat(name, now) {
            return Err(ApiError::not_found(format!(
                "node {name:?} is not registered: PUT /v1/nodes/{name} first"
            )));
        }
        self.node_view(name)
    }

    fn cordon(
        &mut self,
        p: &Principal,
        name: &str,
        on: bool,
        now: Timestamp,
    ) -> Result<NodeView, ApiError> {
        p.require(
            &[Role::Admin],
            if on { "cordon nodes" } else { "uncordon nodes" },
        )?;
        if !self.engine.set_cordon(name, on, now) {
            return Err(ApiError::not_found(format!(
                "node {name:?} is not registered"
            )));
        }
        if let Some(r) = self.node_record(name) {
            self.batch.nodes.push(r);
        }
        self.node_view(name)
    }

    /// Agent jobs admitted on the node and not acknowledged; `None` when there are none.
    fn assignments(
        &mut self,
        p: &Principal,
        node: &str,
    ) -> Result<Option<AssignmentList>, ApiError> {
        may_manage_node(p, node)?;
        let Some(offered) = self.offered.get_mut(node) else {
            return Ok(None);
        };
        let ttl = self.engine.policy().leases.ttl;
        let mut out = Vec::new();
        let mut stale = Vec::new();
        for (&id, &token) in offered.iter() {
            match self.engine.job(id) {
                Some(j) if j.lease.map(|l| l.token) == Some(token) && j.state.is_admitted() => {
                    let stage = if j.state == JobState::Running {
                        "run"
                    } else {
                        "prepare"
                    };
                    if j.state != JobState::Prepared {
                        out.push(Assignment {
                            stage: stage.into(),
                            token,
                            job: lockgate_api::JobView::from_job(j, ttl),
                        });
                    }
                }
                _ => stale.push(id),
            }
        }
        for id in stale {
            offered.remove(&id);
        }
        if out.is_empty() {
            return Ok(None);
        }
        Ok(Some(AssignmentList { assignments: out }))
    }

    fn ack(&mut self, p: &Principal, node: &str, id: JobId) -> Result<Acknowledged, ApiError> {
        may_manage_node(p, node)?;
        let removed = self.offered.get_mut(node).and_then(|o| o.remove(&id));
        match removed {
            Some(_) => Ok(Acknowledged { acknowledged: id }),
            None => Err(ApiError::not_found(format!(
                "job {id} is not offered to node {node:?}"
            ))),
        }
    }

    fn offer(&mut self, job: &Job) {
        if let (Some(node), Some(l)) = (job.node(), job.lease) {
            self.offered
                .entry(node.to_string())
                .or_default()
                .insert(job.id, l.token);
        }
    }

    /// Follows one job change: an agent job admitted (to prepare, or to run) is offered
    /// to its node; an ended job is no longer offered.
    pub(crate) fn track_offer(&mut self, change: JobChange, job: &Job) {
        if job.executor == Executor::Agent {
            let admitted = match change {
                JobChange::AdmittedPrepare => job.prepare_started_at.is_some(),
                JobChange::Started => job.prepare_started_at.is_some() || job.started_at.is_some(),
                _ => false,
            };
            if admitted {
                self.offer(job);
            }
        }
        if change == JobChange::Finished {
            if let Some(node) = job.node() {
                if let Some(o) = self.offered.get_mut(node) {
                    o.remove(&job.id);
                }
            }
        }
        // A preempted job goes back to the queue without ending, and without its node.
        if change == JobChange::Requeued && job.preemptions > 0 {
            for o in self.offered.values_mut() {
                o.remove(&job.id);
            }
        }
    }

    /// Re-offers agent jobs admitted before a restart (acknowledgements are not durable:
    /// the agent must tell a job it already runs by its id).
    pub fn reoffer(&mut self) {
        let jobs: Vec<Job> = self
            .engine
            .jobs()
            .filter(|j| {
                j.executor == Executor::Agent
                    && matches!(j.state, JobState::Preparing | JobState::Running)
            })
            .cloned()
            .collect();
        for j in &jobs {
            self.offer(j);
        }
    }

    /// After a commit: answers the node long-polls that have offers now. Sends directly:
    /// the commit that made the offers has happened.
    pub(crate) fn wake_node_waiters(&mut self) {
        if self.node_waiters.is_empty() {
            return;
        }
        let nodes: Vec<String> = self
            .node_waiters
            .keys()
            .filter(|n| self.offered.get(*n).is_some_and(|o| !o.is_empty()))
            .cloned()
            .collect();
        for node in nodes {
            for w in self.node_waiters.remove(&node).unwrap_or_default() {
                let r = self.assignments(&w.principal, &node).map(|a| {
                    a.unwrap_or(AssignmentList {
                        assignments: vec![],
                    })
                });
                let _ = w.reply.send(r);
            }
        }
    }

    /// Answers every node long-poll with 503 (shutdown).
    pub(crate) fn stop_node_waiters(&mut self) {
        for (_, ws) in self.node_waiters.drain() {
            for w in ws {
                let _ = w.reply.send(Err(ApiError::unavailable(
                    "the server is shutting down; poll again",
                )));
            }
        }
    }
}
