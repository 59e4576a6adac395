//! Argument templates: `{attr.NAME}`, `{job.id}`, `{job.kind}` and `{node}` replaced
//! inside one argument (api.md, `lockgate agent`).
//!
//! Invariants:
//! - one template argument becomes exactly one argument: a value with spaces, quotes or
//!   `;` stays inside its argument and is never split or interpreted (no shell anywhere);
//! - `{{` and `}}` stand for literal braces; any other `{...}` that is not one of the four
//!   placeholders, and any lone brace, is refused when the configuration is loaded, so a
//!   typo never reaches a job;
//! - a job that lacks an attribute its handler names fails with a message naming the
//!   attribute ([`RenderError`]); the handler is not started with an empty argument;
//! - an attribute value never begins an argument with `-` (where the command would read it
//!   as an option: `tar -cf OUT /data {attr.path}` with `path=--remove-files`) unless the
//!   handler sets `allow_dash_values = true`: the job fails with
//!   [`RenderError::DashValue`], naming the attribute and the handler, and nothing runs.
//!   Inside an argument (`/mnt/{attr.pvc}`, `--group={attr.group}`) a `-` is harmless and
//!   allowed.

use std::collections::BTreeMap;
use std::fmt;

/// One piece of a parsed argument.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Attr(String),
    JobId,
    JobKind,
    Node,
}

/// A parsed argument template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    source: String,
    pieces: Vec<Piece>,
}

/// Why an argument template is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// `{...}` names something that is not a placeholder.
    #[error("unknown placeholder {{{name}}} in {arg:?}: expected {{attr.NAME}}, {{job.id}}, {{job.kind}} or {{node}} (write {{{{ and }}}} for literal braces)")]
    Unknown {
        /// What was inside the braces.
        name: String,
        /// The whole argument.
        arg: String,
    },
    /// A `{` without its `}`, or a `}` without its `{`.
    #[error("unbalanced brace in {arg:?}: placeholders are {{attr.NAME}}, {{job.id}}, {{job.kind}}, {{node}}; write {{{{ and }}}} for literal braces")]
    Unbalanced {
        /// The whole argument.
        arg: String,
    },
}

/// Why a template could not be filled in for a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The job has no such attribute. Permanent for this job: resubmit it with the attribute.
    #[error(
        "the handler argument {arg:?} names {{attr.{name}}}, but the job has no attribute {name:?}"
    )]
    MissingAttr {
        /// The attribute's name.
        name: String,
        /// The template argument.
        arg: String,
    },
    /// An attribute value starting with `-` would begin an argument, where the command
    /// could take it for an option. Permanent for this job.
    #[error(
        "attribute {name:?} is {value:?}, which starts with '-' and would begin the argument {arg:?} of [handlers.{handler}], where the command could read it as an option; the command was not run (set allow_dash_values = true in [handlers.{handler}] if the command takes such values safely)"
    )]
    DashValue {
        /// The attribute's name.
        name: String,
        /// Its value (at most 80 characters of it).
        value: String,
        /// The template argument.
        arg: String,
        /// The handler (the job's kind).
        handler: String,
    },
}

/// What a template is filled in with.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The job's id.
    pub job_id: u64,
    /// The job's kind.
    pub kind: &'a str,
    /// The agent's node.
    pub node: &'a str,
    /// The job's attributes.
    pub attrs: &'a BTreeMap<String, String>,
    /// The handler's `allow_dash_values`: an attribute value may begin an argument with `-`.
    pub allow_dash_values: bool,
}

impl Template {
    /// Parses one argument.
    ///
    /// # Errors
    /// [`TemplateError`] for an unknown placeholder or a lone brace.
    pub fn parse(arg: &str) -> Result<Template, TemplateError> {
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut chars = arg.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    text.push('}');
                }
                '}' => return Err(TemplateError::Unbalanced { arg: arg.into() }),
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some('{') | None => {
                                return Err(TemplateError::Unbalanced { arg: arg.into() })
                            }
                            Some(c) => name.push(c),
                        }
                    }
                    let piece = match name.as_str() {
                        "job.id" => Piece::JobId,
                        "job.kind" => Piece::JobKind,
                        "node" => Piece::Node,
                        n => match n.strip_prefix("attr.") {
                            Some(a) if !a.is_empty() && !a.contains(char::is_whitespace) => {
                                Piece::Attr(a.to_string())
                            }
                            _ => {
                                return Err(TemplateError::Unknown {
                                    name,
                                    arg: arg.into(),
                                })
                            }
                        },
                    };
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(piece);
                }
                c => text.push(c),
            }
        }
        if !text.is_empty() || pieces.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Template {
            source: arg.to_string(),
            pieces,
        })
    }

    /// The argument as written in the configuration.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The argument itself when it has no placeholder (`{{` and `}}` read as braces);
    /// `None` when a job fills it in.
    pub fn literal(&self) -> Option<String> {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The attributes this argument names.
    pub fn attrs(&self) -> impl Iterator<Item = &str> {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Attr(a) => Some(a.as_str()),
            _ => None,
        })
    }

    /// Fills the argument in for a job.
    ///
    /// # Errors
    /// [`RenderError::MissingAttr`] when the job lacks a named attribute;
    /// [`RenderError::DashValue`] when a value starting with `-` would begin the argument
    /// and the handler does not allow it.
    pub fn render(&self, cx: &Context<'_>) -> Result<String, RenderError> {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::JobId => out.push_str(&cx.job_id.to_string()),
                Piece::JobKind => out.push_str(cx.kind),
                Piece::Node => out.push_str(cx.node),
                Piece::Attr(a) => match cx.attrs.get(a) {
                    Some(v) if out.is_empty() && v.starts_with('-') && !cx.allow_dash_values => {
                        return Err(RenderError::DashValue {
                            name: a.clone(),
                            value: v.chars().take(80).collect(),
                            arg: self.source.clone(),
                            handler: cx.kind.to_string(),
                        })
                    }
                    Some(v) => out.push_str(v),
                    None => {
                        return Err(RenderError::MissingAttr {
                            name: a.clone(),
                            arg: self.source.clone(),
                        })
                    }
                },
            }
        }
        Ok(out)
    }
}

impl fmt::Display for Template {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// Fills in a whole argv.
///
/// # Errors
/// The first [`RenderError`].
pub fn render_argv(argv: &[Template], cx: &Context<'_>) -> Result<Vec<String>, RenderError> {
    argv.iter().map(|t| t.render(cx)).collect()
}

/// The environment variable for an attribute: `LOCKGATE_ATTR_` and the name in upper
/// case, every character other than an ASCII letter or digit written as `_`.
pub fn attr_env_name(name: &str) -> String {
    let mut out = String::from("LOCKGATE_ATTR_");
    out.extend(name.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    }));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn cx(attrs: &BTreeMap<String, String>) -> Context<'_> {
        Context {
            job_id: 42,
            kind: "data-upload",
            node: "node-1",
            attrs,
            allow_dash_values: false,
        }
    }

    #[rstest]
    #[case("plain", "plain")]
    #[case("", "")]
    #[case("/mnt/{attr.pvc}", "/mnt/pvc one; rm -rf /")]
    #[case("{job.id}-{job.kind}@{node}", "42-data-upload@node-1")]
    #[case("{{literal}}", "{literal}")]
    #[case("{{{job.id}}}", "{42}")]
    #[case("--group={attr.group}", "--group=vm/100")]
    fn renders(#[case] arg: &str, #[case] want: &str) {
        let attrs = BTreeMap::from([
            ("pvc".to_string(), "pvc one; rm -rf /".to_string()),
            ("group".to_string(), "vm/100".to_string()),
        ]);
        let t = Template::parse(arg).unwrap();
        assert_eq!(t.render(&cx(&attrs)).unwrap(), want);
    }

    #[rstest]
    #[case("{attr}", "unknown placeholder {attr}")]
    #[case("{attr.}", "unknown placeholder {attr.}")]
    #[case("{job.name}", "unknown placeholder {job.name}")]
    #[case("{ node }", "unknown placeholder { node }")]
    #[case("{node", "unbalanced brace")]
    #[case("node}", "unbalanced brace")]
    #[case("{{node}", "unbalanced brace")]
    fn refuses(#[case] arg: &str, #[case] want: &str) {
        let e = Template::parse(arg).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
        assert!(e.contains(&format!("{arg:?}")), "{e}");
    }

    #[test]
    fn missing_attr_names_it() {
        let attrs = BTreeMap::new();
        let t = Template::parse("/mnt/{attr.pvc}").unwrap();
        assert_eq!(
            t.render(&cx(&attrs)).unwrap_err(),
            RenderError::MissingAttr {
                name: "pvc".into(),
                arg: "/mnt/{attr.pvc}".into()
            }
        );
    }

    #[rstest]
    #[case("{attr.path}", "--remove-files", true)]
    #[case("{attr.empty}{attr.path}", "--remove-files", true)]
    #[case("{attr.path}", "-rf", true)]
    #[case("/data/{attr.path}", "--remove-files", false)]
    #[case("--file={attr.path}", "-x", false)]
    #[case("{attr.path}", "data-1", false)]
    fn a_dash_value_cannot_begin_an_argument(
        #[case] arg: &str,
        #[case] value: &str,
        #[case] refused: bool,
    ) {
        let attrs = BTreeMap::from([
            ("path".to_string(), value.to_string()),
            ("empty".to_string(), String::new()),
        ]);
        let t = Template::parse(arg).unwrap();
        match t.render(&cx(&attrs)) {
            Err(e @ RenderError::DashValue { .. }) => {
                assert!(refused, "{arg} with {value} refused: {e}");
                let text = e.to_string();
                assert!(
                    text.contains("\"path\"") && text.contains("[handlers.data-upload]"),
                    "{text}"
                );
                assert!(text.contains("allow_dash_values = true"), "{text}");
            }
            Err(e) => panic!("{e}"),
            Ok(out) => assert!(!refused, "{arg} with {value} rendered {out:?}"),
        }
        let allowed = Context {
            allow_dash_values: true,
            ..cx(&attrs)
        };
        assert!(t.render(&allowed).is_ok(), "the handler opted in");
    }

    #[rstest]
    #[case("pvc", "LOCKGATE_ATTR_PVC")]
    #[case("data-store.v2", "LOCKGATE_ATTR_DATA_STORE_V2")]
    #[case("größe", "LOCKGATE_ATTR_GR__E")]
    fn env_names(#[case] name: &str, #[case] want: &str) {
        assert_eq!(attr_env_name(name), want);
    }
}
