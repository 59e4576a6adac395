//! A policy split over several files (a `conf.d` directory of `*.toml`), merged in the
//! order given (name order, by the caller that reads the directory).
//!
//! # Invariants
//! - **Tables merge key by key; arrays of tables append.** `[global]` in one file and
//!   `[kinds.backup]` in another make one document; `[[limit]]`, `[[nodes.rule]]`,
//!   `[[conflict]]` and every other array of tables are appended in file order (so the
//!   order of rules that depends on position is the file order). Any other key set in two
//!   files is refused, naming both: no file silently overrides another.
//! - **Every error names its file and line.** Each part is first read alone (syntax, an
//!   unknown key, a wrong type: its own line). A rule broken by the merged document is
//!   traced back through its field path to the file that wrote that field, with array
//!   indices renumbered to that file's own (`limit[3]` of the merge is `limit[0]` of the
//!   second file), and located in that file's text.
//! - **The merged document is what is stored and served**: [`Merged::text`] is one TOML
//!   document equal in meaning to the parts.

use super::locate::{self, FieldPath, Lines, Seg};
use super::PolicyError;
use toml::{Table, Value};

/// The parts merged into one document.
#[derive(Debug, Clone)]
pub(crate) struct Merged {
    /// The merged document as TOML.
    pub(crate) text: String,
    /// For each merged path that one file wrote: that file and the path in it.
    origins: Vec<(FieldPath, usize, FieldPath)>,
}

/// Merges `parts` (name, text), in order.
///
/// # Errors
/// A part that does not read on its own, or a key set in two parts.
pub(crate) fn merge(parts: &[(String, String)]) -> Result<Merged, PolicyError> {
    let mut merged = Table::new();
    let mut m = Merger {
        parts,
        origins: Vec::new(),
    };
    for (i, (name, text)) in parts.iter().enumerate() {
        locate::read_toml(text, Some(name))?;
        let table: Table = text.parse().map_err(|e: toml::de::Error| PolicyError {
            file: Some(name.clone()),
            line: None,
            field: String::new(),
            message: e.to_string(),
        })?;
        m.table(
            &mut merged,
            table,
            i,
            &FieldPath::root(),
            &FieldPath::root(),
        )?;
    }
    let text = toml::to_string(&merged).expect("a TOML table always serializes");
    Ok(Merged {
        text,
        origins: m.origins,
    })
}

/// The parts being merged and where each merged path came from.
struct Merger<'p> {
    parts: &'p [(String, String)],
    origins: Vec<(FieldPath, usize, FieldPath)>,
}

impl Merger<'_> {
    /// Merges `from`, of part `file`, into `into`; `at` is their path in the merged
    /// document, `local` in the part.
    fn table(
        &mut self,
        into: &mut Table,
        from: Table,
        file: usize,
        at: &FieldPath,
        local: &FieldPath,
    ) -> Result<(), PolicyError> {
        for (key, value) in from {
            let path = at.key(&key);
            let local_path = local.key(&key);
            match (into.get_mut(&key), value) {
                (Some(Value::Table(mine)), Value::Table(theirs)) => {
                    self.table(mine, theirs, file, &path, &local_path)?;
                }
                (Some(Value::Array(mine)), Value::Array(theirs))
                    if is_tables(mine) && is_tables(&theirs) =>
                {
                    for (j, v) in theirs.into_iter().enumerate() {
                        let merged_at = path.index(mine.len());
                        self.origins.push((merged_at, file, local_path.index(j)));
                        mine.push(v);
                    }
                }
                (Some(_), _) => return Err(self.set_twice(&path, file, &local_path)),
                (None, value) => {
                    if let Value::Array(items) = &value {
                        if is_tables(items) {
                            for j in 0..items.len() {
                                self.origins
                                    .push((path.index(j), file, local_path.index(j)));
                            }
                        }
                    }
                    self.origins.push((path, file, local_path));
                    into.insert(key, value);
                }
            }
        }
        Ok(())
    }

    /// The error for `path`, set by an earlier part and again by part `file`.
    fn set_twice(&self, path: &FieldPath, file: usize, local: &FieldPath) -> PolicyError {
        let first = self
            .origins
            .iter()
            .find(|(p, _, _)| p == path)
            .map_or(0, |(_, f, _)| *f);
        let (name, text) = &self.parts[file];
        PolicyError {
            file: Some(name.clone()),
            line: Lines::parse(text).ok().and_then(|l| l.line(local)),
            field: path.to_string(),
            message: format!(
                "already set in {}; a key may be set in one file of the directory only",
                self.parts[first].0
            ),
        }
    }
}

fn is_tables(items: &[Value]) -> bool {
    !items.is_empty() && items.iter().all(|v| matches!(v, Value::Table(_)))
}

impl Merged {
    /// The file, line and that file's own path of `path` of the merged document: the
    /// deepest merged prefix one file wrote, the rest of the path appended to that file's
    /// path.
    pub(crate) fn locate(
        &self,
        path: &FieldPath,
        parts: &[(String, String)],
    ) -> (String, Option<usize>, FieldPath) {
        let best = self
            .origins
            .iter()
            .filter(|(p, _, _)| path.0.starts_with(&p.0))
            .max_by_key(|(p, _, _)| p.0.len());
        match best {
            Some((prefix, file, local)) => {
                let mut local = local.clone();
                local.0.extend(path.0[prefix.0.len()..].iter().cloned());
                let (name, text) = &parts[*file];
                let line = Lines::parse(text).ok().and_then(|l| l.line(&local));
                (name.clone(), line, local)
            }
            None => (
                parts.first().map_or_else(String::new, |p| p.0.clone()),
                None,
                path.clone(),
            ),
        }
    }
}

impl FieldPath {
    /// This path followed by an index.
    pub(crate) fn index(&self, i: usize) -> FieldPath {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }
}

#[cfg(test)]
mod tests {
    use crate::Policy;

    fn parts(files: &[(&str, &str)]) -> Vec<(String, String)> {
        files
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect()
    }

    const GLOBAL: &str = "[global]\nmax_running = 8\n";
    const LIMIT_A: &str =
        "# datastores\n[[limit]]\nname = \"per-ds\"\nper = [\"datastore\"]\nmax = 2\n";

    #[test]
    fn tables_merge_and_arrays_of_tables_append_in_file_order() {
        let b = "[[limit]]\nname = \"restores\"\nmatch = \"kind = restore\"\nmax = 4\n\n[kinds.backup]\npriority = 1\n";
        let (policy, text) = Policy::from_toml_parts(&parts(&[
            ("10-global.toml", GLOBAL),
            ("20-a.toml", LIMIT_A),
            ("30-b.toml", b),
        ]))
        .unwrap();
        let names: Vec<&str> = policy.limits.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["per-ds", "restores"]);
        assert_eq!(policy.global.max_running, Some(8));
        // The merged text is one document with the same meaning.
        let again = Policy::from_toml(&text, None).unwrap();
        assert_eq!(again.to_toml_string(), policy.to_toml_string());
    }

    #[test]
    fn errors_name_the_file_and_line_they_come_from() {
        // A key set twice: refused at its second place, naming the first file.
        let e = Policy::from_toml_parts(&parts(&[
            ("10-global.toml", GLOBAL),
            ("20-more.toml", "\n\n[global]\nmax_running = 9\n"),
        ]))
        .unwrap_err();
        assert_eq!(e.file.as_deref(), Some("20-more.toml"));
        assert_eq!(e.line, Some(4), "{e}");
        assert!(
            e.to_string().contains("already set in 10-global.toml"),
            "{e}"
        );

        // A rule broken across files: the second file's first limit repeats a name; the
        // error is that file's limit[0], at its own line.
        let e = Policy::from_toml_parts(&parts(&[
            ("20-a.toml", LIMIT_A),
            (
                "30-b.toml",
                "\n[kinds.x]\n\n[[limit]]\nname = \"per-ds\"\nmax = 1\n",
            ),
        ]))
        .unwrap_err();
        assert_eq!(e.file.as_deref(), Some("30-b.toml"), "{e}");
        assert!(e.field.starts_with("limit[0]"), "{e}");
        assert!(matches!(e.line, Some(4..=5)), "{e}");

        // A file that does not read alone: its own line.
        let e = Policy::from_toml_parts(&parts(&[
            ("10-global.toml", GLOBAL),
            ("20-bad.toml", "[global\n"),
        ]))
        .unwrap_err();
        assert_eq!(
            (e.file.as_deref(), e.line),
            (Some("20-bad.toml"), Some(1)),
            "{e}"
        );
        let e = Policy::from_toml_parts(&parts(&[
            ("10-global.toml", GLOBAL),
            ("20-typo.toml", "\n[kinds.backup]\nprioritty = 3\n"),
        ]))
        .unwrap_err();
        assert_eq!(
            (e.file.as_deref(), e.line),
            (Some("20-typo.toml"), Some(3)),
            "{e}"
        );
    }
}
