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
}

/// Runs the server until SIGTERM or SIGINT.
pub fn run(_global: &GlobalArgs, args: Args) -> anyhow::Result<ExitCode> {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LOCKGATE_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .try_init();
    let data_dir = args
        .data_dir
        .unwrap_or_else(lockgate_server::default_data_dir);
    let config = lockgate_server::Config {
        data_dir: data_dir.clone(),
        listen: args.listen,
        policy_file: args.config,
        tls: args.tls_cert.zip(args.tls_key),
    };
    let mut server =
        lockgate_server::Server::open(config).context("lockgate server cannot start")?;
    server.set_item_block_workers(usize::from(args.item_block_workers));
    server.set_metrics_auth(args.metrics_auth);
    if server.new_admin_token().is_some() {
        eprintln!(
            "lockgate: wrote a new admin token to {}",
            data_dir.join("admin.token").display()
        );
    }
    eprintln!(
        "lockgate: listening on {} (data dir {})",
        server.local_addr(),
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
