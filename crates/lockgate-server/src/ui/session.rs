//! Dashboard sessions and one-time sign-in codes, kept in memory (a restart signs every
//! browser out, which is the safe direction).
//!
//! # Invariants
//! - A session id is 256 random bits from the OS; the table keys sessions by the id's
//!   SHA-256, so the id itself lives only in the browser's cookie.
//! - A session is valid only while it has not expired **and** the token it came from is
//!   still in the token table: `lockgate token revoke` ends its sessions from the next
//!   request on, as it does for bearer requests. A code's session comes from the token
//!   of the admin who made the code.
//! - A cookie-authenticated request that is not a read passes [`check_csrf`]: the
//!   session's CSRF token in `X-CSRF-Token` (or the form's `csrf` field), and no
//!   `Origin`/`Sec-Fetch-Site` that says another site sent it. Bearer requests are
//!   unchanged: a browser never adds an `Authorization` header on its own.
//! - A code works once: signing in with it removes it; an expired one is refused.

use crate::auth::{self, Principal, Tokens};
use crate::error::ApiError;
use crate::event_loop::wall_ms;
use axum::http::header::{COOKIE, HOST, ORIGIN};
use axum::http::{HeaderMap, Method};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The cookie's name.
pub const COOKIE_NAME: &str = "lockgate_session";

/// How long a session lasts: 12 hours.
pub const SESSION_MS: u64 = 12 * 3600 * 1000;

/// How long an unused sign-in code works: 10 minutes.
pub const CODE_MS: u64 = 10 * 60 * 1000;

/// Most sessions kept at once; the oldest is dropped past it (sign-ins need a valid
/// token, so only a token holder can fill the table, and only their own sessions go).
const MAX_SESSIONS: usize = 10_000;

/// Most unused codes kept at once.
const MAX_CODES: usize = 1_000;

/// The alphabet of codes: no 0/O, 1/I/L, so a code read aloud is typed right.
const CODE_ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";

/// One signed-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    /// Who it acts as.
    pub principal: Principal,
    /// SHA-256 of the token it came from: the session ends when that token is revoked.
    pub token_hash: String,
    /// Wall-clock milliseconds when it ends.
    pub expires_ms: u64,
    /// The CSRF token its pages send back.
    pub csrf: String,
}

#[derive(Debug, Clone)]
struct Code {
    principal: Principal,
    token_hash: String,
    expires_ms: u64,
}

#[derive(Debug, Default)]
struct Table {
    sessions: HashMap<String, Session>,
    codes: HashMap<String, Code>,
}

/// The session and code table, shared by the HTTP handlers.
#[derive(Debug, Clone, Default)]
pub struct Sessions {
    table: Arc<Mutex<Table>>,
    /// The server serves TLS: cookies get `Secure`.
    pub secure: bool,
}

impl Sessions {
    /// An empty table; `secure` when the server serves TLS.
    pub fn new(secure: bool) -> Sessions {
        Sessions {
            table: Arc::default(),
            secure,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().expect("session table lock")
    }

    /// Starts a session for `principal` (from the token hashed as `token_hash`); returns
    /// the cookie value (the session id) and the session.
    pub fn start(&self, principal: Principal, token_hash: String) -> (String, Session) {
        let id = auth::new_token();
        let now = wall_ms();
        let session = Session {
            principal,
            token_hash,
            expires_ms: now + SESSION_MS,
            csrf: auth::new_token(),
        };
        let mut t = self.lock();
        t.sessions.retain(|_, s| s.expires_ms > now);
        if t.sessions.len() >= MAX_SESSIONS {
            let oldest = t
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.expires_ms)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                t.sessions.remove(&k);
            }
        }
        t.sessions.insert(auth::hash(&id), session.clone());
        (id, session)
    }

    /// The live session of cookie value `id`: `None` when unknown, expired or its token
    /// revoked (an expired or orphaned entry is dropped).
    pub fn get(&self, tokens: &Tokens, id: &str) -> Option<Session> {
        let key = auth::hash(id);
        let mut t = self.lock();
        let s = t.sessions.get(&key)?;
        if s.expires_ms > wall_ms() && tokens.has_hash(&s.token_hash) {
            return Some(s.clone());
        }
        t.sessions.remove(&key);
        None
    }

    /// Ends the session of cookie value `id`; whether there was one.
    pub fn end(&self, id: &str) -> bool {
        self.lock().sessions.remove(&auth::hash(id)).is_some()
    }

    /// A new one-time code for `principal`, valid [`CODE_MS`]; returns it and its expiry.
    pub fn new_code(&self, principal: Principal, token_hash: String) -> (String, u64) {
        let mut bytes = [0u8; 12];
        getrandom::fill(&mut bytes).expect("the OS random source works");
        let chars: String = bytes
            .iter()
            .map(|b| CODE_ALPHABET[usize::from(*b) % CODE_ALPHABET.len()] as char)
            .collect();
        let code = format!("{}-{}-{}", &chars[..4], &chars[4..8], &chars[8..]);
        let now = wall_ms();
        let expires_ms = now + CODE_MS;
        let mut t = self.lock();
        t.codes.retain(|_, c| c.expires_ms > now);
        if t.codes.len() < MAX_CODES {
            t.codes.insert(
                normal_code(&code),
                Code {
                    principal,
                    token_hash,
                    expires_ms,
                },
            );
        }
        (code, expires_ms)
    }

    /// Takes the code `text` (case, spaces and dashes do not matter): the principal and
    /// token hash it signs in as, once; `None` when unknown, used or expired.
    pub fn take_code(&self, tokens: &Tokens, text: &str) -> Option<(Principal, String)> {
        let c = self.lock().codes.remove(&normal_code(text))?;
        (c.expires_ms > wall_ms() && tokens.has_hash(&c.token_hash))
            .then_some((c.principal, c.token_hash))
    }
}

/// A code as the table keys it: upper case, letters and digits only.
fn normal_code(text: &str) -> String {
    text.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// The value of the session cookie in a request, if any.
pub fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE_NAME)
        .map(|(_, v)| v.trim())
}

/// The `Set-Cookie` value of a new session.
pub fn set_cookie(id: &str, secure: bool) -> String {
    format!(
        "{COOKIE_NAME}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}{}",
        SESSION_MS / 1000,
        if secure { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that removes the cookie.
pub fn clear_cookie(secure: bool) -> String {
    format!(
        "{COOKIE_NAME}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0{}",
        if secure { "; Secure" } else { "" }
    )
}

/// Refuses a request another site made the browser send: a `Sec-Fetch-Site` other than
/// `same-origin` or `none`, or an `Origin` whose host is not the request's `Host` (an
/// `Origin: null` passes only beside `Sec-Fetch-Site: same-origin`).
///
/// # Errors
/// 403 naming what gave it away.
pub fn check_same_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if let Some(site) = site {
        if site != "same-origin" && site != "none" {
            return Err(ApiError::forbidden(format!(
                "refused a cross-site request (Sec-Fetch-Site: {site})"
            )));
        }
    }
    let Some(origin) = headers.get(ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    // A browser sends `Origin: null` where the referrer policy hides it; then only a
    // `Sec-Fetch-Site: same-origin` (checked above when present) vouches for it.
    if origin == "null" && site == Some("same-origin") {
        return Ok(());
    }
    let host = headers.get(HOST).and_then(|v| v.to_str().ok());
    let origin_host = origin
        .split_once("://")
        .map(|(_, rest)| rest.trim_end_matches('/'));
    if origin_host.is_some() && origin_host == host {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "refused a cross-site request (Origin {origin:?} is not this server)"
        )))
    }
}

/// The CSRF rule of the module docs, for a cookie-authenticated `method` request;
/// `form_csrf` is the `csrf` field of a form post.
///
/// # Errors
/// 403 when the token is missing or wrong, or the request is cross-site.
pub fn check_csrf(
    method: &Method,
    headers: &HeaderMap,
    session: &Session,
    form_csrf: Option<&str>,
) -> Result<(), ApiError> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    check_same_origin(headers)?;
    let sent = headers
        .get("x-csrf-token")
        .and_then(|v| v.to_str().ok())
        .or(form_csrf);
    match sent {
        Some(t) if auth::hash(t) == auth::hash(&session.csrf) => Ok(()),
        Some(_) => Err(ApiError::forbidden(
            "wrong X-CSRF-Token: reload the dashboard (GET /ui/session gives the token)",
        )),
        None => Err(ApiError::forbidden(
            "missing X-CSRF-Token: a request with the session cookie that is not a read must send it (GET /ui/session gives it)",
        )),
    }
}

/// The principal of a request's session cookie: `Ok(None)` without a cookie; for a
/// request that is not a read, after [`check_csrf`].
///
/// # Errors
/// 401 for a cookie of no live session; 403 from [`check_csrf`].
pub fn session_principal(
    sessions: &Sessions,
    tokens: &Tokens,
    method: &Method,
    headers: &HeaderMap,
) -> Result<Option<Principal>, ApiError> {
    let Some(id) = cookie(headers) else {
        return Ok(None);
    };
    let session = sessions.get(tokens, id).ok_or_else(|| {
        ApiError::unauthorized("the dashboard session ended (signed out, expired or its token revoked): sign in again at /ui/")
    })?;
    check_csrf(method, headers, &session, None)?;
    Ok(Some(session.principal))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgate_api::Role;

    fn principal() -> Principal {
        Principal {
            name: "ann".into(),
            role: Role::Viewer,
            node: None,
        }
    }

    #[test]
    fn a_code_works_once_and_ignores_case_and_dashes() {
        let tokens = Tokens::default();
        tokens.insert("h".into(), principal());
        let s = Sessions::new(false);
        let (code, _) = s.new_code(principal(), "h".into());
        assert_eq!(code.len(), 14);
        let typed = code.to_lowercase().replace('-', " ");
        assert_eq!(s.take_code(&tokens, &typed).map(|p| p.0), Some(principal()));
        assert_eq!(s.take_code(&tokens, &code), None);
    }

    #[test]
    fn an_expired_code_or_session_is_refused() {
        let tokens = Tokens::default();
        tokens.insert("h".into(), principal());
        let s = Sessions::new(false);
        let (code, _) = s.new_code(principal(), "h".into());
        let (id, _) = s.start(principal(), "h".into());
        for c in s.lock().codes.values_mut() {
            c.expires_ms = wall_ms() - 1;
        }
        for v in s.lock().sessions.values_mut() {
            v.expires_ms = wall_ms() - 1;
        }
        assert_eq!(s.take_code(&tokens, &code), None);
        assert!(s.get(&tokens, &id).is_none());
    }

    #[test]
    fn a_revoked_token_ends_its_sessions() {
        let tokens = Tokens::default();
        tokens.insert("h".into(), principal());
        let s = Sessions::new(false);
        let (id, _) = s.start(principal(), "h".into());
        assert!(s.get(&tokens, &id).is_some());
        tokens.remove_name("ann");
        assert!(s.get(&tokens, &id).is_none());
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(COOKIE, "a=1; lockgate_session=abc ; b=2".parse().unwrap());
        assert_eq!(cookie(&h), Some("abc"));
    }

    #[test]
    fn origin_must_be_this_host() {
        let mut h = HeaderMap::new();
        h.insert(HOST, "127.0.0.1:7400".parse().unwrap());
        assert!(check_same_origin(&h).is_ok());
        h.insert(ORIGIN, "http://127.0.0.1:7400".parse().unwrap());
        assert!(check_same_origin(&h).is_ok());
        h.insert(ORIGIN, "https://evil.example".parse().unwrap());
        assert!(check_same_origin(&h).is_err());
        h.remove(ORIGIN);
        h.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(check_same_origin(&h).is_err());
    }
}
