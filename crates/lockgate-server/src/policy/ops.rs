//! The policy operations inside the loop.

use super::{policy_digest, write_atomic, PolicyOp, PolicySource};
use crate::auth::Principal;
use crate::error::{policy_error, ApiError};
use crate::event_loop::Loop;
use lockgate_api::{ErrorCode, PolicyAnswer, PolicyView, Role};
use lockgate_core::{Policy, Timestamp};

impl Loop {
    /// Applies one policy operation.
    pub(crate) fn policy_op(&mut self, p: &Principal, op: PolicyOp, now: Timestamp) {
        match op {
            PolicyOp::Get(reply) => {
                let view = PolicyView {
                    digest: self.digest.clone(),
                    policy: self.engine.policy().to_json_value(),
                };
                self.answer(reply, Ok(view));
            }
            PolicyOp::Put {
                allow_unlimited,
                policy,
                text,
                if_match,
                dry_run,
                reply,
            } => {
                let r = if !allow_unlimited
                    && self.engine.policy().limits_anything()
                    && !policy.limits_anything()
                {
                    Err(ApiError::new(
                        ErrorCode::RemovesAllLimits,
                        "this policy limits nothing (no global, limit, node, pool or conflict \
                         rule) and would remove every limit of the active one: send \
                         ?allow_unlimited=true (lockgate policy apply --allow-unlimited) if you \
                         mean it",
                    ))
                } else {
                    self.policy_put(p, *policy, text, if_match, dry_run, now)
                };
                self.audit_policy(&r);
                self.answer(reply, r);
            }
            PolicyOp::Reload(reply) => {
                let r = self.policy_reload(now);
                self.audit_policy(&r);
                self.answer(reply, r);
            }
        }
    }

    fn policy_put(
        &mut self,
        p: &Principal,
        policy: Policy,
        text: String,
        if_match: Option<String>,
        dry_run: bool,
        now: Timestamp,
    ) -> Result<PolicyAnswer, ApiError> {
        p.require(&[Role::Admin], "change the policy")?;
        if let Some(m) = if_match {
            let m = m.trim().trim_matches('"');
            if m != "*" && m != self.digest {
                return Err(ApiError::new(
                    ErrorCode::StalePolicy,
                    format!(
                        "If-Match {m:?} does not match the active policy's digest {:?}: it changed since you read it; read it again",
                        self.digest
                    ),
                ));
            }
        }
        // A URL password sent back as `***` (as GET showed it) keeps the stored one.
        let (policy, text) = if policy.has_masked_secrets() {
            let policy = policy
                .keep_secrets(self.engine.policy())
                .map_err(policy_error)?;
            let text = policy.to_toml_string();
            (policy, text)
        } else {
            (policy, text)
        };
        self.check_schedule_names(&policy)?;
        crate::backups::check_policy_roots(&policy, None).map_err(policy_error)?;
        let digest = policy_digest(&policy);
        let diff = self.engine.policy().diff(&policy);
        if dry_run {
            let r = self.engine.dry_run_policy(policy, now);
            return Ok(PolicyAnswer {
                digest,
                diff,
                admitted_now: r.admitted_now,
                over_limit: r.over_limit,
                dry_run,
            });
        }
        match &self.source {
            PolicySource::File(path) if path.is_dir() => {
                return Err(ApiError::internal(format!(
                        "policy not applied: the policy is the directory {} (its *.toml files merged); edit those files and reload (SIGHUP)",
                    path.display()
                )))
            }
            PolicySource::File(path) => write_atomic(path, &text)
                .map_err(|m| ApiError::internal(format!("policy not applied: {m}")))?,
            PolicySource::Store | PolicySource::Database { .. } => self.batch.policy = Some(text),
        }
        let r = self.engine.apply_policy(policy, now);
        self.digest = digest.clone();
        tracing::info!("policy applied by {}: {} change(s)", p.name, diff.len());
        Ok(PolicyAnswer {
            digest,
            diff,
            admitted_now: r.admitted_now,
            over_limit: r.over_limit,
            dry_run,
        })
    }

    fn policy_reload(&mut self, now: Timestamp) -> Result<PolicyAnswer, ApiError> {
        let (path, to_database) = match &self.source {
            PolicySource::File(path) => (path, false),
            PolicySource::Database { seed: Some(path) } => (path, true),
            _ => {
                return Err(ApiError::new(
                    ErrorCode::NoConfig,
                    "the server has no --config file to reload",
                ))
            }
        };
        let shown = path.display().to_string();
        let (policy, text) = lockgate_host::policy_files::read(path).map_err(|e| match e {
            lockgate_host::policy_files::ReadError::Io { .. } => {
                ApiError::internal(format!("{e}; the active policy stays"))
            }
            lockgate_host::policy_files::ReadError::Policy(e) => {
                tracing::error!("{e}; the active policy stays");
                policy_error(e)
            }
        })?;
        self.check_schedule_names(&policy)?;
        crate::backups::check_policy_roots(&policy, Some(&shown)).map_err(|e| {
            tracing::error!("{e}; the active policy stays");
            policy_error(e)
        })?;
        let digest = policy_digest(&policy);
        if digest == self.digest {
            return Ok(PolicyAnswer {
                digest,
                diff: vec![],
                admitted_now: vec![],
                over_limit: vec![],
                dry_run: false,
            });
        }
        let diff = self.engine.policy().diff(&policy);
        if to_database {
            // Applied to the database as `lockgate policy apply FILE` would.
            self.batch.policy = Some(text);
        }
        let r = self.engine.apply_policy(policy, now);
        self.digest = digest.clone();
        tracing::info!("policy reloaded from {shown}: {} change(s)", diff.len());
        Ok(PolicyAnswer {
            digest,
            diff,
            admitted_now: r.admitted_now,
            over_limit: r.over_limit,
            dry_run: false,
        })
    }
}
