//! Validation of `[[notify]]`: the same `file:line: field: expected .., got ..` errors as the
//! rest, with a URL's password shown as `***` in every message.

use super::{bad, count, job_selector, name, positive_duration, Checked};
use crate::policy::locate::FieldPath;
use crate::policy::notify::{
    redact_url, NotifyTarget, NotifyVia, SecretRef, DEFAULT_NOTIFY_MATCH, DEFAULT_NOTIFY_RETRIES,
    DEFAULT_NOTIFY_TIMEOUT,
};
use crate::policy::raw::RawNotify;
use std::collections::BTreeMap;

/// `[[notify]]`.
pub(super) fn targets(raw: &[RawNotify], p: &FieldPath) -> Checked<Vec<NotifyTarget>> {
    let mut seen = BTreeMap::new();
    let mut out = Vec::new();
    for (i, n) in raw.iter().enumerate() {
        let np = p.at(i);
        name(&n.name, &np.key("name"), "notify")?;
        if let Some(first) = seen.insert(n.name.as_str(), i) {
            return bad(
                &np.key("name"),
                format!(
                    "notify name {:?} is already used by notify[{first}], expected unique names",
                    n.name
                ),
            );
        }
        out.push(target(n, &np)?);
    }
    Ok(out)
}

fn target(n: &RawNotify, p: &FieldPath) -> Checked<NotifyTarget> {
    let via =
        match (&n.url, &n.smtp) {
            (Some(url), None) => {
                for key in ["to", "from", "starttls"] {
                    let set = match key {
                        "to" => !n.to.is_empty(),
                        "from" => n.from.is_some(),
                        _ => n.starttls.is_some(),
                    };
                    if set {
                        return bad(
                            &p.key(key),
                            format!(
                            "{key} is for e-mail targets (smtp = ..), expected it only beside smtp"
                        ),
                        );
                    }
                }
                NotifyVia::Webhook {
                    url: webhook_url(url, &p.key("url"))?,
                }
            }
            (None, Some(smtp)) => smtp_via(n, smtp, p)?,
            (Some(_), Some(_)) => {
                return bad(
                    &p.key("smtp"),
                    "expected either url (a webhook) or smtp (e-mail), got both",
                )
            }
            (None, None) => return bad(
                p,
                "expected url = \"https://..\" (a webhook) or smtp = \"smtp://host:port\" (e-mail)",
            ),
        };
    let secret = match (&n.secret_file, &n.secret_env) {
        (Some(_), Some(_)) => {
            return bad(
                &p.key("secret_env"),
                "expected either secret_file or secret_env, got both",
            )
        }
        (Some(f), None) if !f.starts_with('/') => {
            return bad(
                &p.key("secret_file"),
                format!("expected an absolute path, got {f:?}"),
            )
        }
        (Some(f), None) => Some(SecretRef::File(f.into())),
        (None, Some(v)) if v.is_empty() || v.contains(['=', '\0']) => {
            return bad(
                &p.key("secret_env"),
                format!("expected an environment variable name, got {v:?}"),
            )
        }
        (None, Some(v)) => Some(SecretRef::Env(v.clone())),
        (None, None) => None,
    };
    let matcher = job_selector(
        n.r#match.as_deref().unwrap_or(DEFAULT_NOTIFY_MATCH),
        &p.key("match"),
    )?;
    Ok(NotifyTarget {
        name: n.name.clone(),
        via,
        secret,
        matcher,
        timeout: positive_duration(&n.timeout, &p.key("timeout"))?
            .unwrap_or(DEFAULT_NOTIFY_TIMEOUT),
        retries: match n.retries {
            None => DEFAULT_NOTIFY_RETRIES,
            Some(r) => count(r, &p.key("retries"))?,
        },
    })
}

/// `scheme://[user[:password]@]host[:port]` split at its parts: (scheme, user, password,
/// host, port, rest).
type Parts<'a> = (
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    &'a str,
    Option<&'a str>,
    &'a str,
);

fn split_url(url: &str) -> Option<Parts<'_>> {
    let (scheme, after) = url.split_once("://")?;
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (authority, rest) = after.split_at(end);
    let (userinfo, hostport) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let (user, password) = match userinfo {
        None => (None, None),
        Some(u) => match u.split_once(':') {
            Some((u, p)) => (Some(u), Some(p)),
            None => (Some(u), None),
        },
    };
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (h, Some(p)),
        _ => (hostport, None),
    };
    Some((scheme, user, password, host, port, rest))
}

fn webhook_url(url: &str, p: &FieldPath) -> Checked<String> {
    let shown = redact_url(url);
    let expected = format!("expected an http:// or https:// URL with a host, got {shown:?}");
    let Some((scheme, _, _, host, port, _)) = split_url(url) else {
        return bad(p, expected);
    };
    if !matches!(scheme, "http" | "https") || host.is_empty() || url.contains(char::is_whitespace) {
        return bad(p, expected);
    }
    if let Some(port) = port {
        if port.parse::<u16>().is_err() {
            return bad(
                p,
                format!("expected a port number after the host, got {shown:?}"),
            );
        }
    }
    Ok(url.to_string())
}

fn smtp_via(n: &RawNotify, smtp: &str, p: &FieldPath) -> Checked<NotifyVia> {
    let sp = p.key("smtp");
    let shown = redact_url(smtp);
    let expected = format!("expected smtp://[user[:password]@]host[:port], got {shown:?}");
    let Some((scheme, user, password, host, port, rest)) = split_url(smtp) else {
        return bad(&sp, expected);
    };
    if scheme != "smtp" || host.is_empty() || !(rest.is_empty() || rest == "/") {
        return bad(&sp, expected);
    }
    let port = match port {
        None => 587,
        Some(text) => match text.parse::<u16>() {
            Ok(port) if port > 0 => port,
            _ => {
                return bad(
                    &sp,
                    format!("expected a port number 1..65535, got {text:?}"),
                )
            }
        },
    };
    if n.to.is_empty() {
        return bad(
            &p.key("to"),
            "expected at least one recipient beside smtp, got none",
        );
    }
    for (i, to) in n.to.iter().enumerate() {
        address(to, &p.key("to").at(i))?;
    }
    let from = match &n.from {
        Some(f) => {
            address(f, &p.key("from"))?;
            f.clone()
        }
        None => format!("lockgate@{}", host.trim_matches(['[', ']'])),
    };
    Ok(NotifyVia::Smtp {
        host: host.trim_matches(['[', ']']).to_string(),
        port,
        user: user.filter(|u| !u.is_empty()).map(str::to_string),
        password: password.map(str::to_string),
        starttls: n.starttls.unwrap_or(true),
        from,
        to: n.to.clone(),
    })
}

fn address(text: &str, p: &FieldPath) -> Checked<()> {
    match text.split_once('@') {
        Some((local, domain))
            if !local.is_empty()
                && !domain.is_empty()
                && !text.contains(|c: char| c.is_whitespace() || matches!(c, '<' | '>' | ',')) =>
        {
            Ok(())
        }
        _ => bad(
            p,
            format!("expected an e-mail address such as ops@example.org, got {text:?}"),
        ),
    }
}
