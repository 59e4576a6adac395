//! Label selectors: the Kubernetes label-selector string grammar, as `kubectl get -l`
//! accepts it (design `policy.md`, "Node limits").
//!
//! ```text
//! selector    := "" | requirement ("," requirement)*
//! requirement := key ("=" | "==" | "!=") value
//!              | key ("in" | "notin") "(" value ("," value)* ")"
//!              | key ("<" | ">") integer          (labels only)
//!              | key                  (exists)
//!              | "!" key              (does not exist)
//! ```
//! Whitespace is allowed around every token. A comma is AND; the empty selector matches
//! everything. As in Kubernetes, `k!=v` and `k notin (..)` match when `k` is absent.
//!
//! Two parsing modes share the grammar and differ only in what a key and a value may be:
//! - [`Selector::parse_labels`] (node rules, node selectors) checks Kubernetes' syntax: a key
//!   is an optional DNS-subdomain prefix (at most 253 characters) and `/`, then a name of at
//!   most 63 characters that begins and ends with a letter or digit and holds only letters,
//!   digits, `-`, `_` and `.`; a value is empty or follows the name rules.
//! - [`Selector::parse_jobs`] (limit and conflict `match`, block rules) selects over a job's
//!   `kind`, `owner`, `node` and attributes: a key or value is any non-empty string without
//!   whitespace, `,`, `(`, `)`, `=` or `!` (`group=vm/100` is fine).
//!
//! Label selectors read every string as `kubectl` (apimachinery's `labels.Parse`) reads it,
//! including its two less known forms: `k>N` and `k<N` hold when `k` is present and its value
//! is an integer greater (less) than `N` (a non-integer value never matches; `N` must be an
//! integer, so `k<a` is refused); and a value list may hold empty values: `k in ()` is
//! `k in ("")`, `k in (a,)` and `k in (,a)` hold `a` and the empty string, `k in (a,,b)` holds
//! `a`, `b` and the empty string. The table test in `tests/it/selector.rs` is built from
//! apimachinery's own `selector_test.go` cases.
//!
//! Job selectors differ from `kubectl`, on purpose, because they are written by hand in a
//! policy where a typo would silently match nothing: `<` and `>` are ordinary characters of a
//! value (`size=<big>`) and refused in a key (`size>10` is not a comparison here), a value may
//! not be empty (`kind=`, `kind in ()` and `kind in (a,)`
//! are refused with the column of the empty value).
//!
//! Invariant: a [`Selector`] only exists parsed, so its requirements are well-formed for
//! the mode it was parsed in, and [`Selector::text`] is the trimmed text it came from.

use serde::{Serialize, Serializer};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A parsed selector: the requirements (all must hold) and the text they came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Selector {
    requirements: Vec<Requirement>,
    text: String,
}

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Requirement {
    /// `key=value` or `key==value`: the key is present with this value.
    Equals {
        /// The key.
        key: String,
        /// The value it must have.
        value: String,
    },
    /// `key!=value`: the key is absent or has another value.
    NotEquals {
        /// The key.
        key: String,
        /// The value it must not have.
        value: String,
    },
    /// `key in (a,b)`: the key is present with one of the values.
    In {
        /// The key.
        key: String,
        /// The admitted values (never empty).
        values: BTreeSet<String>,
    },
    /// `key notin (a,b)`: the key is absent or has none of the values.
    NotIn {
        /// The key.
        key: String,
        /// The excluded values (never empty).
        values: BTreeSet<String>,
    },
    /// `key>N` (label selectors only): the key is present and its value is an integer
    /// greater than `N`.
    GreaterThan {
        /// The key.
        key: String,
        /// The bound.
        value: i64,
    },
    /// `key<N` (label selectors only): the key is present and its value is an integer less
    /// than `N`.
    LessThan {
        /// The key.
        key: String,
        /// The bound.
        value: i64,
    },
    /// `key`: the key is present.
    Exists {
        /// The key.
        key: String,
    },
    /// `!key`: the key is absent.
    NotExists {
        /// The key.
        key: String,
    },
}

impl Requirement {
    /// The key this requirement is about.
    pub fn key(&self) -> &str {
        match self {
            Requirement::Equals { key, .. }
            | Requirement::NotEquals { key, .. }
            | Requirement::In { key, .. }
            | Requirement::NotIn { key, .. }
            | Requirement::GreaterThan { key, .. }
            | Requirement::LessThan { key, .. }
            | Requirement::Exists { key }
            | Requirement::NotExists { key } => key,
        }
    }

    /// Whether the requirement holds for the key's value (`None`: the key is absent).
    pub fn matches(&self, value: Option<&str>) -> bool {
        match (self, value) {
            (Requirement::Equals { value: want, .. }, Some(v)) => v == want,
            (Requirement::NotEquals { value: not, .. }, Some(v)) => v != not,
            (Requirement::In { values, .. }, Some(v)) => values.contains(v),
            (Requirement::NotIn { values, .. }, Some(v)) => !values.contains(v),
            (Requirement::GreaterThan { value: bound, .. }, Some(v)) => {
                v.parse::<i64>().is_ok_and(|n| n > *bound)
            }
            (Requirement::LessThan { value: bound, .. }, Some(v)) => {
                v.parse::<i64>().is_ok_and(|n| n < *bound)
            }
            (Requirement::Exists { .. }, Some(_)) | (Requirement::NotExists { .. }, None) => true,
            (Requirement::NotEquals { .. } | Requirement::NotIn { .. }, None) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Requirement {
    /// The canonical form: `k=v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k>1`, `k<1`, `k`,
    /// `!k` (an empty value in a list stays empty: `k in (,a)`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |values: &BTreeSet<String>| values.iter().cloned().collect::<Vec<_>>().join(",");
        match self {
            Requirement::Equals { key, value } => write!(f, "{key}={value}"),
            Requirement::NotEquals { key, value } => write!(f, "{key}!={value}"),
            Requirement::In { key, values } => write!(f, "{key} in ({})", list(values)),
            Requirement::NotIn { key, values } => write!(f, "{key} notin ({})", list(values)),
            Requirement::GreaterThan { key, value } => write!(f, "{key}>{value}"),
            Requirement::LessThan { key, value } => write!(f, "{key}<{value}"),
            Requirement::Exists { key } => write!(f, "{key}"),
            Requirement::NotExists { key } => write!(f, "!{key}"),
        }
    }
}

/// Why a selector did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("column {}: {message}", position + 1)]
pub struct SelectorError {
    /// 0-based character index, in the text as given, of the offending part.
    pub position: usize,
    /// Names the offending part and what was expected.
    pub message: String,
}

impl Selector {
    /// Parses a selector over Kubernetes labels (node rules, node selectors), checking
    /// Kubernetes' key and value syntax.
    ///
    /// # Errors
    /// A [`SelectorError`] naming the offending part and what was expected.
    pub fn parse_labels(text: &str) -> Result<Selector, SelectorError> {
        Parser::parse(text, Mode::Labels)
    }

    /// Parses a selector over jobs (`kind`, `owner`, `node` and attribute names); values
    /// are any non-empty string without whitespace, `,`, `(`, `)`, `=` or `!`.
    ///
    /// # Errors
    /// A [`SelectorError`] naming the offending part and what was expected.
    pub fn parse_jobs(text: &str) -> Result<Selector, SelectorError> {
        Parser::parse(text, Mode::Jobs)
    }

    /// The empty selector, which matches everything.
    pub fn everything() -> Selector {
        Selector {
            requirements: Vec::new(),
            text: String::new(),
        }
    }

    /// Whether the selector has no requirements (matches everything).
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, in the order written.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// The text the selector was parsed from, trimmed.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether every requirement holds, looking keys up with `lookup`.
    pub fn matches<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| r.matches(lookup(r.key())))
    }

    /// Whether every requirement holds for a label map.
    pub fn matches_map(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches(|k| labels.get(k).map(String::as_str))
    }

    /// True when some requirement on `key` is `=`/`==`/`in` and admits `value` (used for
    /// "a limit whose match names the job's kind").
    pub fn names_value(&self, key: &str, value: &str) -> bool {
        self.requirements.iter().any(|r| match r {
            Requirement::Equals { key: k, value: v } => k == key && v == value,
            Requirement::In { key: k, values } => k == key && values.contains(value),
            _ => false,
        })
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for Selector {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

// Implementation details: a lexer in the manner of Kubernetes' (identifiers are runs of
// anything but whitespace and special symbols; `in`/`notin` are keywords only where an
// operator is expected), then a recursive-descent parser over the tokens.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Labels,
    Jobs,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Not,
    Eq,
    DoubleEq,
    NotEq,
    Gt,
    Lt,
    Open,
    Close,
    Comma,
    End,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("{s:?}"),
            Tok::Not => "'!'".into(),
            Tok::Eq => "'='".into(),
            Tok::DoubleEq => "'=='".into(),
            Tok::NotEq => "'!='".into(),
            Tok::Gt => "'>'".into(),
            Tok::Lt => "'<'".into(),
            Tok::Open => "'('".into(),
            Tok::Close => "')'".into(),
            Tok::Comma => "','".into(),
            Tok::End => "the end of the selector".into(),
        }
    }
}

fn is_special(c: char, mode: Mode) -> bool {
    matches!(c, '!' | '=' | '(' | ')' | ',') || (mode == Mode::Labels && matches!(c, '<' | '>'))
}

fn lex(text: &str, mode: Mode) -> Vec<(Tok, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let next = chars.get(i + 1).copied();
        let (tok, len) = match (c, next) {
            ('!', Some('=')) => (Tok::NotEq, 2),
            ('=', Some('=')) => (Tok::DoubleEq, 2),
            ('!', _) => (Tok::Not, 1),
            ('=', _) => (Tok::Eq, 1),
            ('(', _) => (Tok::Open, 1),
            (')', _) => (Tok::Close, 1),
            (',', _) => (Tok::Comma, 1),
            ('<', _) if mode == Mode::Labels => (Tok::Lt, 1),
            ('>', _) if mode == Mode::Labels => (Tok::Gt, 1),
            _ => {
                let end = (i..chars.len())
                    .find(|&j| chars[j].is_whitespace() || is_special(chars[j], mode))
                    .unwrap_or(chars.len());
                (Tok::Ident(chars[i..end].iter().collect()), end - i)
            }
        };
        out.push((tok, i));
        i += len;
    }
    out.push((Tok::End, chars.len()));
    out
}

struct Parser {
    tokens: Vec<(Tok, usize)>,
    pos: usize,
    mode: Mode,
}

fn err<T>(position: usize, message: impl Into<String>) -> Result<T, SelectorError> {
    Err(SelectorError {
        position,
        message: message.into(),
    })
}

impl Parser {
    fn parse(text: &str, mode: Mode) -> Result<Selector, SelectorError> {
        let mut p = Parser {
            tokens: lex(text, mode),
            pos: 0,
            mode,
        };
        let mut requirements = Vec::new();
        if p.peek() != &Tok::End {
            loop {
                requirements.push(p.requirement()?);
                let (tok, at) = p.next();
                match tok {
                    Tok::End => break,
                    Tok::Comma => {
                        if !matches!(p.peek(), Tok::Ident(_) | Tok::Not) {
                            let (tok, at) = p.next();
                            return err(
                                at,
                                format!("found {} after ',', expected a requirement (a key or '!key')", tok.describe()),
                            );
                        }
                    }
                    other => {
                        return err(
                            at,
                            format!(
                                "found {}, expected ',' or the end of the selector (requirements are joined by commas)",
                                other.describe()
                            ),
                        )
                    }
                }
            }
        }
        Ok(Selector {
            requirements,
            text: text.trim().to_string(),
        })
    }

    fn peek(&self) -> &Tok {
        &self.tokens[self.pos].0
    }

    fn next(&mut self) -> (Tok, usize) {
        let item = self.tokens[self.pos].clone();
        if item.0 != Tok::End {
            self.pos += 1;
        }
        item
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let (mut tok, mut at) = self.next();
        let negated = tok == Tok::Not;
        if negated {
            (tok, at) = self.next();
        }
        let Tok::Ident(key) = tok else {
            let after = if negated { " after '!'" } else { "" };
            return err(
                at,
                format!("found {}{after}, expected a key", tok.describe()),
            );
        };
        self.check_key(&key, at)?;
        if matches!(self.peek(), Tok::End | Tok::Comma) {
            return Ok(if negated {
                Requirement::NotExists { key }
            } else {
                Requirement::Exists { key }
            });
        }
        let (op, op_at) = self.next();
        if negated {
            return err(
                op_at,
                format!(
                    "found {} after \"!{key}\", expected ',' or the end of the selector ('!key' takes no operator or value)",
                    op.describe()
                ),
            );
        }
        match op {
            Tok::Eq | Tok::DoubleEq => Ok(Requirement::Equals { value: self.exact_value(&op)?, key }),
            Tok::NotEq => Ok(Requirement::NotEquals { value: self.exact_value(&op)?, key }),
            Tok::Ident(ref w) if w == "in" => Ok(Requirement::In { values: self.value_list("in")?, key }),
            Tok::Ident(ref w) if w == "notin" => Ok(Requirement::NotIn { values: self.value_list("notin")?, key }),
            Tok::Gt => Ok(Requirement::GreaterThan { value: self.integer(&op)?, key }),
            Tok::Lt => Ok(Requirement::LessThan { value: self.integer(&op)?, key }),
            other => err(
                op_at,
                format!(
                    "found {} after key {key:?}, expected an operator (=, ==, !=, in, notin, <, >), ',' or the end of the selector",
                    other.describe()
                ),
            ),
        }
    }

    fn exact_value(&mut self, op: &Tok) -> Result<String, SelectorError> {
        let at = self.tokens[self.pos].1;
        match self.peek() {
            Tok::End | Tok::Comma if self.mode == Mode::Labels => Ok(String::new()),
            Tok::End | Tok::Comma => err(
                at,
                format!("expected a value after {}, found none", op.describe()),
            ),
            Tok::Ident(_) => {
                let (Tok::Ident(value), at) = self.next() else {
                    unreachable!()
                };
                self.check_value(&value, at)?;
                Ok(value)
            }
            other => err(
                at,
                format!(
                    "found {} after {}, expected a value",
                    other.describe(),
                    op.describe()
                ),
            ),
        }
    }

    /// The integer after `<` or `>` (Kubernetes: exactly one value, parsed as a 64-bit
    /// integer).
    fn integer(&mut self, op: &Tok) -> Result<i64, SelectorError> {
        let (tok, at) = self.next();
        let Tok::Ident(text) = tok else {
            return err(
                at,
                format!(
                    "found {} after {}, expected an integer",
                    tok.describe(),
                    op.describe()
                ),
            );
        };
        self.check_value(&text, at)?;
        text.parse().or_else(|_| {
            err(
                at,
                format!(
                    "value {text:?} after {}: expected an integer",
                    op.describe()
                ),
            )
        })
    }

    fn value_list(&mut self, op: &str) -> Result<BTreeSet<String>, SelectorError> {
        let (tok, at) = self.next();
        if tok != Tok::Open {
            return err(
                at,
                format!(
                    "found {} after '{op}', expected '(' and a list of values",
                    tok.describe()
                ),
            );
        }
        if self.mode == Mode::Labels {
            return self.label_values(op);
        }
        let mut values = BTreeSet::new();
        loop {
            let (tok, at) = self.next();
            match tok {
                Tok::Ident(value) => {
                    self.check_value(&value, at)?;
                    values.insert(value);
                }
                Tok::Close if values.is_empty() => {
                    return err(at, format!("empty list after '{op}', expected at least one value inside ( )"))
                }
                Tok::Comma | Tok::Close => {
                    return err(at, format!("found {} in the list after '{op}', expected a value (values may not be empty)", tok.describe()))
                }
                other => return err(at, format!("found {} in the list after '{op}', expected a value", other.describe())),
            }
            if !self.list_continues(op)? {
                return Ok(values);
            }
        }
    }

    /// What follows a place of a value list: `,` (true: another place follows) or `)`
    /// (false: the list ends); anything else is an error naming the list's operator.
    fn list_continues(&mut self, op: &str) -> Result<bool, SelectorError> {
        let (tok, at) = self.next();
        match tok {
            Tok::Comma => Ok(true),
            Tok::Close => Ok(false),
            Tok::End => err(
                at,
                format!("unbalanced parentheses: the list after '{op}' has no closing ')'"),
            ),
            other => err(
                at,
                format!(
                    "found {} in the list after '{op}', expected ',' or ')'",
                    other.describe()
                ),
            ),
        }
    }

    /// A label selector's value list after its `(`, read as apimachinery's `parseValues`
    /// reads it: `()` is the empty string alone, and an empty place before, between or after
    /// commas is the empty string.
    fn label_values(&mut self, op: &str) -> Result<BTreeSet<String>, SelectorError> {
        let mut values = BTreeSet::new();
        if self.peek() == &Tok::Close {
            self.next();
            values.insert(String::new());
            return Ok(values);
        }
        // Each turn reads one place of the list (a value or nothing) and what ends it.
        loop {
            if let Tok::Ident(_) = self.peek() {
                let (Tok::Ident(value), at) = self.next() else {
                    unreachable!()
                };
                self.check_value(&value, at)?;
                values.insert(value);
            } else {
                values.insert(String::new());
            }
            if !self.list_continues(op)? {
                return Ok(values);
            }
        }
    }

    fn check_key(&self, key: &str, at: usize) -> Result<(), SelectorError> {
        if self.mode == Mode::Jobs {
            // The lexer already excludes whitespace and `,()=!`. A `<` or `>` in a key is
            // almost surely a comparison, which job selectors do not have: say so rather
            // than read `size>10` as "the key `size>10` exists".
            if let Some(i) = key.find(['<', '>']) {
                return err(
                    at + key[..i].chars().count(),
                    format!("key {key:?}: job selectors have no '<' or '>' comparisons (only label selectors do); use =, !=, in or notin"),
                );
            }
            return Ok(());
        }
        validate_label_key(key).map_err(|m| SelectorError {
            position: at,
            message: format!("key {key:?}: {m}"),
        })
    }

    fn check_value(&self, value: &str, at: usize) -> Result<(), SelectorError> {
        if self.mode == Mode::Jobs {
            return Ok(());
        }
        validate_label_value(value).map_err(|m| SelectorError {
            position: at,
            message: format!("value {value:?}: {m}"),
        })
    }
}

/// Checks a Kubernetes label key (`[prefix/]name`).
///
/// # Errors
/// A message saying what was expected.
pub fn validate_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            return Err(
                "the prefix before '/' is empty, expected a DNS subdomain such as \"example.com\""
                    .into(),
            );
        }
        validate_dns_subdomain(prefix).map_err(|m| format!("the prefix {prefix:?}: {m}"))?;
    }
    if name.is_empty() {
        return Err("the name is empty, expected 1 to 63 characters".into());
    }
    if name.contains('/') {
        return Err("expected at most one '/' (between the prefix and the name)".into());
    }
    check_name(name, "the name")
}

/// Checks a DNS subdomain (RFC 1123, as Kubernetes names nodes and label-key prefixes): 1
/// to 253 characters, lowercase letters, digits, '-' and '.', each dot-separated part
/// beginning and ending with a letter or digit.
///
/// # Errors
/// A message saying what was expected.
pub fn validate_dns_subdomain(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty, expected a DNS subdomain such as \"node-1.example.com\"".into());
    }
    if name.len() > 253 {
        return Err(format!(
            "{} characters long, expected at most 253",
            name.len()
        ));
    }
    for part in name.split('.') {
        let ok = !part.is_empty()
            && part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !part.starts_with('-')
            && !part.ends_with('-');
        if !ok {
            return Err(
                "not a DNS subdomain, expected lowercase letters, digits, '-' and '.', each dot-separated part beginning and ending with a letter or digit"
                    .into(),
            );
        }
    }
    Ok(())
}

/// Whether `name` is a Kubernetes namespace name (an RFC 1123 label): 1 to 63 lowercase
/// letters, digits and `-`, starting and ending with a letter or digit.
pub fn is_namespace_name(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| alnum(c) || c == '-')
        && name.starts_with(alnum)
        && name.ends_with(alnum)
}

/// Checks a Kubernetes label value (empty, or a name of at most 63 characters).
///
/// # Errors
/// A message saying what was expected.
pub fn validate_label_value(value: &str) -> Result<(), String> {
    if value.is_empty() {
        return Ok(());
    }
    check_name(value, "it")
}

fn check_name(name: &str, what: &str) -> Result<(), String> {
    let len = name.chars().count();
    if len > 63 {
        return Err(format!(
            "{what} is {len} characters long, expected at most 63"
        ));
    }
    let alnum = |c: char| c.is_ascii_alphanumeric();
    if let Some(bad) = name
        .chars()
        .find(|&c| !(alnum(c) || matches!(c, '-' | '_' | '.')))
    {
        return Err(format!(
            "{what} holds {bad:?}, expected only letters, digits, '-', '_' and '.'"
        ));
    }
    if !name.starts_with(alnum) || !name.ends_with(alnum) {
        return Err(format!("{what} must begin and end with a letter or digit"));
    }
    Ok(())
}
