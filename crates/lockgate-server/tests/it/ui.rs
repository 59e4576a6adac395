//! The dashboard over real HTTP: the sign-in page and the app, sessions and their cookie,
//! CSRF and cross-site refusals, roles, sign-out, one-time codes, the embedded assets and
//! the overview's numbers against the API's.

use crate::harness::{job, tempdir, TestServer};
use lockgate_api::{NodeRegister, Role, TokenCreate};
use std::collections::BTreeMap;

const POLICY: &str = r#"
[global]
max_running = 2

[[limit]]
name = "per-repo"
per = ["repo"]
max = 1
"#;

/// One answer: status, headers (lower-case names; repeated ones joined by "\n"), body.
struct Answer {
    status: u16,
    headers: BTreeMap<String, String>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or("")
    }
}

/// A request with `headers`, never following a redirect.
fn call(
    s: &TestServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, &str)>,
) -> Answer {
    let agent = ureq::AgentBuilder::new().redirects(0).build();
    let mut req = agent.request(method, &format!("{}{path}", s.url));
    for (k, v) in headers {
        req = req.set(k, v);
    }
    let r = match body {
        Some((ctype, text)) => req.set("Content-Type", ctype).send_string(text),
        None => req.call(),
    };
    let resp = match r {
        Ok(resp) => resp,
        Err(ureq::Error::Status(_, resp)) => resp,
        Err(e) => panic!("transport error: {e}"),
    };
    let mut headers = BTreeMap::new();
    for name in resp.headers_names() {
        let all: Vec<&str> = resp.all(&name);
        headers.insert(name.to_lowercase(), all.join("\n"));
    }
    Answer {
        status: resp.status(),
        headers,
        body: resp.into_string().unwrap(),
    }
}

const FORM: &str = "application/x-www-form-urlencoded";

/// Signs in with `token` (a token or a code); the answer.
fn login(s: &TestServer, token: &str) -> Answer {
    let body = format!("token={}", urlencode(token));
    call(s, "POST", "/ui/login", &[], Some((FORM, &body)))
}

fn urlencode(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// The `Cookie` header of a signed-in answer.
fn cookie_of(a: &Answer) -> String {
    let set = a.header("set-cookie");
    let pair = set.split(';').next().unwrap().trim();
    assert!(pair.starts_with("lockgate_session="), "{set}");
    pair.to_string()
}

/// A session: its cookie and CSRF token.
fn session(s: &TestServer, token: &str) -> (String, String) {
    let a = login(s, token);
    assert_eq!(a.status, 303, "{}", a.body);
    let cookie = cookie_of(&a);
    let me = call(s, "GET", "/ui/session", &[("Cookie", &cookie)], None);
    assert_eq!(me.status, 200, "{}", me.body);
    let v: serde_json::Value = serde_json::from_str(&me.body).unwrap();
    (cookie, v["csrf"].as_str().unwrap().to_string())
}

fn secret(s: &TestServer, name: &str, role: Role) -> String {
    s.admin()
        .create_token(&TokenCreate {
            name: name.into(),
            role,
            node: None,
        })
        .unwrap()
        .token
}

#[test]
fn get_ui_answers_html_to_anyone_the_sign_in_page_without_a_session() {
    let dir = tempdir();
    let s = TestServer::open(dir.path(), None);
    let a = call(&s, "GET", "/ui/", &[], None);
    assert_eq!(a.status, 200);
    assert!(
        a.header("content-type").starts_with("text/html"),
        "{:?}",
        a.headers
    );
    assert!(
        a.body.contains(r#"<form method="post" action="/ui/login""#),
        "{}",
        a.body
    );
    assert!(a.body.contains(r#"name="token""#));
    assert!(a
        .header("content-security-policy")
        .contains("script-src 'self'"));
    assert_eq!(a.header("x-frame-options"), "DENY");
    // A stale cookie is the sign-in page too, not an error.
    let stale = call(
        &s,
        "GET",
        "/ui/",
        &[("Cookie", "lockgate_session=00")],
        None,
    );
    assert_eq!(stale.status, 200);
    assert!(stale.body.contains("/ui/login"));
    let (cookie, _) = session(&s, &s.admin);
    let app = call(&s, "GET", "/ui/", &[("Cookie", &cookie)], None);
    assert_eq!(app.status, 200);
    assert!(app.header("content-type").starts_with("text/html"));
    assert!(
        app.body.contains(r#"data-testid="nav-overview""#),
        "{}",
        app.body
    );
    assert!(app.body.contains(r#"data-testid="signout-button""#));
}

#[test]
fn sign_in_with_admin_and_viewer_tokens_gives_a_strict_http_only_cookie_and_a_bad_one_401() {
    let dir = tempdir();
    let s = TestServer::open(dir.path(), None);
    let a = login(&s, &s.admin);
    assert_eq!(a.status, 303);
    assert_eq!(a.header("location"), "/ui/");
    let set = a.header("set-cookie");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(set.contains(flag), "{flag} missing in {set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP: no Secure flag: {set}");
    let id = cookie_of(&a)["lockgate_session=".len()..].to_string();
    assert_eq!(id.len(), 64, "256 random bits as hex");
    assert!(!set.contains(&s.admin), "the token is not the cookie");

    let viewer = secret(&s, "val", Role::Viewer);
    let (cookie, csrf) = session(&s, &viewer);
    let me = call(&s, "GET", "/ui/session", &[("Cookie", &cookie)], None);
    let v: serde_json::Value = serde_json::from_str(&me.body).unwrap();
    assert_eq!(
        (v["name"].as_str(), v["role"].as_str()),
        (Some("val"), Some("viewer"))
    );
    assert_eq!(v["csrf"].as_str().unwrap(), csrf);
    assert!(v["expires"].as_str().unwrap().ends_with('Z'));
    // The session reads the API with the viewer's role.
    let nodes = call(&s, "GET", "/v1/nodes", &[("Cookie", &cookie)], None);
    assert_eq!(nodes.status, 200, "{}", nodes.body);

    let bad = login(&s, "not-a-token");
    assert_eq!(bad.status, 401);
    assert!(bad.header("content-type").starts_with("text/html"));
    assert!(bad.body.contains(r#"id="login-error""#), "{}", bad.body);
    assert!(bad.header("set-cookie").is_empty());
    let empty = login(&s, "");
    assert_eq!(empty.status, 401);
    assert!(empty.body.contains("login-error"));
    // A JSON body is not the form.
    let json = call(
        &s,
        "POST",
        "/ui/login",
        &[],
        Some(("application/json", "{}")),
    );
    assert_eq!(json.status, 415, "{}", json.body);
}

#[test]
fn a_cookie_request_that_acts_needs_the_csrf_token_and_this_origin() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    s.admin()
        .register_node("n1", &NodeRegister::default())
        .unwrap();
    let (cookie, csrf) = session(&s, &s.admin);
    let origin = s.url.clone();
    let cordon = "/v1/nodes/n1/cordon";

    let none = call(&s, "POST", cordon, &[("Cookie", &cookie)], None);
    assert_eq!(none.status, 403, "{}", none.body);
    assert!(none.body.contains("X-CSRF-Token"), "{}", none.body);
    let wrong = call(
        &s,
        "POST",
        cordon,
        &[("Cookie", &cookie), ("X-CSRF-Token", "0")],
        None,
    );
    assert_eq!(wrong.status, 403);
    let cross = call(
        &s,
        "POST",
        cordon,
        &[
            ("Cookie", &cookie),
            ("X-CSRF-Token", &csrf),
            ("Origin", "https://evil.example"),
        ],
        None,
    );
    assert_eq!(cross.status, 403, "{}", cross.body);
    assert!(cross.body.contains("cross-site"), "{}", cross.body);
    let site = call(
        &s,
        "POST",
        cordon,
        &[
            ("Cookie", &cookie),
            ("X-CSRF-Token", &csrf),
            ("Sec-Fetch-Site", "cross-site"),
        ],
        None,
    );
    assert_eq!(site.status, 403);
    assert!(
        !s.admin().nodes().unwrap().nodes[0].cordoned,
        "no refused request acted"
    );

    let ok = call(
        &s,
        "POST",
        cordon,
        &[
            ("Cookie", &cookie),
            ("X-CSRF-Token", &csrf),
            ("Origin", &origin),
            ("Sec-Fetch-Site", "same-origin"),
        ],
        None,
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(s.admin().nodes().unwrap().nodes[0].cordoned);
    // Reads need no CSRF token; bearer requests are unchanged.
    assert_eq!(
        call(&s, "GET", "/v1/nodes", &[("Cookie", &cookie)], None).status,
        200
    );
    let bearer = format!("Bearer {}", s.admin);
    let b = call(
        &s,
        "POST",
        "/v1/nodes/n1/uncordon",
        &[("Authorization", &bearer)],
        None,
    );
    assert_eq!(b.status, 200, "{}", b.body);
    // A cross-site sign-in form is refused too.
    let body = format!("token={}", s.admin);
    let x = call(
        &s,
        "POST",
        "/ui/login",
        &[("Origin", "https://evil.example")],
        Some((FORM, &body)),
    );
    assert_eq!(x.status, 403);
    assert!(x.header("set-cookie").is_empty());
    // The dashboard's act is in the audit log under the session's principal.
    let audit = s.admin().audit(&Default::default()).unwrap();
    let row = audit
        .entries
        .iter()
        .find(|e| e.path == cordon && e.outcome == lockgate_api::AuditOutcome::Ok)
        .expect("the cordon is audited");
    assert_eq!(row.principal.as_deref(), Some("admin"));
}

#[test]
fn a_viewer_session_cannot_cordon() {
    let dir = tempdir();
    let s = TestServer::open(dir.path(), None);
    s.admin()
        .register_node("n1", &NodeRegister::default())
        .unwrap();
    let viewer = secret(&s, "val", Role::Viewer);
    let (cookie, csrf) = session(&s, &viewer);
    let a = call(
        &s,
        "POST",
        "/v1/nodes/n1/cordon",
        &[("Cookie", &cookie), ("X-CSRF-Token", &csrf)],
        None,
    );
    assert_eq!(a.status, 403, "{}", a.body);
    assert!(a.body.contains("viewer"), "{}", a.body);
    assert!(!s.admin().nodes().unwrap().nodes[0].cordoned);
    let code = call(
        &s,
        "POST",
        "/v1/ui/codes",
        &[("Cookie", &cookie), ("X-CSRF-Token", &csrf)],
        None,
    );
    assert_eq!(code.status, 403, "only an admin makes codes: {}", code.body);
}

#[test]
fn after_sign_out_or_revoke_the_old_cookie_is_refused_everywhere() {
    let dir = tempdir();
    let s = TestServer::open(dir.path(), None);
    let (cookie, csrf) = session(&s, &s.admin);
    let wrong = call(
        &s,
        "POST",
        "/ui/logout",
        &[("Cookie", &cookie)],
        Some((FORM, "csrf=nope")),
    );
    assert_eq!(wrong.status, 403, "sign-out needs the CSRF token");
    // Another site's form cannot sign the browser out, not even by clearing the cookie.
    let forced = call(
        &s,
        "POST",
        "/ui/logout",
        &[("Origin", "https://attacker.test")],
        Some((FORM, "csrf=x")),
    );
    assert_eq!(forced.status, 403);
    assert!(
        forced.header("set-cookie").is_empty(),
        "{:?}",
        forced.headers
    );
    assert_eq!(
        call(&s, "GET", "/ui/session", &[("Cookie", &cookie)], None).status,
        200
    );
    let out = call(
        &s,
        "POST",
        "/ui/logout",
        &[("Cookie", &cookie)],
        Some((FORM, &format!("csrf={csrf}"))),
    );
    assert_eq!(out.status, 303);
    assert!(out.header("set-cookie").contains("Max-Age=0"));
    for path in ["/ui/session", "/v1/nodes", "/v1/events?after=0"] {
        let a = call(&s, "GET", path, &[("Cookie", &cookie)], None);
        assert_eq!(a.status, 401, "{path}: {}", a.body);
    }
    let page = call(&s, "GET", "/ui/", &[("Cookie", &cookie)], None);
    assert!(page.body.contains("/ui/login"), "the sign-in page again");

    // `lockgate token revoke` ends the sessions of that token.
    let sub = secret(&s, "sue", Role::Submitter);
    let (cookie, _) = session(&s, &sub);
    assert_eq!(
        call(&s, "GET", "/v1/jobs", &[("Cookie", &cookie)], None).status,
        200
    );
    s.admin().revoke_token("sue").unwrap();
    assert_eq!(
        call(&s, "GET", "/v1/jobs", &[("Cookie", &cookie)], None).status,
        401
    );
    assert_eq!(
        call(&s, "GET", "/ui/session", &[("Cookie", &cookie)], None).status,
        401
    );
}

#[test]
fn a_one_time_code_signs_in_once() {
    let dir = tempdir();
    let s = TestServer::open(dir.path(), None);
    let code = s.admin().ui_code().unwrap();
    assert_eq!(code.code.len(), 14, "{}", code.code);
    assert!(!code.code.contains(&s.admin));
    let first = login(&s, &code.code.to_lowercase());
    assert_eq!(first.status, 303, "case does not matter: {}", first.body);
    let cookie = cookie_of(&first);
    let me = call(&s, "GET", "/ui/session", &[("Cookie", &cookie)], None);
    assert!(me.body.contains(r#""role":"admin""#), "{}", me.body);
    let again = login(&s, &code.code);
    assert_eq!(again.status, 401, "a used code is refused");
    assert!(again.body.contains("login-error"));
    // Only an admin makes one.
    let viewer = secret(&s, "val", Role::Viewer);
    let (st, _) = s.raw("POST", "/v1/ui/codes", Some(&viewer), None);
    assert_eq!(st, 403);
    // A code dies with its admin token.
    let other = secret(&s, "root2", Role::Admin);
    let c2 = s.client(Some(&other)).ui_code().unwrap();
    s.admin().revoke_token("root2").unwrap();
    assert_eq!(login(&s, &c2.code).status, 401);
}

#[test]
fn every_embedded_asset_is_served_with_its_content_type() {
    let dir = tempdir();
    let s = TestServer::open(dir.path(), None);
    let mut referenced: Vec<String> = Vec::new();
    let app = lockgate_server::ui::pages::app("");
    for part in app.split("/ui/assets/").skip(1) {
        referenced.push(part.split('"').next().unwrap().to_string());
    }
    for a in lockgate_server::ui::pages::ASSETS {
        let got = call(&s, "GET", &format!("/ui/assets/{}", a.name), &[], None);
        assert_eq!(got.status, 200, "{}", a.name);
        assert_eq!(got.header("content-type"), a.content_type, "{}", a.name);
        assert_eq!(got.header("x-content-type-options"), "nosniff");
        assert_eq!(got.body, a.body, "{}", a.name);
        let want = match a.name.rsplit('.').next().unwrap() {
            "js" => "text/javascript",
            "css" => "text/css",
            "svg" => "image/svg+xml",
            other => panic!("an asset of unknown type {other}"),
        };
        assert!(a.content_type.starts_with(want), "{}", a.name);
        // Every module a script imports is an asset too.
        for imp in a.body.split("from \"./").skip(1) {
            referenced.push(imp.split('"').next().unwrap().to_string());
        }
    }
    for name in referenced {
        assert!(
            lockgate_server::ui::pages::asset(&name).is_some(),
            "{name} is loaded by the pages but not embedded"
        );
    }
    let missing = call(&s, "GET", "/ui/assets/nope.js", &[], None);
    assert_eq!(missing.status, 404);
    assert!(missing
        .header("content-type")
        .starts_with("application/json"));
}

#[test]
fn the_overview_counts_what_the_engine_counts() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let admin = s.admin();
    for repo in ["r1", "r1", "r2", "r3"] {
        admin.submit(&job("restic", &[("repo", repo)])).unwrap();
    }
    let (cookie, _) = session(&s, &s.admin);
    let a = call(&s, "GET", "/v1/ui/overview", &[("Cookie", &cookie)], None);
    assert_eq!(a.status, 200, "{}", a.body);
    let o: lockgate_api::UiOverview = serde_json::from_str(&a.body).unwrap();
    assert_eq!(o.states["running"], 2);
    assert_eq!(o.states["queued"], 2);
    assert_eq!(o.queued_by_kind["restic"], 2);
    assert_eq!(o.queued_by_owner["admin"], 2);
    let oldest = o.oldest_waiting.expect("a job waits");
    assert_eq!(
        oldest.id, 2,
        "the second r1 job waits longest (ids break ties)"
    );
    let global = o.scopes.iter().find(|x| x.scope == "global").unwrap();
    assert_eq!((global.used, global.running, global.limit), (2, 2, Some(2)));
    let r1 = o
        .scopes
        .iter()
        .find(|x| x.scope == "limit:per-repo[repo=r1]")
        .unwrap();
    assert_eq!(
        (r1.used, r1.running, r1.limit, r1.over_limit),
        (1, 1, Some(1), false)
    );
    // The numbers are /metrics' numbers.
    let (_, metrics) = s.raw("GET", "/metrics", None, None);
    for sc in o.scopes.iter().filter(|x| x.used > 0) {
        let line = format!(
            "lockgate_scope_running{{scope=\"{}\"}} {}",
            sc.scope, sc.used
        );
        assert!(metrics.contains(&line), "{line} not in the metrics");
    }
    // A lowered limit leaves the scope over it, and the overview says so.
    admin
        .put_policy(
            &POLICY.replace("max_running = 2", "max_running = 1"),
            false,
            None,
        )
        .unwrap();
    let o = s.admin().ui_overview().unwrap();
    let global = o.scopes.iter().find(|x| x.scope == "global").unwrap();
    assert!(global.over_limit, "{global:?}");
    assert!(o.last_seq > 0);
}

#[test]
fn occupancy_replays_the_event_log() {
    let dir = tempdir();
    let s = TestServer::start(dir.path(), POLICY);
    let admin = s.admin();
    let (a, _) = admin.submit(&job("restic", &[("repo", "r1")])).unwrap();
    admin.submit(&job("restic", &[("repo", "r2")])).unwrap();
    let token = a.lease.unwrap().token;
    admin
        .finish_job(a.id, token, lockgate_core::Outcome::Succeeded, None)
        .unwrap();
    let (st, body) = s.raw("GET", "/v1/ui/occupancy?hours=1", Some(&s.admin), None);
    assert_eq!(st, 200, "{body}");
    let occ: lockgate_api::UiOccupancy = serde_json::from_str(&body).unwrap();
    let global = occ.series.iter().find(|x| x.scope == "global").unwrap();
    assert_eq!(global.limit, Some(2));
    assert_eq!(global.peak.iter().max(), Some(&2), "{global:?}");
    assert_eq!(*global.peak.last().unwrap(), 2, "the last bucket's peak");
    assert!(occ.waits_by_kind.contains_key("restic"));
    assert!(!occ.truncated);
    let (st, _) = s.raw("GET", "/v1/ui/occupancy?hours=0", Some(&s.admin), None);
    assert_eq!(st, 422);
}
