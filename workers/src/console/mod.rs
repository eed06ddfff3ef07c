//! The operator's console: a web page over a deployment's queues and store
//! (`tablekit-worker console --broker … --store …`).
//!
//! - **Queues**: waiting, leased and poison messages of each queue (the index and archive
//!   queues and the change queues the registered types declare), refreshed in place every
//!   few seconds, with the change per second since the last look.
//! - **Poison**: per queue, each message's reason, delivery count, operation kind and id,
//!   when it was poisoned and its body (JSON pretty-printed, long bodies folded); replay or
//!   discard one message, the selected ones, or all (after a confirmation naming the count).
//! - **Relay backlog**: entries and partitions pending, the oldest entry's age, the tables.
//! - **Audits and jobs**: the last audit of each table; audit, repair and index backfill as
//!   background jobs with a progress bar, kept in the store and taken up again after a
//!   restart ([`jobs`]).
//!
//! Server-rendered HTML (maud templates, which escape every value) and one small script
//! for the refresh; no build chain.
//!
//! Access: on loopback by default (answering loopback host names only); any other
//! address needs a token (at least [`MIN_TOKEN_BITS`] bits, [`MIN_TOKEN_DISTINCT`]
//! different characters, no whitespace or control characters), compared first, in
//! constant time, on every request, or a session cookie from the sign-in form; an
//! optional viewer token reads without acting. A right token is answered at once whatever
//! its address; wrong ones wait their turn, per client address and in all.
//! Every action is a POST carrying the console's CSRF token from a page of the console
//! itself; GET changes nothing; each action form acts once.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use maud::Markup;
use tablekit_core::AnyStore;
use tablekit_core::blob::BlobStore;
use tablekit_core::error::ErrorKind;

use crate::error::{Error, Result};
use crate::queue::AnyQueue;
use crate::queue::poison_table::WithPoisonTable;
use crate::status::{QueueStatus, Status};

mod access;
mod activity;
mod api;
mod chart;
mod feeds;
mod forms;
mod forwarded;
mod guard;
pub mod jobs;
mod metrics;
mod pages;
mod poison;
mod queues;
pub mod records;
mod secret;
mod security_log;
mod session;
mod signin;
mod throttle;
mod view;
mod waiting;

use access::Access;
pub(crate) use access::{Client, Refusal, Role};
pub use access::{MAKE_A_TOKEN, MIN_TOKEN_BITS, MIN_TOKEN_DISTINCT, token_bits};
use jobs::{Job, Jobs};

/// The console's address when none is given.
pub const DEFAULT_BIND: &str = "127.0.0.1:9465";

/// The most poison messages one page lists.
pub const MAX_LISTED: usize = poison::MAX_PAGE;

/// How the console runs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConsoleOptions {
    /// Where it listens (default [`DEFAULT_BIND`]).
    pub bind: SocketAddr,
    /// The token every request must carry; required off loopback. At least
    /// [`MIN_TOKEN_BITS`] bits ([`token_bits`]), [`MIN_TOKEN_DISTINCT`] different
    /// characters, and no whitespace or control characters: [`MAKE_A_TOKEN`].
    pub token: Option<String>,
    /// A second token, for reading only: a request signed in with it sees every page and
    /// may not act. The same rules as [`ConsoleOptions::token`], and different from it;
    /// only with a token.
    pub viewer_token: Option<String>,
    /// Whether the console is reached through HTTPS (a proxy that ends TLS): the sign-in
    /// cookie is then marked `Secure`.
    pub behind_tls: bool,
    /// The proxies whose forwarding headers (`Forwarded`, `X-Forwarded-For`) name the
    /// client for the logs and the actions' records; a request from any
    /// other address is its own client, whatever it claims. Tokens are compared before
    /// any address is looked at: a right one is answered at once, proxy or not.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The queues shown; by default `index`, `archive`, the change queues the registered
    /// types declare, the queues the backend lists as declared (SQLite, Azure; up to 50)
    /// and those the workers recorded history for.
    pub queues: Vec<String>,
    /// Seconds between two refreshes of the page.
    pub refresh: u64,
    /// The blob store of blob-stored index entities (for audits and backfills).
    pub blobs: Option<BlobStore>,
    /// The entity types the console can migrate (those the worker binary registers).
    pub migrations: crate::migrate::Migrations,
    /// The workers' metrics endpoints (`http://HOST:PORT/metrics`), for convergence: the
    /// copy lag of each index and the hot partitions.
    pub metrics: Vec<String>,
    /// The action log: a file the console appends one JSON-lines record to for every
    /// message an action touches (see [`records`]); without one, those records go to the
    /// log under the target [`records::ACTIONS_TARGET`].
    pub action_log: Option<std::path::PathBuf>,
    /// How long a queue may hold messages that no consumer takes before the overview warns
    /// (default [`UNCONSUMED_AFTER`](crate::status::UNCONSUMED_AFTER); see
    /// [`unconsumed`](crate::status::unconsumed)). A broker that counts consumers
    /// (RabbitMQ) is judged from when the console first saw it count none.
    pub unconsumed_after: Duration,
}

impl Default for ConsoleOptions {
    fn default() -> Self {
        ConsoleOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 9465)),
            token: None,
            viewer_token: None,
            behind_tls: false,
            trusted_proxies: Vec::new(),
            queues: Vec::new(),
            refresh: 3,
            blobs: None,
            migrations: crate::migrate::Migrations::new(),
            metrics: Vec::new(),
            action_log: None,
            unconsumed_after: crate::status::UNCONSUMED_AFTER,
        }
    }
}

impl ConsoleOptions {
    /// The options for `bind` and `token`, the rest by default.
    pub fn new(bind: SocketAddr, token: Option<String>) -> Self {
        ConsoleOptions {
            bind,
            token,
            ..ConsoleOptions::default()
        }
    }
}

/// One queue's row: its counts and their change per second since the last look.
pub(crate) struct QueueRow {
    status: QueueStatus,
    waiting_rate: Option<f64>,
    poisoned_rate: Option<f64>,
    /// Whether its consumers are paused (`None`: unknown).
    paused: Option<bool>,
}

/// What the overview shows.
pub(crate) struct Overview {
    at: DateTime<Utc>,
    status: Status,
    queues: Vec<QueueRow>,
    /// The queues whose messages no consumer takes.
    unconsumed: Vec<crate::status::Unconsumed>,
    /// Each registered table, with the indexes and index entities it declares.
    tables: Vec<(String, Vec<String>)>,
    /// The types the console can migrate: (table, kind, current version).
    migrations: Vec<(String, String, u32)>,
    /// What the workers' metrics say, when the console reads them.
    convergence: Option<metrics::Convergence>,
    jobs: Vec<Job>,
    /// The worker processes, as their heartbeats tell.
    workers: Vec<crate::activity::WorkerProcess>,
}

pub(in crate::console) struct Console {
    store: AnyStore,
    /// The broker, its poison messages read from and acted on in the store's poison table.
    broker: WithPoisonTable<AnyQueue>,
    options: ConsoleOptions,
    access: Access,
    nonces: forms::Nonces,
    /// Where the actions are recorded.
    records: records::Records,
    /// The sets bulk actions are bound to, waiting for their confirmation.
    sets: poison::sets::Sets,
    jobs: Jobs,
    /// The last counts of each queue: (when, waiting, poisoned).
    samples: Mutex<HashMap<String, (Instant, u64, u64)>>,
    /// Since when the broker has counted no consumer of each queue holding messages, as
    /// this console first saw it (RabbitMQ).
    consumers: Mutex<crate::status::ConsumerWatch>,
}

type Shared = Arc<Console>;

/// A console bound to its address, ready to serve.
pub struct BoundConsole {
    listener: tokio::net::TcpListener,
    console: Shared,
}

impl std::fmt::Debug for BoundConsole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundConsole")
            .field("address", &self.listener.local_addr().ok())
            .finish()
    }
}

/// Binds the console over `store` and `broker`.
///
/// # Errors
/// [`Error::Config`] when the address is not loopback and there is no token, when a
/// token is weak (see [`ConsoleOptions::token`]), when the viewer token is given without
/// a token or equals it, or when the address cannot be bound.
pub async fn bind(
    store: AnyStore,
    broker: AnyQueue,
    options: ConsoleOptions,
) -> Result<BoundConsole> {
    let access = Access::new(&options)?;
    let listener = tokio::net::TcpListener::bind(options.bind)
        .await
        .map_err(|e| {
            Error::Config(format!(
                "the console cannot listen on {}: {e}",
                options.bind
            ))
        })?;
    let records = records::Records::new(store.clone(), options.action_log.clone());
    let jobs = Jobs::new(
        store.clone(),
        options.blobs.clone(),
        options.migrations.clone(),
    );
    Ok(BoundConsole {
        listener,
        console: Arc::new(Console {
            broker: WithPoisonTable::for_store(broker, &store),
            store,
            options,
            access,
            nonces: forms::Nonces::default(),
            records,
            sets: poison::sets::Sets::default(),
            jobs,
            samples: Mutex::default(),
            consumers: Mutex::default(),
        }),
    })
}

impl BoundConsole {
    /// The address it listens on (the port the system chose for port 0).
    ///
    /// # Errors
    /// [`Error::Config`] if the socket cannot tell.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.listener
            .local_addr()
            .map_err(|e| Error::Config(format!("the console's address: {e}")))
    }

    /// Serves until `shutdown` completes; takes up the jobs a stopped console left
    /// running, at once and every 10 s, and forgets worker records past their time every
    /// minute.
    ///
    /// # Errors
    /// [`Error::Config`] when the server fails.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let console = self.console;
        let jobs = console.jobs.clone();
        let store = console.store.clone();
        let take_up = tokio::spawn(async move {
            let mut round = 0u64;
            loop {
                if let Err(e) = jobs.take_up_stale().await {
                    tracing::warn!(error = %e, "looking for jobs left running failed");
                }
                // Worker records past their time go even when no worker runs.
                if round.is_multiple_of(6)
                    && let Err(e) = crate::activity::forget_workers(&store, Utc::now()).await
                {
                    tracing::debug!(error = %e, "forgetting old worker records failed");
                }
                round += 1;
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
        });
        let app = router(console);
        let served = axum::serve(
            self.listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| Error::Config(format!("the console stopped: {e}")));
        take_up.abort();
        served
    }
}

fn router(console: Shared) -> Router {
    Router::new()
        .route("/", get(pages::overview))
        .route("/live", get(pages::live))
        .route("/jobs", post(pages::start_job))
        .route("/queues/{queue}", post(pages::pause_queue))
        .route("/poison/{queue}", get(poison::page).post(poison::action))
        .route("/poison/{queue}/body/{handle}", get(poison::body))
        .route("/poison/{queue}/message/{handle}", get(poison::message))
        .route("/poison/{queue}/reasons", get(poison::reasons))
        .route(
            "/poison/{queue}/confirm/{token}",
            get(poison::confirm_page).post(poison::confirmed),
        )
        .route(
            "/poison/{queue}/confirm/{token}/export",
            get(poison::export),
        )
        .route("/actions", get(pages::actions))
        .route("/workers", get(activity::workers_page))
        .route("/feeds", get(feeds::list))
        .route("/feeds/{table}/{group}", get(feeds::group))
        .route(
            "/queues/{queue}/waiting",
            get(waiting::page).post(waiting::actions::act),
        )
        .nest("/api", api::router())
        .route("/login", get(signin::login_page).post(signin::login))
        .route("/logout", post(signin::logout))
        .route("/assets/console.css", get(pages::css))
        .route("/assets/console.js", get(pages::js))
        .fallback(no_such_page)
        .layer(middleware::from_fn_with_state(
            console.clone(),
            guard::guard,
        ))
        // Outside the guard, so that refusals carry them too: an `x-request-id` on every
        // answer (the client's own, or a new UUID), and gzip for clients that accept it.
        // No timeout layer: an action cut off halfway would leave the operator told
        // nothing of what it did; reads are bounded by their pages.
        .layer(tower_http::compression::CompressionLayer::new())
        .layer(tower_http::request_id::PropagateRequestIdLayer::x_request_id())
        .layer(tower_http::request_id::SetRequestIdLayer::x_request_id(
            tower_http::request_id::MakeRequestUuid,
        ))
        .with_state(console)
}

/// A path no route takes: under `/api` a problem (JSON), else a page.
async fn no_such_page(uri: axum::http::Uri) -> Response {
    if uri.path() == "/api" || uri.path().starts_with("/api/") {
        return api::not_found().await;
    }
    html(
        StatusCode::NOT_FOUND,
        view::page(
            "Not found",
            None,
            view::problem("No such page: the overview is at /."),
        ),
    )
}

fn html(status: StatusCode, markup: Markup) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

/// The page of a request that failed, with the status its error's kind calls for.
fn failure(e: &Error) -> Response {
    html(
        failure_status(e.kind()),
        view::page("Not done", None, view::problem(&e.to_string())),
    )
}

/// The status of a failure: the request's fault (`400`, `404`, `409`), the store or
/// broker being unavailable for now (`503`), or anything else (`500`).
fn failure_status(kind: ErrorKind) -> StatusCode {
    match kind {
        ErrorKind::InvalidInput | ErrorKind::TooLarge => StatusCode::BAD_REQUEST,
        ErrorKind::NotFound | ErrorKind::TableNotFound => StatusCode::NOT_FOUND,
        ErrorKind::PermissionDenied => StatusCode::FORBIDDEN,
        ErrorKind::AlreadyExists
        | ErrorKind::TableAlreadyExists
        | ErrorKind::PreconditionFailed => StatusCode::CONFLICT,
        ErrorKind::Transient | ErrorKind::TableBeingDeleted => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_answers_by_its_kind() {
        let bad_name = crate::queue::check_queue_name("amq.bad").expect_err("a reserved name");
        assert_eq!(failure_status(bad_name.kind()), StatusCode::BAD_REQUEST);
        assert_eq!(failure_status(ErrorKind::NotFound), StatusCode::NOT_FOUND);
        assert_eq!(
            failure_status(ErrorKind::PreconditionFailed),
            StatusCode::CONFLICT
        );
        assert_eq!(
            failure_status(ErrorKind::Transient),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            failure_status(ErrorKind::Backend),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
