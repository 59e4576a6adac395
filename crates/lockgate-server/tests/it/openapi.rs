//! The OpenAPI document: served without a token, OpenAPI 3.1, one operation per route of
//! the router (read from the routers' sources, so a route without `#[utoipa::path]` fails
//! here), and the same bytes as `docs/openapi.json` (`UPDATE_OPENAPI=1` rewrites it).

use crate::harness::{tempdir, TestServer};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

fn served(s: &TestServer) -> (String, Value) {
    let (status, body) = s.raw("GET", "/v1/openapi.json", None, None);
    assert_eq!(status, 200, "{body}");
    let doc: Value = serde_json::from_str(&body).expect("the document is JSON");
    (body, doc)
}

/// `(METHOD, path)` of every operation in the document.
fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let paths = doc["paths"].as_object().expect("paths");
    let mut ops = BTreeSet::new();
    for (path, item) in paths {
        for m in METHODS {
            if item.get(m).is_some() {
                ops.insert((m.to_uppercase(), path.clone()));
            }
        }
    }
    ops
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The text of the call that opens at `open` (just after its `(`), up to its `)`.
fn call_args(text: &str, open: usize) -> &str {
    let mut depth = 1;
    for (i, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &text[open..open + i];
                }
            }
            _ => {}
        }
    }
    panic!("unbalanced .route( call");
}

/// `(METHOD, path)` of every `.route("PATH", get(..).post(..))` in the server's sources:
/// the router's own list, as axum keeps no list we could ask for.
fn router_routes() -> BTreeSet<(String, String)> {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut routes = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (at, _) in text.match_indices(".route(") {
            let args = call_args(&text, at + ".route(".len());
            let path = args.split('"').nth(1).expect("a route's path is a literal");
            let rest = &args[args.find(',').expect("route(path, handler)") + 1..];
            let mut found = false;
            for m in METHODS {
                for (i, _) in rest.match_indices(&format!("{m}(")) {
                    let before = rest[..i].chars().next_back();
                    if before.is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':')) {
                        routes.insert((m.to_uppercase(), path.to_string()));
                        found = true;
                    }
                }
            }
            assert!(found, "{}: no method in .route({args})", f.display());
        }
    }
    routes
}

#[test]
fn the_served_document_is_openapi_3_1_and_needs_no_token() {
    let dir = tempdir();
    let s = TestServer::open(dir.path(), None);
    let (_, doc) = served(&s);
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    assert_eq!(doc["security"], serde_json::json!([{"bearer": []}]));
    // Every operation has a unique id and its error answers, with the one error body.
    let mut ids = BTreeSet::new();
    for (method, path) in operations(&doc) {
        let op = &doc["paths"][&path][method.to_lowercase()];
        let id = op["operationId"].as_str().expect("an operationId");
        assert!(
            ids.insert(id.to_string()),
            "{method} {path}: operationId {id} twice"
        );
        for range in ["4XX", "5XX"] {
            assert!(
                op["responses"][range]["$ref"].is_string(),
                "{method} {path}"
            );
        }
    }
    let client = &doc["components"]["responses"]["ClientError"];
    assert_eq!(
        client["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ErrorBody"
    );
    assert!(client["description"]
        .as_str()
        .unwrap()
        .contains("`lease_lost` 409"));
    // The engine's enums are described from the engine's own names.
    assert_eq!(
        doc["components"]["schemas"]["JobState"]["enum"],
        serde_json::json!([
            "queued",
            "preparing",
            "prepared",
            "running",
            "succeeded",
            "failed",
            "cancelled",
            "lost",
            "expired"
        ])
    );
}

#[test]
fn every_route_is_in_the_document() {
    let dir = tempdir();
    let s = TestServer::open(dir.path(), None);
    let (_, doc) = served(&s);
    let routes = router_routes();
    assert!(routes.len() >= 35, "the source scan found only {routes:?}");
    let ops = operations(&doc);
    let missing: Vec<_> = routes.difference(&ops).collect();
    assert!(
        missing.is_empty(),
        "routes without #[utoipa::path] (or not listed in their feature's ApiDoc): {missing:?}"
    );
    let extra: Vec<_> = ops.difference(&routes).collect();
    assert!(extra.is_empty(), "documented but not routed: {extra:?}");
    // And the server answers each documented operation itself (a 401 or a 200), never
    // with the unknown-endpoint 404 or a 405.
    for (method, path) in &ops {
        let concrete = path
            .replace("{id}", "1")
            .replace("{job}", "1")
            .replace("{name}", "n1");
        let (status, body) = s.raw(method, &concrete, None, None);
        assert!(
            status != 405 && !body.contains("no such endpoint"),
            "{method} {path}: {status} {body}"
        );
    }
}

#[test]
fn docs_openapi_json_is_what_the_server_serves() {
    let dir = tempdir();
    let s = TestServer::open(dir.path(), None);
    let (text, _) = served(&s);
    assert_eq!(text, lockgate_server::openapi::json());
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json");
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(&file, &text).unwrap();
    }
    let kept = std::fs::read_to_string(&file).unwrap_or_default();
    assert!(
        kept == text,
        "docs/openapi.json is not what the server serves: regenerate it with \
         `UPDATE_OPENAPI=1 cargo test -p lockgate-server --test it openapi`"
    );
}

/// The first schemathesis run found the document refusing what the server takes: a `u64`
/// written as `int64` (ids and `after` above 2^63 - 1), a `u32` as `int32` (`limit` above
/// 2^31 - 1), and a node's `kinds` as unique items (the server counts a repeat once).
#[test]
fn the_document_admits_what_the_server_takes() {
    let dir = tempdir();
    let s = TestServer::open(dir.path(), None);
    let (_, doc) = served(&s);
    let schemas = &doc["components"]["schemas"];
    assert_eq!(schemas["JobView"]["properties"]["id"]["format"], "uint64");
    let params = doc["paths"]["/v1/jobs"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let limit = params.iter().find(|p| p["name"] == "limit").unwrap();
    assert_eq!(limit["schema"]["format"], "uint32");
    assert!(
        !doc.to_string().contains("\"int32\""),
        "a u32 left as int32"
    );
    let kinds = &schemas["NodeRegister"]["properties"]["kinds"];
    assert!(kinds.get("uniqueItems").is_none(), "{kinds}");
    // And the server does take them.
    let admin = Some(s.admin.as_str());
    let (status, body) = s.raw("GET", "/v1/events?after=9223372036854775808", admin, None);
    assert_eq!(status, 200, "{body}");
    let (status, body) = s.raw("GET", "/v1/jobs?limit=2147483648", admin, None);
    assert_eq!(status, 200, "{body}");
    let twice = ("application/json", r#"{"kinds": ["restic", "restic"]}"#);
    let (status, body) = s.raw("PUT", "/v1/nodes/n1", admin, Some(twice));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""kinds":["restic"]"#), "{body}");
}

/// Found by schemathesis: `PUT /v1/nodes/n1` with the body `[]` registered a node (serde
/// reads a struct from an array), though the document asks for an object.
#[test]
fn an_array_body_is_refused_not_read_as_an_object() {
    let dir = tempdir();
    let s = TestServer::open(dir.path(), None);
    let admin = Some(s.admin.as_str());
    for (method, path) in [("PUT", "/v1/nodes/n1"), ("POST", "/v1/jobs")] {
        let (status, body) = s.raw(method, path, admin, Some(("application/json", "[]")));
        assert_eq!(status, 422, "{method} {path}: {body}");
        assert!(body.contains("expected a JSON object"), "{body}");
    }
    let (status, body) = s.raw("GET", "/v1/nodes", admin, None);
    assert_eq!((status, body.as_str()), (200, r#"{"nodes":[]}"#));
}
