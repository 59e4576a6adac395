//! `[[notify]]` targets, validated, and the rule that keeps their secrets out of sight.
//!
//! A target sends the events its `match` selects to a webhook (`url`) or over SMTP
//! (`smtp`, `to`, `from`). Secrets are named, never stored: `secret_file` and `secret_env`
//! are names the server resolves when it sends, and the policy shows them as written.
//!
//! # Invariants
//! - A password inside a target's URL (`https://user:PASSWORD@host`) is the one secret a
//!   document may hold. Everything that serves the policy (`GET /v1/policy`, the diff,
//!   errors) shows it as [`SECRET_MASK`] ([`redact_url`], [`Policy::redacted`]); only the
//!   store or the `--config` file keeps it.
//! - A document whose URL password is [`SECRET_MASK`] means "the password I was shown":
//!   [`Policy::keep_secrets`] takes the active policy's value for the target of the same
//!   name and the same URL otherwise, or refuses the document. A masked password never
//!   reaches a sender.

use super::{raw::RawPolicy, Policy, PolicyError};
use crate::selector::Selector;
use std::path::PathBuf;
use std::time::Duration;

/// What a URL password is shown as.
pub const SECRET_MASK: &str = "***";
/// Default `timeout` of one attempt.
pub const DEFAULT_NOTIFY_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `retries`.
pub const DEFAULT_NOTIFY_RETRIES: u32 = 12;
/// Default `match`: events that are not routine.
pub const DEFAULT_NOTIFY_MATCH: &str = "severity!=info";

/// One `[[notify]]` target.
#[derive(Debug, Clone, PartialEq)]
pub struct NotifyTarget {
    /// Unique name.
    pub name: String,
    /// Where it sends.
    pub via: NotifyVia,
    /// The secret's name (webhook: the HMAC key; SMTP: the login password when the URL
    /// names a user without one). `None`: unsigned webhook, no SMTP login secret.
    pub secret: Option<SecretRef>,
    /// Which events it sends (default [`DEFAULT_NOTIFY_MATCH`]).
    pub matcher: Selector,
    /// One attempt's timeout.
    pub timeout: Duration,
    /// Attempts after the first.
    pub retries: u32,
}

/// How a target sends.
#[derive(Debug, Clone, PartialEq)]
pub enum NotifyVia {
    /// HTTP POST of the event.
    Webhook {
        /// `http://` or `https://` URL, with its password if it has one.
        url: String,
    },
    /// An e-mail per event.
    Smtp {
        /// Server host.
        host: String,
        /// Server port (default 587).
        port: u16,
        /// Login user, from the URL.
        user: Option<String>,
        /// Login password, from the URL.
        password: Option<String>,
        /// Upgrade with STARTTLS (default true).
        starttls: bool,
        /// Sender.
        from: String,
        /// Recipients (at least one).
        to: Vec<String>,
    },
}

/// Where a secret is read from, when sending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretRef {
    /// `secret_file`: the file's content, trailing newline removed.
    File(PathBuf),
    /// `secret_env`: the server's environment variable.
    Env(String),
}

impl SecretRef {
    /// The name as the policy writes it (`secret_file /etc/x` or `secret_env X`); the
    /// secret itself is not read.
    pub fn describe(&self) -> String {
        match self {
            SecretRef::File(p) => format!("secret_file {}", p.display()),
            SecretRef::Env(v) => format!("secret_env {v}"),
        }
    }
}

/// The byte range of the password in `url` (`scheme://user:PASSWORD@host/..`), if any.
fn password_range(url: &str) -> Option<std::ops::Range<usize>> {
    let start = url.find("://")? + 3;
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    let at = url[start..end].rfind('@')? + start;
    let colon = url[start..at].find(':')? + start;
    Some(colon + 1..at)
}

/// `url` with its password (if any) shown as [`SECRET_MASK`].
pub fn redact_url(url: &str) -> String {
    match password_range(url) {
        Some(r) => format!("{}{SECRET_MASK}{}", &url[..r.start], &url[r.end..]),
        None => url.to_string(),
    }
}

/// The password inside `url`, if any.
pub(crate) fn url_password(url: &str) -> Option<&str> {
    password_range(url).map(|r| &url[r])
}

fn redact_raw(raw: &mut RawPolicy) {
    for n in &mut raw.notify {
        for url in [&mut n.url, &mut n.smtp].into_iter().flatten() {
            *url = redact_url(url);
        }
    }
}

impl Policy {
    /// The raw document with every URL password shown as [`SECRET_MASK`]: what may be
    /// served to anyone who can read the policy.
    pub fn redacted(&self) -> RawPolicy {
        let mut raw = self.raw.clone();
        redact_raw(&mut raw);
        raw
    }

    /// Whether some target's URL password is [`SECRET_MASK`] (a document read back from
    /// `GET /v1/policy`).
    pub fn has_masked_secrets(&self) -> bool {
        self.raw.notify.iter().any(|n| {
            [&n.url, &n.smtp]
                .into_iter()
                .flatten()
                .any(|u| url_password(u) == Some(SECRET_MASK))
        })
    }

    /// This policy with each masked URL password replaced by the one `active` holds for the
    /// target of the same name whose URL, masked, is the same. `self` unchanged when
    /// nothing is masked.
    ///
    /// # Errors
    /// A masked password with no such target in `active` (naming the field).
    pub fn keep_secrets(self, active: &Policy) -> Result<Policy, PolicyError> {
        if !self.has_masked_secrets() {
            return Ok(self);
        }
        let mut raw = self.raw;
        for (i, n) in raw.notify.iter_mut().enumerate() {
            let old = active.raw.notify.iter().find(|o| o.name == n.name);
            for (key, url, old_url) in [
                ("url", &mut n.url, old.and_then(|o| o.url.as_ref())),
                ("smtp", &mut n.smtp, old.and_then(|o| o.smtp.as_ref())),
            ] {
                let Some(u) = url else { continue };
                if url_password(u) != Some(SECRET_MASK) {
                    continue;
                }
                match old_url {
                    Some(o) if redact_url(o) == *u => *u = o.clone(),
                    _ => {
                        return Err(PolicyError {
                            file: None,
                            line: None,
                            field: format!("notify[{i}].{key}"),
                            message: format!(
                                "the password {SECRET_MASK} stands for the stored one, but the active policy has no notify {:?} with the URL {u:?}: write the password",
                                n.name
                            ),
                        })
                    }
                }
            }
        }
        Policy::from_raw(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_password_of_a_url_is_masked() {
        for (url, shown) in [
            ("https://h/x", "https://h/x"),
            ("https://u:pw@h/x", "https://u:***@h/x"),
            ("https://u@h/x", "https://u@h/x"),
            ("smtp://u:p@ss@mail:587", "smtp://u:***@mail:587"),
            ("https://h/x?a=b@c:d", "https://h/x?a=b@c:d"),
            ("https://u:pw@h", "https://u:***@h"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }
}
