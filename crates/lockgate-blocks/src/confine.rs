//! Confinement of one backup: which input paths it may read ([`InputScope`]), which
//! namespaces it may take ([`NamespaceScope`]) and whether it may run the hooks its
//! manifests annotate ([`HookPolicy`]); together a [`Confinement`], carried by
//! [`PlanOptions::confinement`](crate::PlanOptions::confinement) into the [`Plan`](crate::Plan)
//! and from there into the run.
//!
//! Invariants:
//! - a confined path is resolved component by component from a root (`resolve_inside`): a
//!   `..` may not climb above the root, a symlink's target is read and resolved the same
//!   way (an absolute one must start with a root again), and only paths inside a root are
//!   ever `lstat`ed or `readlink`ed. So nothing outside the roots is opened, listed or even
//!   looked up: not even `realpath`'s walk through `outside/dir/../..` can tell whether
//!   `outside/dir` exists;
//! - every refusal of a path carries only the path as given: a path that does not exist, one
//!   that cannot be read and one that exists outside every root get the same
//!   [`InputRefused`] value (same variant, same text), so a refusal is no existence oracle;
//! - an [`InputRoots`] without a root refuses every path ([`InputRefused::NoRoots`]);
//! - [`Confinement::default`] is [`Confinement::admin`] (unconfined, every namespace, hooks
//!   run): today's behaviour for the server's admin and for local use. A server must build a
//!   [`Confinement::submitter`] for every other caller.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, VecDeque};
use std::ffi::OsString;
use std::fmt;
use std::path::{Component, Path, PathBuf};

/// Symlinks followed while resolving one path (Linux's `ELOOP` limit).
const MAX_SYMLINK_HOPS: usize = 40;

/// What a backup's input path may be.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum InputScope {
    /// Any path the server's user can read (an admin's backup, a local `--dry-run`).
    #[default]
    Unconfined,
    /// Only paths inside these roots; with no root, nothing.
    Confined(InputRoots),
}

impl InputScope {
    /// The path to read for `from`: `from` itself when unconfined, else its canonical form
    /// if it lies inside a root.
    ///
    /// # Errors
    /// [`InputRefused`] when confined and `from` is not an existing path inside a root; the
    /// error does not depend on whether `from` exists.
    pub fn resolve(&self, from: &Path) -> Result<PathBuf, InputRefused> {
        match self {
            InputScope::Unconfined => Ok(from.to_path_buf()),
            InputScope::Confined(roots) => roots.resolve(from),
        }
    }

    /// Whether a canonical path may be read (always when unconfined).
    pub fn allows(&self, canonical: &Path) -> bool {
        match self {
            InputScope::Unconfined => true,
            InputScope::Confined(roots) => roots.contains(canonical),
        }
    }

    /// Whether this is [`InputScope::Confined`].
    pub fn is_confined(&self) -> bool {
        matches!(self, InputScope::Confined(_))
    }

    /// Where a symlink found by the walk leads, if the walk may follow it: unconfined, its
    /// canonical target; confined, its target resolved inside the roots (`None` when it
    /// leads out or nowhere, without looking outside).
    pub(crate) fn follow(&self, link: &Path) -> Result<PathBuf, Option<std::io::Error>> {
        match self {
            InputScope::Unconfined => std::fs::canonicalize(link).map_err(Some),
            InputScope::Confined(roots) => roots.resolve_inside(link).ok_or(None),
        }
    }
}

/// The directories a confined backup may read below (`--backup-input-root`,
/// `[blocks] input_roots`). Built once from the admin's configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InputRoots {
    /// `(as configured, canonical)` per root.
    roots: Vec<(PathBuf, PathBuf)>,
}

impl InputRoots {
    /// No root: every path is refused.
    pub fn none() -> InputRoots {
        InputRoots::default()
    }

    /// The roots, each an existing directory given as an absolute path.
    ///
    /// # Errors
    /// [`RootError`] naming the first root that is relative, missing or not a directory.
    pub fn new<P: AsRef<Path>>(roots: impl IntoIterator<Item = P>) -> Result<Self, RootError> {
        let mut out = Vec::new();
        for root in roots {
            let root = root.as_ref();
            let fail = |message: String| RootError {
                root: root.to_path_buf(),
                message,
            };
            if !root.is_absolute() {
                return Err(fail("expected an absolute path".into()));
            }
            let canonical = std::fs::canonicalize(root).map_err(|e| fail(e.to_string()))?;
            if !std::fs::metadata(&canonical).is_ok_and(|m| m.is_dir()) {
                return Err(fail("not a directory".into()));
            }
            out.push((root.to_path_buf(), canonical));
        }
        Ok(InputRoots { roots: out })
    }

    /// The canonical roots.
    pub fn roots(&self) -> impl Iterator<Item = &Path> {
        self.roots.iter().map(|(_, c)| c.as_path())
    }

    /// Whether there is no root.
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
    }

    /// Whether a canonical path is a root or below one.
    pub fn contains(&self, canonical: &Path) -> bool {
        self.roots.iter().any(|(_, c)| canonical.starts_with(c))
    }

    /// The canonical form of `from` if it is an existing path inside a root.
    ///
    /// `from` must start with a root, as configured or in canonical form (compared by
    /// components, without touching the file system); the rest is resolved from there one
    /// component at a time: `..` may not climb above the root, and a symlink's target must
    /// resolve inside a root the same way. Nothing outside the roots is looked at.
    ///
    /// # Errors
    /// [`InputRefused::NoRoots`] without roots; [`InputRefused::NotAbsolute`] for a relative
    /// path; else [`InputRefused::Outside`], the same value whether `from` is missing,
    /// unreadable, or exists outside every root.
    pub fn resolve(&self, from: &Path) -> Result<PathBuf, InputRefused> {
        if self.roots.is_empty() {
            return Err(InputRefused::NoRoots);
        }
        if !from.is_absolute() {
            return Err(InputRefused::NotAbsolute {
                from: from.to_path_buf(),
            });
        }
        self.resolve_inside(from)
            .ok_or_else(|| InputRefused::Outside {
                from: from.to_path_buf(),
            })
    }

    /// The canonical root an absolute path starts with, and the steps after it.
    fn enter(&self, path: &Path) -> Option<(PathBuf, VecDeque<Step>)> {
        self.roots.iter().find_map(|(given, canonical)| {
            let rest = path
                .strip_prefix(canonical)
                .or_else(|_| path.strip_prefix(given))
                .ok()?;
            Some((canonical.clone(), steps(rest)))
        })
    }

    /// `realpath(3)` confined to the roots: `None` as soon as the path would leave them, a
    /// component is missing or unreadable, or symlinks nest too deep. Every path `lstat`ed
    /// or read as a link is a child of a path inside a root.
    fn resolve_inside(&self, path: &Path) -> Option<PathBuf> {
        let (mut cur, mut queue) = self.enter(path)?;
        let mut hops = 0;
        while let Some(step) = queue.pop_front() {
            let name = match step {
                Step::Up => {
                    cur.pop();
                    if !self.contains(&cur) {
                        return None;
                    }
                    continue;
                }
                Step::Name(name) => name,
            };
            let next = cur.join(&name);
            if !std::fs::symlink_metadata(&next)
                .ok()?
                .file_type()
                .is_symlink()
            {
                cur = next;
                continue;
            }
            hops += 1;
            if hops > MAX_SYMLINK_HOPS {
                return None;
            }
            let target = std::fs::read_link(&next).ok()?;
            let mut ahead = if target.is_absolute() {
                let (root, ahead) = self.enter(&target)?;
                cur = root;
                ahead
            } else {
                steps(&target)
            };
            ahead.extend(queue);
            queue = ahead;
        }
        Some(cur)
    }
}

/// One step of a path being resolved.
enum Step {
    Up,
    Name(OsString),
}

/// The steps of a relative path (`.` dropped).
fn steps(path: &Path) -> VecDeque<Step> {
    path.components()
        .filter_map(|c| match c {
            Component::ParentDir => Some(Step::Up),
            Component::Normal(n) => Some(Step::Name(n.to_os_string())),
            _ => None,
        })
        .collect()
}

/// A configured input root is unusable (a startup or policy error for the admin).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("backup input root {}: {message}", root.display())]
pub struct RootError {
    /// The root as configured.
    pub root: PathBuf,
    /// What is wrong (not absolute, the operating system's reason, not a directory).
    pub message: String,
}

/// A confined caller's input path was refused. The text names only the path as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputRefused {
    /// Not an existing path inside a root: missing, unreadable, or outside (one answer).
    #[error(
        "backup input {} is refused: it is not an existing path inside a backup input root (the roots are set by the server's admin)",
        from.display()
    )]
    Outside {
        /// The path as given.
        from: PathBuf,
    },
    /// The server has no input roots: only an admin may back up from its file system.
    #[error("backup input is refused: the server has no backup input roots, so only an admin may back up from its file system")]
    NoRoots,
    /// The path is relative.
    #[error("backup input {} is refused: expected an absolute path inside a backup input root", from.display())]
    NotAbsolute {
        /// The path as given.
        from: PathBuf,
    },
}

/// Which namespaces' items a backup may take.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NamespaceScope {
    /// Every namespace, and every cluster-scoped item the filters take (an admin).
    #[default]
    All,
    /// Only these namespaces (an owner's `backup_namespaces`; empty: none). A cluster-scoped
    /// item is taken only when a taken item relates to it (the PV of its PVC, its
    /// Namespace, its CRD).
    Only(BTreeSet<String>),
}

impl NamespaceScope {
    /// Only the namespaces listed.
    pub fn only<S: Into<String>>(namespaces: impl IntoIterator<Item = S>) -> NamespaceScope {
        NamespaceScope::Only(namespaces.into_iter().map(Into::into).collect())
    }

    /// Whether items of namespace `ns` may be taken.
    pub fn allows(&self, ns: &str) -> bool {
        match self {
            NamespaceScope::All => true,
            NamespaceScope::Only(set) => set.contains(ns),
        }
    }
}

/// Whether a backup runs the pre/post hooks its pods' annotations name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HookPolicy {
    /// Run them (an admin's backup, or an owner the policy allows hooks).
    #[default]
    Run,
    /// Run none; every pod that annotates a hook is named in the plan's and the result's
    /// `refused` list (its manifest and volumes are still backed up).
    Refuse,
}

/// Everything that confines one backup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    /// Which input paths may be read.
    pub input: InputScope,
    /// Which namespaces may be taken.
    pub namespaces: NamespaceScope,
    /// Whether manifest hooks run.
    pub hooks: HookPolicy,
}

impl Confinement {
    /// An admin's backup: any input path, every namespace, hooks run (the default).
    pub fn admin() -> Confinement {
        Confinement::default()
    }

    /// A non-admin's backup: input inside `roots`, items of `namespaces` only (none when
    /// empty), hooks as `hooks` says (by the policy: [`HookPolicy::Refuse`] unless the
    /// owner is allowed them).
    pub fn submitter<S: Into<String>>(
        roots: InputRoots,
        namespaces: impl IntoIterator<Item = S>,
        hooks: HookPolicy,
    ) -> Confinement {
        Confinement {
            input: InputScope::Confined(roots),
            namespaces: NamespaceScope::only(namespaces),
            hooks,
        }
    }
}

/// Why an item of the input was not taken, or its hooks not run, under a [`Confinement`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalReason {
    /// Its namespace is not one the backup may take.
    NamespaceNotAllowed,
    /// A cluster-scoped item no taken item relates to, in a namespace-confined backup.
    ClusterScopedNotAllowed,
    /// A pod whose hooks were not run: the backup may not run manifest hooks.
    HooksNotAllowed,
}

impl fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RefusalReason::NamespaceNotAllowed => {
                "not taken: the backup may not include this namespace (backup_namespaces)"
            }
            RefusalReason::ClusterScopedNotAllowed => {
                "not taken: a cluster-scoped item that no item of the backup's namespaces relates to"
            }
            RefusalReason::HooksNotAllowed => {
                "hooks not run: the backup may not run manifest hooks (the item itself is backed up)"
            }
        })
    }
}

/// An item refused by the backup's [`Confinement`], named in the dry run
/// ([`Plan::refused`](crate::Plan::refused)) and in [`BackupResult::refused`](crate::BackupResult::refused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedItem {
    /// Item name (`pods/kube-system/etcd-0`).
    pub item: String,
    /// Kind (`Pod`).
    pub kind: String,
    /// Namespace, `None` for cluster-scoped items.
    pub namespace: Option<String>,
    /// `metadata.name`.
    pub name: String,
    /// Why.
    pub reason: RefusalReason,
}

impl fmt::Display for RefusedItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.item, self.reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_compare_by_components_not_by_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("data");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(dir.path().join("data2")).unwrap();
        let roots = InputRoots::new([&root]).unwrap();
        let canonical = std::fs::canonicalize(&root).unwrap();
        assert!(roots.contains(&canonical.join("x.json")));
        assert!(!roots.contains(&canonical.with_file_name("data2")));
    }

    #[test]
    fn a_root_must_be_an_existing_absolute_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(InputRoots::new(["relative"])
            .unwrap_err()
            .message
            .contains("absolute"));
        assert_eq!(
            InputRoots::new([&file]).unwrap_err().message,
            "not a directory"
        );
        let missing = InputRoots::new([dir.path().join("missing")]).unwrap_err();
        assert!(missing.to_string().contains("missing"), "{missing}");
    }

    #[test]
    fn no_roots_refuses_every_path() {
        let roots = InputRoots::none();
        assert_eq!(roots.resolve(Path::new("/")), Err(InputRefused::NoRoots));
        assert_eq!(
            InputScope::Confined(roots).resolve(Path::new("/etc/passwd")),
            Err(InputRefused::NoRoots)
        );
    }

    #[test]
    fn unconfined_returns_the_path_as_given() {
        let p = Path::new("/no/such/file");
        assert_eq!(InputScope::Unconfined.resolve(p).unwrap(), p);
    }
}
