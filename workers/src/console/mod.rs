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
//! address needs a token (at least [`MIN_TOKEN_LEN`] characters), checked in constant time
//! on every request. Every action is a POST carrying the console's CSRF token from a page
//! of the console itself; GET changes nothing; each action form acts once.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query as UrlQuery, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use maud::Markup;
use tablekit_core::AnyStore;
use tablekit_core::blob::BlobStore;

use crate::error::{Error, Result};
use crate::queue::{AnyQueue, PoisonMessage};
use crate::status::{QueueStatus, Status};

mod access;
pub mod jobs;
mod metrics;
mod poison;
mod view;

pub use access::MIN_TOKEN_LEN;
use access::{Access, COOKIE, Once};
use jobs::{Job, JobKind, Jobs};

/// The console's address when none is given.
pub const DEFAULT_BIND: &str = "127.0.0.1:9465";

/// The most poison messages one page lists.
pub const MAX_LISTED: usize = 500;

/// How the console runs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConsoleOptions {
    /// Where it listens (default [`DEFAULT_BIND`]).
    pub bind: SocketAddr,
    /// The token every request must carry; required off loopback.
    pub token: Option<String>,
    /// The queues shown; by default `index`, `archive` and the change queues the
    /// registered types declare.
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
}

impl Default for ConsoleOptions {
    fn default() -> Self {
        ConsoleOptions {
            bind: SocketAddr::from(([127, 0, 0, 1], 9465)),
            token: None,
            queues: Vec::new(),
            refresh: 3,
            blobs: None,
            migrations: crate::migrate::Migrations::new(),
            metrics: Vec::new(),
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
}

/// What the overview shows.
pub(crate) struct Overview {
    at: DateTime<Utc>,
    status: Status,
    queues: Vec<QueueRow>,
    /// Each registered table, with the indexes and index entities it declares.
    tables: Vec<(String, Vec<String>)>,
    /// The types the console can migrate: (table, kind, current version).
    migrations: Vec<(String, String, u32)>,
    /// What the workers' metrics say, when the console reads them.
    convergence: Option<metrics::Convergence>,
    jobs: Vec<Job>,
}

/// What the poison page shows.
pub(crate) struct PoisonView {
    queue: String,
    total: u64,
    messages: Vec<PoisonMessage>,
}

struct Console {
    store: AnyStore,
    broker: AnyQueue,
    options: ConsoleOptions,
    access: Access,
    jobs: Jobs,
    /// The last counts of each queue: (when, waiting, poisoned).
    samples: Mutex<HashMap<String, (Instant, u64, u64)>>,
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
/// [`Error::Config`] when the address is not loopback and there is no token (or it is
/// shorter than [`MIN_TOKEN_LEN`]), or the address cannot be bound.
pub async fn bind(
    store: AnyStore,
    broker: AnyQueue,
    options: ConsoleOptions,
) -> Result<BoundConsole> {
    let access = Access::new(options.bind, options.token.clone())?;
    let listener = tokio::net::TcpListener::bind(options.bind)
        .await
        .map_err(|e| {
            Error::Config(format!(
                "the console cannot listen on {}: {e}",
                options.bind
            ))
        })?;
    let jobs = Jobs::new(
        store.clone(),
        options.blobs.clone(),
        options.migrations.clone(),
    );
    Ok(BoundConsole {
        listener,
        console: Arc::new(Console {
            store,
            broker,
            options,
            access,
            jobs,
            samples: Mutex::default(),
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
    /// running, at once and every 10 s.
    ///
    /// # Errors
    /// [`Error::Config`] when the server fails.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let console = self.console;
        let jobs = console.jobs.clone();
        let take_up = tokio::spawn(async move {
            loop {
                if let Err(e) = jobs.take_up_stale().await {
                    tracing::warn!(error = %e, "looking for jobs left running failed");
                }
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
        });
        let app = router(console);
        let served = axum::serve(self.listener, app)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|e| Error::Config(format!("the console stopped: {e}")));
        take_up.abort();
        served
    }
}

fn router(console: Shared) -> Router {
    Router::new()
        .route("/", get(overview))
        .route("/live", get(live))
        .route("/jobs", axum::routing::post(start_job))
        .route("/poison/{queue}", get(poison::page).post(poison::action))
        .route("/login", get(login_page).post(login))
        .route("/assets/console.css", get(css))
        .route("/assets/console.js", get(js))
        .layer(middleware::from_fn_with_state(console.clone(), guard))
        .with_state(console)
}

/// Every response's security headers; the token (or loopback host) and, for a POST, the
/// origin, checked before any handler runs.
async fn guard(State(console): State<Shared>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let is_post = request.method() == axum::http::Method::POST;
    let mut response = if is_post && !Access::same_origin(request.headers()) {
        (StatusCode::FORBIDDEN, "a form of another site").into_response()
    } else if path == "/login" || path.starts_with("/assets/") {
        if console.access.needs_token() || path.starts_with("/assets/") {
            next.run(request).await
        } else {
            Redirect::to("/").into_response()
        }
    } else if console.access.admits(request.headers()) {
        next.run(request).await
    } else if console.access.needs_token() && !is_post {
        Redirect::to("/login").into_response()
    } else {
        (
            StatusCode::FORBIDDEN,
            "the console answers requests that carry its token, or name a loopback host",
        )
            .into_response()
    };
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        // `same-origin`: a form POST then carries its true `Origin` (with `no-referrer`,
        // browsers send `Origin: null`, which the origin check refuses).
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn html(status: StatusCode, markup: Markup) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        markup.into_string(),
    )
        .into_response()
}

fn failure(e: &Error) -> Response {
    html(
        StatusCode::SERVICE_UNAVAILABLE,
        view::page("Not done", None, view::problem(&e.to_string())),
    )
}

#[derive(serde::Deserialize)]
struct ResultQuery {
    result: Option<String>,
    limit: Option<usize>,
}

impl Console {
    async fn overview(&self) -> Result<Overview> {
        // The registry read once: the default queues and the job forms both come from it.
        let schemas = tablekit_patterns::index::SchemaRecord::list(&self.store, None).await?;
        let queues = if self.options.queues.is_empty() {
            crate::status::default_queues(&schemas)
        } else {
            self.options.queues.clone()
        };
        let status = crate::status::status(&self.store, &self.broker, &queues).await?;
        let now = Instant::now();
        let queues = {
            let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
            status
                .queues
                .iter()
                .map(|q| {
                    let (mut waiting_rate, mut poisoned_rate) = (None, None);
                    if let (Some(waiting), Some(poisoned)) = (q.waiting, q.poisoned) {
                        if let Some((then, w, p)) = samples.get(&q.queue) {
                            let secs = now.duration_since(*then).as_secs_f64();
                            if secs >= 0.5 {
                                waiting_rate = Some((waiting as f64 - *w as f64) / secs);
                                poisoned_rate = Some((poisoned as f64 - *p as f64) / secs);
                            }
                        }
                        let stale = samples.get(&q.queue).is_none_or(|(then, _, _)| {
                            now.duration_since(*then).as_secs_f64() >= 0.5
                        });
                        if stale {
                            samples.insert(q.queue.clone(), (now, waiting, poisoned));
                        }
                    }
                    QueueRow {
                        status: q.clone(),
                        waiting_rate,
                        poisoned_rate,
                    }
                })
                .collect()
        };
        let mut tables: Vec<(String, Vec<String>)> = Vec::new();
        for schema in schemas {
            let names = schema
                .indexes
                .iter()
                .map(|i| i.name.clone())
                .chain(schema.members.iter().map(|m| m.name.clone()));
            match tables.iter_mut().find(|(t, _)| *t == schema.table) {
                Some((_, indexes)) => indexes.extend(names),
                None => tables.push((schema.table.clone(), names.collect())),
            }
        }
        Ok(Overview {
            at: Utc::now(),
            status,
            queues,
            tables,
            migrations: self
                .jobs
                .migrations()
                .list()
                .into_iter()
                .map(|m| (m.table, m.kind, m.version))
                .collect(),
            jobs: self.jobs.list().await?,
            convergence: if self.options.metrics.is_empty() {
                None
            } else {
                Some(metrics::read(&self.options.metrics).await)
            },
        })
    }

    /// The result of an action, by its nonce, for the banner.
    fn result(&self, nonce: Option<&str>) -> Option<String> {
        nonce.and_then(|n| self.access.result(n))
    }
}

async fn overview(
    State(console): State<Shared>,
    UrlQuery(query): UrlQuery<ResultQuery>,
) -> Response {
    match console.overview().await {
        Ok(o) => {
            let result = console.result(query.result.as_deref());
            html(
                StatusCode::OK,
                view::page(
                    "Overview",
                    Some(console.options.refresh.max(1)),
                    view::overview(
                        &o,
                        console.access.csrf(),
                        &Access::nonce(),
                        result.as_deref(),
                    ),
                ),
            )
        }
        Err(e) => failure(&e),
    }
}

async fn live(State(console): State<Shared>) -> Response {
    match console.overview().await {
        Ok(o) => html(
            StatusCode::OK,
            view::live(&o, console.access.csrf(), &Access::nonce()),
        ),
        Err(e) => failure(&e),
    }
}

/// A form body's fields, repeated names kept (the selected ids).
struct Form(Vec<(String, String)>);

impl Form {
    fn parse(body: &[u8]) -> Self {
        Form(
            form_urlencoded::parse(body)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// What a form's CSRF token and nonce allow.
enum Admit {
    /// The action runs, under this nonce (not yet claimed).
    Act(String),
    /// The nonce already acted (a double click, a reload): show its result.
    Done(String),
    /// The form is refused with this page.
    Refused(Box<Response>),
}

fn admit_action(console: &Console, form: &Form) -> Admit {
    if !console.access.csrf_matches(form.get("csrf")) {
        return Admit::Refused(Box::new(html(
            StatusCode::FORBIDDEN,
            view::page(
                "Refused",
                None,
                view::problem(
                    "This form is not one this console rendered (its CSRF token is missing or stale): reload the page and try again.",
                ),
            ),
        )));
    }
    let Some(nonce) = form
        .get("nonce")
        .filter(|n| n.len() == 32 && n.bytes().all(|b| b.is_ascii_hexdigit()))
    else {
        return Admit::Refused(Box::new(html(
            StatusCode::BAD_REQUEST,
            view::page(
                "Refused",
                None,
                view::problem("The form has no action nonce."),
            ),
        )));
    };
    match console.access.once(nonce) {
        Once::Done => Admit::Done(nonce.to_owned()),
        Once::First => Admit::Act(nonce.to_owned()),
    }
}

async fn start_job(State(console): State<Shared>, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let nonce = match admit_action(&console, &form) {
        Admit::Refused(response) => return *response,
        Admit::Done(nonce) => return Redirect::to(&format!("/?result={nonce}")).into_response(),
        Admit::Act(nonce) => nonce,
    };
    let (Some(kind), Some(table)) = (
        form.get("kind").and_then(JobKind::parse),
        form.get("table").or(form.get("type")),
    ) else {
        return html(
            StatusCode::BAD_REQUEST,
            view::page(
                "Refused",
                None,
                view::problem("A job names its kind and table."),
            ),
        );
    };
    if !console.access.claim(&nonce) {
        return Redirect::to(&format!("/?result={nonce}")).into_response();
    }
    // A migration names `table:kind` in one field; a backfill names its index.
    let (table, target) = match (kind, form.get("type")) {
        (JobKind::Migrate, Some(chosen)) => match chosen.split_once(':') {
            Some((table, entity_kind)) => (table, Some(entity_kind.to_owned())),
            None => (chosen, None),
        },
        _ => (
            table,
            form.get("index")
                .filter(|i| !i.is_empty())
                .map(str::to_owned),
        ),
    };
    let result = match console.jobs.start(kind, table, target).await {
        Ok(job) => format!(
            "Started: {}{} of {}.",
            kind.name(),
            job.index
                .as_deref()
                .or(job.entity_kind.as_deref())
                .map(|i| format!(" of {i}"))
                .unwrap_or_default(),
            job.table
        ),
        Err(e) => format!("The job did not start: {e}"),
    };
    console.access.finish(&nonce, result);
    Redirect::to(&format!("/?result={nonce}")).into_response()
}

#[derive(serde::Deserialize)]
struct LoginQuery {
    failed: Option<String>,
}

async fn login_page(UrlQuery(query): UrlQuery<LoginQuery>) -> Response {
    html(
        StatusCode::OK,
        view::page("Sign in", None, view::login(query.failed.is_some())),
    )
}

async fn login(State(console): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let _ = headers;
    let form = Form::parse(&body);
    match form.get("token") {
        Some(token) if console.access.token_matches(token) => {
            let cookie = format!(
                "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                form_urlencoded::byte_serialize(token.as_bytes()).collect::<String>()
            );
            let mut response = Redirect::to("/").into_response();
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        _ => {
            // A second per wrong guess.
            tokio::time::sleep(Duration::from_secs(1)).await;
            Redirect::to("/login?failed=1").into_response()
        }
    }
}

async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("console.css"),
    )
        .into_response()
}

async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("console.js"),
    )
        .into_response()
}
