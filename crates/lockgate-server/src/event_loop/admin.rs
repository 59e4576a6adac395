//! Policy, node, token and event operations of the event loop.

use super::{json, ok, policy_digest, Answer, Loop, PolicySource, Reply};
use crate::auth::{self, Principal};
use crate::error::ApiError;
use axum::http::StatusCode;
use lockgate_api::{
    Assignment, AssignmentList, EventList, EventView, NodeList, NodeRegister, NodeView,
    PolicyAnswer, PolicyView, Role, TokenCreate, TokenCreated, TokenInfo,
};
use lockgate_core::engine::NodeRegistration;
use lockgate_core::job::{JobId, JobState};
use lockgate_core::{Policy, Timestamp};
use lockgate_store::{NodeRecord, TokenRecord};
use serde_json::Value;
use std::path::Path;

/// Writes `text` to `path` atomically: a temporary file in the same directory, synced, the
/// old file kept as `FILE.bak`, then a rename.
///
/// # Errors
/// The I/O error, with the path.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{name}.tmp"));
    let bak = dir.join(format!("{name}.bak"));
    let fail =
        |what: &str, p: &Path, e: std::io::Error| format!("cannot {what} {}: {e}", p.display());
    let mut f = std::fs::File::create(&tmp).map_err(|e| fail("create", &tmp, e))?;
    f.write_all(text.as_bytes())
        .map_err(|e| fail("write", &tmp, e))?;
    f.sync_all().map_err(|e| fail("sync", &tmp, e))?;
    if path.exists() {
        std::fs::copy(path, &bak).map_err(|e| fail("back up to", &bak, e))?;
    }
    std::fs::rename(&tmp, path).map_err(|e| fail("replace", path, e))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

impl Loop {
    pub(crate) fn policy_get(&mut self, _p: &Principal) -> Reply {
        ok(json(&PolicyView {
            digest: self.digest.clone(),
            policy: self.engine.policy().to_json_value(),
        }))
    }

    pub(crate) fn policy_put(
        &mut self,
        p: &Principal,
        policy: Policy,
        text: String,
        if_match: Option<String>,
        dry_run: bool,
        now: Timestamp,
    ) -> Reply {
        p.require(&[Role::Admin], "change the policy")?;
        if let Some(m) = if_match {
            let m = m.trim().trim_matches('"');
            if m != "*" && m != self.digest {
                return Err(ApiError::new(
                    StatusCode::PRECONDITION_FAILED,
                    "stale_policy",
                    format!(
                        "If-Match {m:?} does not match the active policy's digest {:?}: it changed since you read it; read it again",
                        self.digest
                    ),
                ));
            }
        }
        self.check_schedule_names(&policy)?;
        let digest = policy_digest(&policy);
        let diff = self.engine.policy().diff(&policy);
        if dry_run {
            let r = self.engine.dry_run_policy(policy, now);
            return ok(json(&PolicyAnswer {
                digest,
                diff,
                admitted_now: r.admitted_now,
                over_limit: r.over_limit,
                dry_run,
            }));
        }
        match &self.source {
            PolicySource::File(path) => write_atomic(path, &text)
                .map_err(|m| ApiError::internal(format!("policy not applied: {m}")))?,
            PolicySource::Store => self.batch.policy = Some(text),
        }
        let r = self.engine.apply_policy(policy, now);
        self.digest = digest.clone();
        tracing::info!("policy applied by {}: {} change(s)", p.name, diff.len());
        ok(json(&PolicyAnswer {
            digest,
            diff,
            admitted_now: r.admitted_now,
            over_limit: r.over_limit,
            dry_run,
        }))
    }

    pub(crate) fn policy_reload(&mut self, now: Timestamp) -> Reply {
        let PolicySource::File(path) = &self.source else {
            return Err(ApiError::conflict(
                "no_config",
                "the server has no --config file to reload",
            ));
        };
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| {
            ApiError::internal(format!("cannot read {shown}: {e}; the active policy stays"))
        })?;
        let policy = Policy::from_toml(&text, Some(&shown)).map_err(|e| {
            tracing::error!("{e}; the active policy stays");
            crate::http::policy_error(e)
        })?;
        self.check_schedule_names(&policy)?;
        let digest = policy_digest(&policy);
        if digest == self.digest {
            return ok(json(&PolicyAnswer {
                digest,
                diff: vec![],
                admitted_now: vec![],
                over_limit: vec![],
                dry_run: false,
            }));
        }
        let diff = self.engine.policy().diff(&policy);
        let r = self.engine.apply_policy(policy, now);
        self.digest = digest.clone();
        tracing::info!("policy reloaded from {shown}: {} change(s)", diff.len());
        ok(json(&PolicyAnswer {
            digest,
            diff,
            admitted_now: r.admitted_now,
            over_limit: r.over_limit,
            dry_run: false,
        }))
    }

    fn node_record(&self, name: &str) -> Option<NodeRecord> {
        self.engine.node(name).map(|n| NodeRecord {
            registration: NodeRegistration {
                name: n.name.clone(),
                labels: n.labels.clone(),
                resources: n.resources.clone(),
                kinds: n.kinds.clone(),
            },
            cordoned: n.cordoned,
        })
    }

    fn node_view(&self, name: &str) -> Result<Value, ApiError> {
        self.engine
            .node(name)
            .map(|n| json(&NodeView::from_node(n)))
            .ok_or_else(|| ApiError::not_found(format!("node {name:?} is not registered")))
    }

    pub(crate) fn may_manage_node(p: &Principal, name: &str) -> Result<(), ApiError> {
        match p.role {
            Role::Admin => Ok(()),
            Role::Agent if p.node.as_deref() == Some(name) => Ok(()),
            _ => Err(ApiError::forbidden(format!(
                "{} token {:?} may not manage node {name:?} (admin, or an agent token bound to it)",
                p.role, p.name
            ))),
        }
    }

    pub(crate) fn node_put(
        &mut self,
        p: &Principal,
        name: String,
        reg: NodeRegister,
        now: Timestamp,
    ) -> Reply {
        Self::may_manage_node(p, &name)?;
        if name.is_empty()
            || name.len() > 253
            || name.contains(|c: char| c.is_whitespace() || c == '/')
        {
            return Err(ApiError::invalid(
                "name",
                format!("invalid node name {name:?}"),
            ));
        }
        for k in reg.labels.keys() {
            if k.is_empty() || k.contains(char::is_whitespace) {
                return Err(ApiError::invalid(
                    format!("labels.{k}"),
                    format!("invalid label key {k:?}"),
                ));
            }
        }
        let reg = NodeRegistration {
            name: name.clone(),
            labels: reg.labels,
            resources: reg.resources,
            kinds: reg.kinds,
        };
        self.engine.register_node(reg, now);
        if let Some(r) = self.node_record(&name) {
            self.batch.nodes.push(r);
        }
        ok(self.node_view(&name)?)
    }

    pub(crate) fn node_delete(&mut self, p: &Principal, name: &str, now: Timestamp) -> Reply {
        p.require(&[Role::Admin], "remove nodes")?;
        if !self.engine.remove_node(name, now) {
            return Err(ApiError::not_found(format!(
                "node {name:?} is not registered"
            )));
        }
        self.offered.remove(name);
        self.batch.removed_nodes.push(name.to_string());
        ok(serde_json::json!({ "removed": name }))
    }

    pub(crate) fn node_heartbeat(&mut self, p: &Principal, name: &str, now: Timestamp) -> Reply {
        Self::may_manage_node(p, name)?;
        if !self.engine.node_heartbeat(name, now) {
            return Err(ApiError::not_found(format!(
                "node {name:?} is not registered: PUT /v1/nodes/{name} first"
            )));
        }
        ok(self.node_view(name)?)
    }

    pub(crate) fn node_list(&mut self, _p: &Principal) -> Reply {
        let nodes = self.engine.nodes().map(NodeView::from_node).collect();
        ok(json(&NodeList { nodes }))
    }

    pub(crate) fn node_get(&mut self, _p: &Principal, name: &str) -> Reply {
        ok(self.node_view(name)?)
    }

    pub(crate) fn cordon(&mut self, p: &Principal, name: &str, on: bool, now: Timestamp) -> Reply {
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
        ok(self.node_view(name)?)
    }

    /// Agent jobs admitted on the node and not acknowledged; `None` when there are none.
    pub(crate) fn assignments(
        &mut self,
        p: &Principal,
        node: &str,
        _now: Timestamp,
    ) -> Result<Option<Answer>, ApiError> {
        Self::may_manage_node(p, node)?;
        let Some(offered) = self.offered.get_mut(node) else {
            return Ok(None);
        };
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
                            job: lockgate_api::JobView::from_job(
                                j,
                                self.engine.policy().leases.ttl,
                            ),
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
        Ok(Some(Answer::Json(
            StatusCode::OK,
            json(&AssignmentList { assignments: out }),
        )))
    }

    pub(crate) fn ack(&mut self, p: &Principal, node: &str, id: JobId) -> Reply {
        Self::may_manage_node(p, node)?;
        let removed = self.offered.get_mut(node).and_then(|o| o.remove(&id));
        match removed {
            Some(_) => ok(serde_json::json!({ "acknowledged": id })),
            None => Err(ApiError::not_found(format!(
                "job {id} is not offered to node {node:?}"
            ))),
        }
    }

    /// Re-offers agent jobs admitted before a restart (acknowledgements are not durable:
    /// the agent must tell a job it already runs by its id).
    pub fn reoffer(&mut self) {
        for j in self.engine.jobs() {
            if j.executor == lockgate_core::policy::Executor::Agent
                && matches!(j.state, JobState::Preparing | JobState::Running)
            {
                if let (Some(n), Some(l)) = (j.node(), j.lease) {
                    self.offered
                        .entry(n.to_string())
                        .or_default()
                        .insert(j.id, l.token);
                }
            }
        }
    }

    pub(crate) fn token_create(
        &mut self,
        p: &Principal,
        req: TokenCreate,
        now: Timestamp,
    ) -> Reply {
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
        let exists = self.store_tokens()?.iter().any(|t| t.name == req.name);
        if exists {
            return Err(ApiError::conflict(
                "exists",
                format!("a token named {:?} exists; revoke it first", req.name),
            ));
        }
        let token = auth::new_token();
        let rec = TokenRecord {
            name: req.name.clone(),
            role: req.role.as_str().into(),
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
        Ok(Answer::Json(
            StatusCode::CREATED,
            json(&TokenCreated {
                name: req.name,
                role: req.role,
                node: req.node,
                token,
            }),
        ))
    }

    fn store_tokens(&mut self) -> Result<Vec<TokenRecord>, ApiError> {
        let mut all = self.store.load_tokens()?;
        all.extend(self.batch.tokens.iter().cloned());
        all.retain(|t| !self.batch.revoked_tokens.contains(&t.name));
        Ok(all)
    }

    pub(crate) fn token_list(&mut self, p: &Principal) -> Reply {
        p.require(&[Role::Admin], "list tokens")?;
        let list: Vec<TokenInfo> = self
            .store_tokens()?
            .into_iter()
            .map(|t| TokenInfo {
                name: t.name,
                role: Role::parse(&t.role).unwrap_or(Role::Viewer),
                node: t.node,
                created_at: lockgate_api::time::format(t.created_at),
            })
            .collect();
        ok(json(&list))
    }

    pub(crate) fn token_revoke(&mut self, p: &Principal, name: &str) -> Reply {
        p.require(&[Role::Admin], "revoke tokens")?;
        if !self.store_tokens()?.iter().any(|t| t.name == name) {
            return Err(ApiError::not_found(format!("no token named {name:?}")));
        }
        self.tokens.remove_name(name);
        self.batch.revoked_tokens.push(name.to_string());
        ok(serde_json::json!({ "revoked": name }))
    }

    pub(crate) fn events(&mut self, p: &Principal, after: u64, limit: usize) -> Reply {
        let rows = self.store.events_after(after, limit.clamp(1, 10_000))?;
        let mut events = Vec::with_capacity(rows.len());
        for r in rows {
            let Ok(Value::Object(data)) = serde_json::from_str::<Value>(&r.data) else {
                continue;
            };
            let ev = EventView {
                seq: r.seq,
                at: lockgate_api::time::format(r.at),
                data,
            };
            if visible(p, &ev) {
                events.push(ev);
            }
        }
        ok(json(&EventList { events }))
    }
}

/// Whether `p` may see an event: submitters see their own jobs' events, agents their
/// node's, everyone the node and policy events.
pub fn visible(p: &Principal, ev: &EventView) -> bool {
    let Some(job) = ev.data.get("job") else {
        return true;
    };
    match p.role {
        Role::Admin | Role::Viewer => true,
        Role::Submitter => job.get("owner").and_then(Value::as_str) == Some(p.name.as_str()),
        Role::Agent => job.get("node").and_then(Value::as_str) == p.node.as_deref(),
    }
}
