//! What confines a backup created through the API (issue 10 items 1-3; the primitives are
//! `lockgate_blocks::confine`): who may read which input, take which namespaces and run
//! which hooks, and the one answer a refused input gets.
//!
//! Invariants:
//! - an admin's backup is unconfined ([`Confinement::admin`]); every other caller's is
//!   [`Confinement::submitter`] over the union of `--backup-input-root` and
//!   `[blocks] input_roots`, the owner's `backup_namespaces` (none when unset), and hooks
//!   only when `[owners.<name>] allow_hooks = true`;
//! - a refused input path gets one answer, [`input_not_allowed`], whose status and body do
//!   not depend on the path (not even its text): so no answer tells whether a path outside
//!   the roots exists;
//! - every configured root was an existing directory when it was configured (startup,
//!   `PUT /v1/policy`, SIGHUP: [`check_policy_roots`]); a root that disappears later is
//!   left out of the union (logged), it does not widen anything.

use crate::auth::Principal;
use crate::error::ApiError;
use lockgate_api::{BackupRefusal, ErrorCode, Role};
use lockgate_blocks::{Confinement, HookPolicy, InputRefused, InputRoots, LoadError, RefusedItem};
use lockgate_core::policy::{BlocksPolicy, OwnerPolicy, PolicyError};
use lockgate_core::Policy;
use std::path::PathBuf;

/// The policy a backup is planned under: `[blocks]` and the caller's `[owners.<name>]`.
#[derive(Debug, Clone)]
pub struct BackupScope {
    /// The active `[blocks]` section.
    pub blocks: BlocksPolicy,
    /// The caller's owner settings (the defaults when the policy does not name it).
    pub owner: OwnerPolicy,
}

/// The confinement of a backup `p` creates.
pub(crate) fn confinement(
    p: &Principal,
    scope: &BackupScope,
    flag_roots: &[PathBuf],
) -> Confinement {
    if p.role == Role::Admin {
        return Confinement::admin();
    }
    let usable: Vec<&PathBuf> = flag_roots
        .iter()
        .chain(&scope.blocks.input_roots)
        .filter(|root| match InputRoots::new([root]) {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!("{e}: left out of the backup input roots");
                false
            }
        })
        .collect();
    let roots = InputRoots::new(usable).unwrap_or_else(|_| InputRoots::none());
    let hooks = if scope.owner.allow_hooks {
        HookPolicy::Run
    } else {
        HookPolicy::Refuse
    };
    Confinement::submitter(roots, scope.owner.backup_namespaces.iter().cloned(), hooks)
}

/// The one answer for a confined caller's input path (`field`: `from`, a restore's
/// `existing`) that is not an existing path inside a root: 403 `input_not_allowed`, the
/// same body for every such path.
pub(crate) fn input_not_allowed(refused: &InputRefused, field: &str) -> ApiError {
    let message = match refused {
        InputRefused::NoRoots => refused.to_string(),
        InputRefused::Outside { .. } | InputRefused::NotAbsolute { .. } => format!(
            "backup input is refused: `{field}` is not an existing path inside a backup input root (the roots are set by the server's admin: --backup-input-root, [blocks] input_roots)"
        ),
    };
    ApiError::new(ErrorCode::InputNotAllowed, message).field(field)
}

/// The answer for a plan that could not be made, `None` for the errors the caller maps
/// itself (an option, an unreadable input).
pub(crate) fn load_error(e: &LoadError) -> Option<ApiError> {
    match e {
        LoadError::Refused(r) => Some(input_not_allowed(r, "from")),
        LoadError::Limit { cap, .. } => Some(
            ApiError::new(ErrorCode::InputTooLarge, e.to_string()).field(format!("blocks.{cap}")),
        ),
        LoadError::Canceled => Some(ApiError::unavailable(
            "planning the backup was canceled: the client went away",
        )),
        _ => None,
    }
}

/// The refusals of a plan or a result, as the API lists them.
pub(crate) fn refusals(items: &[RefusedItem]) -> Vec<BackupRefusal> {
    items
        .iter()
        .map(|r| BackupRefusal {
            item: r.item.clone(),
            kind: r.kind.clone(),
            namespace: r.namespace.clone(),
            name: r.name.clone(),
            reason: serde_json::to_value(r.reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        })
        .collect()
}

/// Checks that every `[blocks] input_roots` entry of `policy` is an existing directory.
///
/// # Errors
/// A [`PolicyError`] naming `blocks.input_roots[i]`, the root and the system's reason.
pub fn check_policy_roots(policy: &Policy, file: Option<&str>) -> Result<(), PolicyError> {
    for (i, root) in policy.blocks.input_roots.iter().enumerate() {
        InputRoots::new([root]).map_err(|e| PolicyError {
            file: file.map(str::to_string),
            line: None,
            field: format!("blocks.input_roots[{i}]"),
            message: format!(
                "expected an existing directory, got {:?}: {}",
                root.display().to_string(),
                e.message
            ),
        })?;
    }
    Ok(())
}
