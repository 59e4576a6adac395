//! One connection to PostgreSQL, driven from synchronous code.
//!
//! # Implementation details
//! - The client is `tokio-postgres`. Its connection task runs on a private one-worker tokio
//!   runtime that [`Pg`] owns; the [`crate::Store`] methods wait for a query's answer with
//!   `futures_executor::block_on`, which only parks the calling thread. The server's event
//!   loop thread is itself inside a current-thread tokio runtime, where the sync
//!   `postgres` crate (a nested `Runtime::block_on`) would panic and `block_in_place` is
//!   not allowed; parking the thread is what a blocking SQLite call does there too.
//! - Statements are prepared once per connection and kept by their text ([`Conn::st`]):
//!   every query after the first is one Bind/Execute round trip.
//! - **Reconnect, never panic**: a call that finds the connection closed (the database
//!   restarted, the network broke) connects again first; a call that fails with the
//!   connection closed drops it, so the next call reconnects. The failed call returns its
//!   error ([`StoreError::Io`]); nothing is retried behind the caller's back.
//! - **The URL is a secret**: it is kept only to connect; everything shown (errors,
//!   [`Pg::shown`]) uses [`redact`], which replaces the password by `***`.

use crate::StoreError;
use std::collections::HashMap;
use std::time::Duration;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, NoTls, Row, Statement};

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// `idle_in_transaction_session_timeout` of every store session, in ms. A commit sends
/// its statements back to back, so a transaction idle this long belongs to a stopped or
/// stalled process. It must stay well below the takeover budget (TTL/9, docs/cluster.md):
/// a paused leader's open transaction holds the leader row FOR KEY SHARE until the server
/// ends it. A stall this long on a live leader fails one commit, which is retried.
const IDLE_IN_TRANSACTION_MS: u64 = 500;

/// An error inside a store call: the driver's, or one of ours.
#[derive(Debug)]
pub(super) enum PgError {
    /// From the driver (a query, the connection).
    Pg(tokio_postgres::Error),
    /// Already a store error (fenced, corrupt row).
    Store(StoreError),
}

impl From<tokio_postgres::Error> for PgError {
    fn from(e: tokio_postgres::Error) -> PgError {
        PgError::Pg(e)
    }
}

impl From<StoreError> for PgError {
    fn from(e: StoreError) -> PgError {
        PgError::Store(e)
    }
}

/// The result of a store call's inside.
pub(super) type R<T> = Result<T, PgError>;

/// The driver's message, with the server's detail when there is one.
pub(super) fn message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => match std::error::Error::source(e) {
            Some(src) => format!("{e}: {src}"),
            None => e.to_string(),
        },
    }
}

/// `url` with its password replaced by `***` (`postgres://user:***@host/db`). A
/// key-value string (`host=... password=...`) has its `password` value replaced.
pub fn redact(url: &str) -> String {
    if let Some(rest) = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
    {
        let scheme = &url[..url.len() - rest.len()];
        // The last `@` before the query ends the user info (a password may hold `@`).
        let authority = rest.split('?').next().unwrap_or(rest);
        let (auth, tail) = match authority.rfind('@') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => return redact_query(url),
        };
        let user = auth.split(':').next().unwrap_or_default();
        let shown = if auth.contains(':') {
            format!("{scheme}{user}:***{tail}")
        } else {
            format!("{scheme}{auth}{tail}")
        };
        return redact_query(&shown);
    }
    url.split(' ')
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if k.trim() == "password" => format!("{k}=***"),
            _ => kv.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A `password=` query parameter of a URL, replaced by `***`.
fn redact_query(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_string();
    };
    let query: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some(("password", _)) => "password=***".to_string(),
            _ => kv.to_string(),
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

/// Where a URL points, for messages: `host:port` (the first of each).
pub(super) fn endpoint(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!("{host}:{port}")
}

/// An open connection and its prepared statements.
pub(super) struct Conn {
    pub(super) client: Client,
    cache: HashMap<&'static str, Statement>,
}

impl Conn {
    /// The prepared statement of `sql` (prepared at its first use on this connection).
    pub(super) async fn st(&mut self, sql: &'static str) -> R<Statement> {
        if let Some(s) = self.cache.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql).await?;
        self.cache.insert(sql, s.clone());
        Ok(s)
    }

    /// Runs a prepared `sql`; the number of rows it changed.
    pub(super) async fn exec(&mut self, sql: &'static str, p: &[&(dyn ToSql + Sync)]) -> R<u64> {
        let s = self.st(sql).await?;
        Ok(self.client.execute(&s, p).await?)
    }

    /// The rows of a prepared `sql`.
    pub(super) async fn query(
        &mut self,
        sql: &'static str,
        p: &[&(dyn ToSql + Sync)],
    ) -> R<Vec<Row>> {
        let s = self.st(sql).await?;
        Ok(self.client.query(&s, p).await?)
    }

    /// The row of a prepared `sql`, if any.
    pub(super) async fn opt(
        &mut self,
        sql: &'static str,
        p: &[&(dyn ToSql + Sync)],
    ) -> R<Option<Row>> {
        let s = self.st(sql).await?;
        Ok(self.client.query_opt(&s, p).await?)
    }

    /// Runs `f` inside `BEGIN` .. `COMMIT` (`ROLLBACK` when it fails).
    pub(super) async fn transaction<T>(&mut self, f: impl AsyncFnOnce(&mut Conn) -> R<T>) -> R<T> {
        self.client.batch_execute("BEGIN").await?;
        match f(self).await {
            Ok(v) => {
                self.client.batch_execute("COMMIT").await?;
                Ok(v)
            }
            Err(e) => {
                // A closed connection has rolled back already.
                let _ = self.client.batch_execute("ROLLBACK").await;
                Err(e)
            }
        }
    }
}

/// A connection to one database, opened again after it is lost. See the module docs.
pub(super) struct Pg {
    config: tokio_postgres::Config,
    shown: String,
    rt: Option<tokio::runtime::Runtime>,
    conn: Option<Conn>,
}

impl std::fmt::Debug for Pg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pg")
            .field("url", &self.shown)
            .field("connected", &self.conn.is_some())
            .finish()
    }
}

impl Drop for Pg {
    fn drop(&mut self) {
        self.conn = None;
        // Never blocks: a store may be dropped inside another runtime (the event loop).
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl Pg {
    /// Connects to `url` (a `postgres://` URL or a key-value string).
    ///
    /// # Errors
    /// [`StoreError::Open`] naming `host:port` (never the password) when the URL is
    /// invalid or the database cannot be reached.
    pub(super) fn connect(url: &str) -> Result<Pg, StoreError> {
        let shown = redact(url);
        let open_err = |message: String| StoreError::Open {
            path: shown.clone(),
            message,
        };
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e: tokio_postgres::Error| open_err(format!("not a PostgreSQL URL: {e}")))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.application_name("lockgate");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("lockgate-pg")
            .enable_all()
            .build()
            .map_err(|e| open_err(format!("cannot start the connection thread: {e}")))?;
        let mut pg = Pg {
            config,
            shown: shown.clone(),
            rt: Some(rt),
            conn: None,
        };
        pg.reconnect().map_err(|e| open_err(e.to_string()))?;
        Ok(pg)
    }

    /// The URL as it may be shown (password replaced).
    pub(super) fn shown(&self) -> &str {
        &self.shown
    }

    /// Opens a new connection (dropping the old one).
    fn reconnect(&mut self) -> Result<(), StoreError> {
        self.conn = None;
        let config = self.config.clone();
        let rt = self.rt.as_ref().expect("runtime lives as long as Pg");
        let task = rt.spawn(async move {
            let (client, connection) = config.connect(NoTls).await?;
            tokio::spawn(async move {
                let _ = connection.await;
            });
            // Durable on return, whatever the server's default (docs/postgresql.md). A
            // session idle inside a transaction (a paused or stalled process) is ended
            // by the server: its fence check holds the leader row FOR KEY SHARE, which
            // would else keep every standby's takeover waiting for as long as it is
            // paused.
            client
                .batch_execute(&format!(
                    "SET synchronous_commit TO on; \
                     SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}"
                ))
                .await?;
            Ok::<_, tokio_postgres::Error>(client)
        });
        let client = futures_executor::block_on(task)
            .map_err(|e| StoreError::Io {
                operation: "connect",
                message: e.to_string(),
            })?
            .map_err(|e| StoreError::Unreachable {
                operation: "connect",
                message: format!(
                    "cannot connect to PostgreSQL at {}: {}",
                    endpoint(&self.config),
                    message(&e)
                ),
            })?;
        self.conn = Some(Conn {
            client,
            cache: HashMap::new(),
        });
        Ok(())
    }

    /// Runs `f` on the connection (connecting first when there is none, or it was lost).
    ///
    /// # Errors
    /// [`StoreError::Io`] named `operation` (or the store error `f` returned).
    pub(super) fn run<T>(
        &mut self,
        operation: &'static str,
        f: impl AsyncFnOnce(&mut Conn) -> R<T>,
    ) -> Result<T, StoreError> {
        if self.conn.as_ref().is_none_or(|c| c.client.is_closed()) {
            self.reconnect().map_err(|e| match e {
                StoreError::Io { message, .. } => StoreError::Io { operation, message },
                StoreError::Unreachable { message, .. } => {
                    StoreError::Unreachable { operation, message }
                }
                e => e,
            })?;
        }
        let conn = self.conn.as_mut().expect("connected above");
        let result = futures_executor::block_on(f(conn));
        let lost = conn.client.is_closed();
        if lost {
            self.conn = None;
        }
        result.map_err(|e| match e {
            PgError::Pg(e) if lost || unreachable(&e) => StoreError::Unreachable {
                operation,
                message: message(&e),
            },
            PgError::Pg(e) if e.code() == Some(&tokio_postgres::error::SqlState::DISK_FULL) => {
                StoreError::Full {
                    operation,
                    message: message(&e),
                }
            }
            PgError::Pg(e) => StoreError::Io {
                operation,
                message: message(&e),
            },
            PgError::Store(e) => e,
        })
    }
}

/// Whether `e` says the database is away rather than that the statement was wrong: no
/// answer came (an I/O error, a closed connection), or the server is going down or refused
/// the session (SQLSTATE classes 08, connection exception, and 57, operator intervention:
/// `admin_shutdown`, `cannot_connect_now`...).
fn unreachable(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.as_db_error() {
        Some(db) => {
            let code = db.code().code();
            code.starts_with("08") || code.starts_with("57")
        }
        // No answer from the server at all (an I/O error, a timeout).
        None => std::error::Error::source(e).is_some_and(|c| c.is::<std::io::Error>()),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn a_shown_url_never_holds_its_password() {
        for (url, shown) in [
            (
                "postgres://lg:s3cret@db.example:5432/lockgate",
                "postgres://lg:***@db.example:5432/lockgate",
            ),
            ("postgresql://lg@db/lockgate", "postgresql://lg@db/lockgate"),
            (
                "postgres://db/lockgate?user=lg&password=s3cret",
                "postgres://db/lockgate?user=lg&password=***",
            ),
            (
                "host=db user=lg password=s3cret dbname=lockgate",
                "host=db user=lg password=*** dbname=lockgate",
            ),
            ("postgres://lg:p@s/s@db/x", "postgres://lg:***@db/x"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }
}
