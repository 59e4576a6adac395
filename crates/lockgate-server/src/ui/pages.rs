//! The dashboard's files (`crates/lockgate-server/ui/`), embedded at build time, and the
//! headers every one of them is served with.
//!
//! # Invariants
//! - [`ASSETS`] lists every file the pages load, each with its content type; an asset
//!   not listed is a 404 (the server test fetches every one).
//! - The sign-in page's only substitution is the error text, the app page's the
//!   session's CSRF token; both HTML-escaped.

use axum::http::{HeaderMap, HeaderValue};

/// One embedded file.
pub struct Page {
    /// Its name under `/ui/assets/`.
    pub name: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes.
    pub body: &'static str,
}

macro_rules! asset {
    ($name:literal, $ct:literal) => {
        Page {
            name: $name,
            content_type: $ct,
            body: include_str!(concat!("../../ui/", $name)),
        }
    };
}

/// Every asset under `/ui/assets/`.
pub const ASSETS: &[Page] = &[
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("api.js", "text/javascript; charset=utf-8"),
    asset!("dom.js", "text/javascript; charset=utf-8"),
    asset!("overview.js", "text/javascript; charset=utf-8"),
    asset!("queue.js", "text/javascript; charset=utf-8"),
    asset!("job.js", "text/javascript; charset=utf-8"),
    asset!("nodes.js", "text/javascript; charset=utf-8"),
    asset!("policy.js", "text/javascript; charset=utf-8"),
    asset!("schedules.js", "text/javascript; charset=utf-8"),
    asset!("charts.js", "text/javascript; charset=utf-8"),
    asset!("logo.svg", "image/svg+xml"),
];

const APP: &str = include_str!("../../ui/app.html");
const LOGIN: &str = include_str!("../../ui/login.html");

/// The asset named `name`.
pub fn asset(name: &str) -> Option<&'static Page> {
    ASSETS.iter().find(|a| a.name == name)
}

/// The app's page (shown with a live session), with the session's CSRF token in the
/// sign-out form, so that signing out works without JavaScript.
pub fn app(csrf: &str) -> String {
    APP.replace("{{csrf}}", &escape(csrf))
}

/// The sign-in page, with `error` shown in `#login-error` when there is one.
pub fn login(error: Option<&str>) -> String {
    let shown = match error {
        Some(e) => format!(
            "<p id=\"login-error\" class=\"error\" role=\"alert\">{}</p>",
            escape(e)
        ),
        None => String::new(),
    };
    LOGIN.replace("<!--error-->", &shown)
}

/// `text` safe inside HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The headers of every dashboard answer: only this origin's scripts, styles and
/// connections; no framing; no sniffing; no referrer to other sites.
pub fn security_headers(h: &mut HeaderMap) {
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        ),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_error_is_escaped() {
        let page = super::login(Some("<b>&"));
        assert!(page.contains("&lt;b&gt;&amp;"));
        assert!(!page.contains("<!--error-->"));
    }
}
