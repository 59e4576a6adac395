//! One attempt to send one notification: a webhook POST or an e-mail.
//!
//! Webhooks: the body is the event exactly as `/v1/events` serves it; with a secret, the
//! header `X-Lockgate-Signature: sha256=<hex HMAC-SHA256(secret, body)>` signs it; a
//! password in the URL is sent as HTTP Basic credentials. Any 2xx answer is delivery.
//! E-mail: one message per event over SMTP (STARTTLS unless `starttls = false`), its
//! subject naming the job and its outcome (or the event's type and severity), its body the
//! event's fields and then the event as JSON.
//!
//! Every attempt runs under the target's `timeout` as a whole (connect, TLS, request).

use super::matcher::severity;
use lockgate_core::policy::{NotifyTarget, NotifyVia, SecretRef};
use serde_json::{Map, Value};
use std::sync::{Arc, OnceLock};

/// Sends `body` (an `EventView` as JSON) through `target`.
///
/// # Errors
/// Why it was not delivered (retried by the caller while retries remain).
///
/// # Cancel safety
/// Cancel safe: dropping it abandons the attempt (a request half sent, an SMTP session
/// cut); nothing here records the attempt, so the caller's outbox still holds the event
/// and the next attempt sends it again (delivery is at least once).
pub(crate) async fn send(target: &NotifyTarget, body: &str) -> Result<String, String> {
    let secret = target.secret.as_ref().map(resolve).transpose()?;
    let attempt = async {
        match &target.via {
            NotifyVia::Webhook { url } => webhook(url, secret.as_deref(), body).await,
            NotifyVia::Smtp { .. } => email(&target.via, secret, body).await,
        }
    };
    match tokio::time::timeout(target.timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "no answer within the timeout of {}s",
            target.timeout.as_secs_f64()
        )),
    }
}

/// Reads a target's secret now, at each attempt (a rotated file or variable takes effect
/// at the next send). The policy only names it (`SecretRef`); the server reads it.
///
/// # Errors
/// Which file or variable could not be read, and why.
fn resolve(secret: &SecretRef) -> Result<String, String> {
    match secret {
        SecretRef::File(p) => std::fs::read_to_string(p)
            .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
            .map_err(|e| format!("cannot read secret_file {}: {e}", p.display())),
        SecretRef::Env(v) => std::env::var(v)
            .map_err(|_| format!("secret_env {v} is not set in the server's environment")),
    }
}

/// `sha256=<hex>` of the HMAC-SHA256 of `body` under `secret`.
pub(crate) fn signature(secret: &str, body: &[u8]) -> String {
    use hmac::{Hmac, Mac};
    let mut mac =
        Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
    mac.update(body);
    format!("sha256={}", crate::auth::hex(&mac.finalize().into_bytes()))
}

fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            Arc::new(
                rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .expect("ring supports the default versions")
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            )
        })
        .clone()
}

/// The URL without its userinfo, and the userinfo (`user:password`) if any.
fn split_userinfo(url: &str) -> (String, Option<String>) {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return (url.to_string(), None);
    };
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    match url[start..end].rfind('@') {
        Some(at) => (
            format!("{}{}", &url[..start], &url[start + at + 1..]),
            Some(url[start..start + at].to_string()),
        ),
        None => (url.to_string(), None),
    }
}

async fn webhook(url: &str, secret: Option<&str>, body: &str) -> Result<String, String> {
    use base64::Engine as _;
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    let (bare, userinfo) = split_userinfo(url);
    let uri: hyper::Uri = bare.parse().map_err(|e| format!("bad URL: {e}"))?;
    let https = uri.scheme_str() == Some("https");
    let host = uri.host().ok_or("the URL has no host")?.to_string();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let mut req = hyper::Request::post(path)
        .header(
            hyper::header::HOST,
            uri.authority().map_or(host.as_str(), |a| a.as_str()),
        )
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(
            hyper::header::USER_AGENT,
            concat!("lockgate/", env!("CARGO_PKG_VERSION")),
        );
    if let Some(secret) = secret {
        req = req.header("X-Lockgate-Signature", signature(secret, body.as_bytes()));
    }
    if let Some(u) = userinfo {
        let basic = base64::engine::general_purpose::STANDARD.encode(u.as_bytes());
        req = req.header(hyper::header::AUTHORIZATION, format!("Basic {basic}"));
    }
    let req = req
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| format!("cannot build the request: {e}"))?;
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?;
    let _ = tcp.set_nodelay(true);
    let resp = if https {
        let name = rustls::pki_types::ServerName::try_from(host.clone())
            .map_err(|e| format!("bad TLS server name {host:?}: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(tls_config())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS with {host}:{port} failed: {e}"))?;
        post(hyper_util::rt::TokioIo::new(tls), req).await?
    } else {
        post(hyper_util::rt::TokioIo::new(tcp), req).await?
    };
    let status = resp.status();
    let answer = resp.into_body().collect().await.map(|b| b.to_bytes());
    let answer = answer.map(|b| String::from_utf8_lossy(&b[..b.len().min(200)]).into_owned());
    let detail = format!("HTTP {status} {}", answer.unwrap_or_default().trim());
    if status.is_success() {
        Ok(detail)
    } else {
        Err(detail)
    }
}

async fn post<T>(
    io: T,
    req: hyper::Request<http_body_util::Full<hyper::body::Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake failed: {e}"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender
        .send_request(req)
        .await
        .map_err(|e| format!("HTTP request failed: {e}"))
}

/// The subject line: `lockgate: job 42 (backup) failed` for a job event, else
/// `lockgate: rpo_alert (warning)`.
fn subject(data: &Map<String, Value>) -> String {
    let text =
        |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_str).map(str::to_string);
    if let Some(job) = data.get("job").and_then(Value::as_object) {
        let id = job.get("id").and_then(Value::as_u64).unwrap_or(0);
        let kind = text(job, "kind").unwrap_or_default();
        let what = match text(data, "change").as_deref() {
            Some("finished") => text(job, "state").unwrap_or_default(),
            other => other.unwrap_or("changed").to_string(),
        };
        return format!("lockgate: job {id} ({kind}) {what}");
    }
    let ty = text(data, "type").unwrap_or_else(|| "event".into());
    format!("lockgate: {ty} ({})", severity(data))
}

/// The mail text: one `field: value` line per field of the event (the job's, for a job
/// event), then the event as JSON.
fn mail_text(event: &Value) -> String {
    let mut out = String::new();
    let mut line = |k: &str, v: &Value| {
        let v = match v {
            Value::String(s) => s.clone(),
            Value::Null => return,
            other => other.to_string(),
        };
        out.push_str(&format!("{k}: {v}\n"));
    };
    line("seq", &event["seq"]);
    line("at", &event["at"]);
    if let Some(data) = event.as_object() {
        line("severity", &Value::String(severity(data).to_string()));
        for (k, v) in data {
            match (k.as_str(), v.as_object()) {
                ("seq" | "at", _) => {}
                ("job", Some(job)) => {
                    for (jk, jv) in job {
                        line(&format!("job.{jk}"), jv);
                    }
                }
                _ => line(k, v),
            }
        }
    }
    out.push('\n');
    out.push_str(&serde_json::to_string_pretty(event).unwrap_or_default());
    out.push('\n');
    out
}

async fn email(via: &NotifyVia, secret: Option<String>, body: &str) -> Result<String, String> {
    use lettre::message::header::ContentType;
    use lettre::transport::smtp::authentication::Credentials;
    use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
    let NotifyVia::Smtp {
        host,
        port,
        user,
        password,
        starttls,
        from,
        to,
    } = via
    else {
        unreachable!("email() is called for SMTP targets")
    };
    let event: Value = serde_json::from_str(body).map_err(|e| format!("bad event: {e}"))?;
    let data = event.as_object().cloned().unwrap_or_default();
    let addr = |a: &str| {
        a.parse::<lettre::message::Mailbox>()
            .map_err(|e| format!("bad address {a:?}: {e}"))
    };
    let mut msg = Message::builder().from(addr(from)?).subject(subject(&data));
    for t in to {
        msg = msg.to(addr(t)?);
    }
    let msg = msg
        .header(ContentType::TEXT_PLAIN)
        .body(mail_text(&event))
        .map_err(|e| format!("cannot build the mail: {e}"))?;
    let mut mailer = if *starttls {
        AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(host)
            .map_err(|e| format!("STARTTLS setup for {host}: {e}"))?
    } else {
        AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)
    }
    .port(*port);
    if let Some(user) = user {
        let pass = password.clone().or(secret).unwrap_or_default();
        mailer = mailer.credentials(Credentials::new(user.clone(), pass));
    }
    let answer = mailer
        .build()
        .send(msg)
        .await
        .map_err(|e| format!("SMTP {host}:{port}: {e}"))?;
    Ok(format!(
        "SMTP {} {}",
        answer.code(),
        answer.message().collect::<Vec<_>>().join(" ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_the_hex_hmac_sha256_of_the_body() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn userinfo_leaves_the_url_and_becomes_credentials() {
        assert_eq!(
            split_userinfo("https://u:p@h:8/x?y=1"),
            ("https://h:8/x?y=1".to_string(), Some("u:p".to_string()))
        );
        assert_eq!(
            split_userinfo("http://h/a@b"),
            ("http://h/a@b".to_string(), None)
        );
    }
}
