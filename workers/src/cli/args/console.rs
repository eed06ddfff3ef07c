//! Options of `console`, and the proxies it trusts (also `run --console-trusted-proxy`).

use std::net::SocketAddr;

use clap::Args;

use super::UNCONSUMED_AFTER_SECS;

/// Options of `console`.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    /// The broker: `amqp://user:password@host:port/vhost` (RabbitMQ), `sqlite:PATH` (the
    /// embedded queue file) or `azure:CONNECTION-STRING` (Azure Queue Storage, feature
    /// `azure`).
    #[arg(long, env = "TABLEKIT_BROKER")]
    pub broker: String,
    /// The table store: `sqlite:PATH` (a SQLite file), `azure:CONNECTION-STRING` (Azure
    /// Table Storage or Azurite, feature `azure`) or `memory:` (this process only).
    #[arg(long, env = "TABLEKIT_STORE")]
    pub store: String,
    /// Where the console listens. Any address but loopback needs `--token`.
    #[arg(long, env = "TABLEKIT_CONSOLE_BIND", default_value = crate::console::DEFAULT_BIND)]
    pub bind: SocketAddr,
    /// The token every request must carry (at least 128 bits — 32 hex digits or 22
    /// base64 characters — 8 different characters, no whitespace: `openssl rand -hex 32`;
    /// the browser signs in with it once). Required off loopback. Prefer the environment
    /// variable: a flag shows in the process list.
    #[arg(long, env = "TABLEKIT_CONSOLE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A second token, for reading only: signed in with it, a browser sees every page
    /// and may not act (the same rules as `--token`, and different from it; only with
    /// `--token`). Prefer the environment variable.
    #[arg(long, env = "TABLEKIT_CONSOLE_VIEWER_TOKEN", hide_env_values = true)]
    pub viewer_token: Option<String>,
    /// The console is reached through HTTPS (a proxy that ends TLS): the sign-in cookie
    /// is marked `Secure`.
    #[arg(long, env = "TABLEKIT_CONSOLE_BEHIND_TLS")]
    pub behind_tls: bool,
    /// A proxy in front of the console (a CIDR, or one address; repeatable, or
    /// comma-separated in the variable): requests from it name their client in
    /// `Forwarded` or `X-Forwarded-For`, which the logs and the actions' records then
    /// show. Any other request is its own client, whatever its headers claim.
    #[arg(long = "trusted-proxy", env = "TABLEKIT_CONSOLE_TRUSTED_PROXY", value_delimiter = ',', value_parser = parse_cidr)]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The action log: a file the console appends one JSON line to for every message an
    /// action touches (without it, those lines go to the log, target
    /// `tablekit::console::actions`).
    #[arg(long, env = "TABLEKIT_CONSOLE_ACTION_LOG")]
    pub action_log: Option<std::path::PathBuf>,
    /// A queue to show (repeatable); by default `index`, `archive` and the change queues
    /// the registered types declare.
    #[arg(long = "queue")]
    pub queues: Vec<String>,
    /// A worker's metrics endpoint (`http://HOST:PORT/metrics`, as `run --metrics-addr`
    /// serves it; repeatable, or comma-separated in the variable): the page shows each
    /// index's copy lag and the hot partitions.
    #[arg(
        long = "metrics",
        env = "TABLEKIT_CONSOLE_METRICS",
        value_delimiter = ','
    )]
    pub metrics: Vec<String>,
    /// Seconds between two refreshes of the page.
    #[arg(long, env = "TABLEKIT_CONSOLE_REFRESH", default_value_t = 3,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub refresh: u64,
    /// The blob store of blob-stored index entities (for audits and backfills): `file:DIR`
    /// (a folder) or `azure:CONNECTION-STRING;Container=NAME` (feature `azure`).
    #[arg(long, env = "TABLEKIT_BLOBS")]
    pub blobs: Option<String>,
    /// Seconds a queue may hold messages that no consumer takes before the page warns
    /// (RabbitMQ: seconds the broker has counted no consumer attached, since the console
    /// first saw none).
    #[arg(long, env = "TABLEKIT_UNCONSUMED_AFTER", default_value_t = UNCONSUMED_AFTER_SECS)]
    pub unconsumed_after: u64,
}

/// A CIDR (`10.0.0.0/8`, `2001:db8::/32`) or one address (`10.0.0.5`, a `/32` or `/128`).
pub(super) fn parse_cidr(text: &str) -> std::result::Result<ipnet::IpNet, String> {
    let text = text.trim();
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("`{text}` is not a CIDR (`10.0.0.0/8`) or an address (`10.0.0.5`)"))
}
