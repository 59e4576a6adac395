//! `lockgate server`: the scheduler.

use crate::GlobalArgs;
use anyhow::Context;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// Arguments of `lockgate server`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Policy file: the one source of truth, read at start and on SIGHUP; `PUT /v1/policy`
    /// rewrites it atomically (keeping FILE.bak). Without it the store holds the policy.
    /// With --database-url the database holds it: the file only seeds an empty database
    /// and SIGHUP applies it to the database; it is never written. A directory: its
    /// *.toml files merged in name order (docs/policy.md), never written.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where the store (lockgate.db) and admin.token live. Default: $XDG_DATA_HOME/lockgate,
    /// else ~/.local/share/lockgate.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address to listen on. Plain HTTP is for loopback; use TLS otherwise.
    #[arg(long, default_value = "127.0.0.1:7400")]
    pub listen: SocketAddr,
    /// TLS certificate chain (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Worker threads of the item-block pool shared by every backup (round-robin between
    /// backups). More overlap more hooks and snapshot waits; each holds one block's
    /// manifests in memory.
    #[arg(long, value_name = "N", default_value_t = lockgate_server::backups::DEFAULT_WORKERS as u16,
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub item_block_workers: u16,
    /// `/metrics` answers 401 without a valid token (any role). Default off, so that a
    /// Prometheus without a token can scrape; metric labels hold attribute values (such as
    /// repository paths), so turn it on where the port is reachable by others.
    #[arg(long)]
    pub metrics_auth: bool,
    /// A directory non-admin tokens may back up from (repeatable; added to the policy's
    /// `[blocks] input_roots`). A submitter's `--from` must resolve inside one; with none,
    /// only admins may create backups from the server's file system. Must exist.
    #[arg(long, value_name = "DIR")]
    pub backup_input_root: Vec<PathBuf>,
    /// Keep the store in this PostgreSQL database (postgres://user:password@host:port/db)
    /// instead of DATA_DIR/lockgate.db; several servers may share one (docs/postgresql.md).
    /// The database then holds the active policy: --config only seeds an empty database,
    /// and SIGHUP applies the file to it. A secret: prefer the environment variable; it is
    /// never shown with its password.
    #[arg(
        long,
        value_name = "URL",
        env = "LOCKGATE_DATABASE_URL",
        hide_env_values = true
    )]
    pub database_url: Option<String>,
    /// With --database-url: the URL clients reach this replica on; standbys send clients
    /// to the leader's (docs/cluster.md). Default: http://LISTEN.
    #[arg(
        long,
        value_name = "URL",
        env = "LOCKGATE_ADVERTISE_URL",
        requires = "database_url"
    )]
    pub advertise_url: Option<String>,
    /// With --database-url: this replica's id in the database, unique per replica.
    /// Default: hostname:port.
    #[arg(long, value_name = "ID", requires = "database_url")]
    pub replica_id: Option<String>,
    #[command(flatten)]
    pub hardening: Hardening,
}

/// Flags of the server's self-protection (defaults and trade-offs:
/// `lockgate_server::hardening::Hardening`).
#[derive(Debug, clap::Args)]
pub struct Hardening {
    /// Start even though the store is empty, replaced or behind what this data dir
    /// acknowledged (lockgate.watermark). The store is taken as it is; ids continue above
    /// the acknowledged ones; a stale admin.token is moved aside, never overwritten.
    #[arg(long)]
    pub start_fresh: bool,
    /// Refuse new submits (507) below this many free bytes on the data dir's filesystem.
    /// Default: the smaller of 1% of the filesystem and 256 MiB; 0 turns it off.
    #[arg(long, value_name = "BYTES")]
    pub min_free_space: Option<u64>,
    /// Refuse new submits (507) while lockgate.db and its WAL are above this many bytes.
    /// Default: no quota.
    #[arg(long, value_name = "BYTES")]
    pub store_quota: Option<u64>,
    /// Close a connection that has not sent a complete request head (TLS handshake
    /// included) within this long.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = super::flags::duration)]
    pub header_read_timeout: std::time::Duration,
    /// Close a keep-alive connection with no request in flight after this long.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::flags::duration)]
    pub idle_timeout: std::time::Duration,
    /// At most this many open connections; at the cap the oldest ones without a request
    /// are closed first. Default: the fd limit (raised to the hard limit) minus 256.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Close a connection whose answer could not be written for this long (its client
    /// stopped reading); a stream's client resumes with Last-Event-ID.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = super::flags::duration)]
    pub write_stall_timeout: std::time::Duration,
}

impl From<Hardening> for lockgate_server::hardening::Hardening {
    fn from(h: Hardening) -> Self {
        lockgate_server::hardening::Hardening {
            start_fresh: h.start_fresh,
            min_free_space: h.min_free_space,
            store_quota: h.store_quota,
            header_read_timeout: h.header_read_timeout,
            idle_timeout: h.idle_timeout,
            max_connections: h.max_connections,
            write_stall_timeout: h.write_stall_timeout,
        }
    }
}

/// Whether log lines may carry ANSI colours: only on a terminal, and not when `NO_COLOR`
/// is set to anything but the empty string (no-color.org).
pub fn log_colours(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// The logs of `lockgate server` and `lockgate agent`: to stderr, filtered by
/// `LOCKGATE_LOG` (default `info`), coloured only as [`log_colours`] allows, so a log
/// written to a file or a journal carries no escape codes.
pub fn init_logs() {
    use std::io::IsTerminal;
    let colours = log_colours(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colours)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LOCKGATE_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .try_init();
}

/// Runs the server until SIGTERM or SIGINT.
pub fn run(_global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    init_logs();
    let data_dir = args
        .data_dir
        .unwrap_or_else(lockgate_host::data_dir::default_data_dir);
    let tls = args.tls_cert.is_some();
    let config = lockgate_server::Config {
        data_dir: data_dir.clone(),
        listen: args.listen,
        policy_file: args.config,
        tls: args.tls_cert.zip(args.tls_key),
        hardening: args.hardening.into(),
        backup_input_roots: args.backup_input_root,
        database_url: args.database_url,
    };
    let store = config.store_location();
    let replica = lockgate_server::replica::Options {
        advertise_url: args.advertise_url,
        replica_id: args.replica_id,
    };
    let mut server = lockgate_server::Server::open_replica(config, replica)
        .context("lockgate server cannot start")?;
    server.set_item_block_workers(usize::from(args.item_block_workers));
    server.set_metrics_auth(args.metrics_auth);
    if server.new_admin_token().is_some() {
        eprintln!(
            "lockgate: wrote a new admin token to {}",
            data_dir
                .join(lockgate_host::data_dir::ADMIN_TOKEN_FILE)
                .display()
        );
    }
    // Shown with its password replaced (`postgres://user:***@host/db`).
    let database = if store.is_postgres() {
        format!(", database {store}")
    } else {
        String::new()
    };
    eprintln!(
        "lockgate: listening on {} ({}data dir {}{database})",
        server.local_addr(),
        if tls { "TLS, " } else { "" },
        data_dir.display()
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(server.run(lockgate_server::shutdown_signal()))?;
    eprintln!("lockgate: stopped");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::log_colours;
    use std::ffi::OsStr;

    #[test]
    fn colours_only_on_a_terminal_and_never_with_no_color() {
        assert!(log_colours(true, None));
        assert!(
            log_colours(true, Some(OsStr::new(""))),
            "an empty NO_COLOR is unset"
        );
        assert!(!log_colours(true, Some(OsStr::new("1"))));
        assert!(!log_colours(false, None));
    }
}
