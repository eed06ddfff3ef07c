//! The console's pages, as maud templates: every value from a queue or a table (bodies,
//! reasons, ids, keys, table and queue names) is inserted as text and escaped by maud;
//! nothing is inserted raw. The pages load one stylesheet and one script of the console's
//! own (the `Content-Security-Policy` allows no inline script).

use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

use super::Role;
use super::jobs::{Job, JobKind, JobState};
use super::{Overview, QueueRow};
use crate::activity::WorkerProcess;
use crate::display::neutral;

/// The action a job form's nonce is issued for (its target is chosen in the form).
pub(super) const JOB_FORM: &str = "job";
/// The action of the migration form.
pub(super) const MIGRATE_FORM: &str = "migrate";
/// The action of the form that clears finished jobs.
pub(super) const CLEAR_FORM: &str = "clear-jobs";
/// The action of a repair's confirmation (its target the table).
pub(super) const REPAIR_FORM: &str = "repair";

/// What issues the nonce an action button carries, bound to the action it does and its
/// target (the console's nonces, which its forms check): every page with buttons takes one.
pub(super) trait IssueNonce {
    /// A fresh nonce for a form doing `action` on `target`.
    fn issue(&self, action: &str, target: &str) -> String;
}

/// What an action did, for the banner: a success, or a failure shown as one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Outcome {
    pub(super) text: String,
    pub(super) failed: bool,
}

impl Outcome {
    pub(super) fn done(text: impl Into<String>) -> Self {
        Outcome {
            text: text.into(),
            failed: false,
        }
    }

    pub(super) fn failed(text: impl Into<String>) -> Self {
        Outcome {
            text: text.into(),
            failed: true,
        }
    }
}

/// Who is looking, for the frame of a page: the role, and whether they signed in (then the
/// frame offers to sign out, a form carrying the CSRF token).
#[derive(Clone, Debug)]
pub(crate) struct Viewer {
    pub(crate) role: Role,
    /// The CSRF token, when the console has tokens (a sign-out form is shown).
    pub(crate) sign_out: Option<String>,
}

tokio::task_local! {
    /// Who the request being answered is from: set by the guard around each handler.
    pub(crate) static VIEWER: Viewer;
}

/// The role of the request being answered (an operator outside a request: the guard
/// refuses every action of a viewer whatever a page shows).
pub(super) fn role() -> Role {
    VIEWER.try_with(|v| v.role).unwrap_or(Role::Operator)
}

/// Whether the page being rendered offers actions.
pub(super) fn may_act() -> bool {
    role().may_act()
}

/// The frame of every page: the role shown, and a sign-out when signed in.
pub(super) fn page(title: &str, refresh: Option<u64>, body: Markup) -> Markup {
    let viewer = VIEWER.try_with(Clone::clone).ok();
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · tablekit console" }
                link rel="stylesheet" href="/assets/console.css";
                script src="/assets/console.js" defer {}
            }
            body data-refresh=[refresh] {
                header.top {
                    a.brand href="/" { "tablekit" span { "console" } }
                    nav {
                        a href="/" { "Overview" }
                        a href="/workers" { "Workers" }
                        a href="/feeds" { "Feeds" }
                        a href="/actions" { "Actions" }
                    }
                    @if let Some(viewer) = &viewer {
                        span.role { "signed in as " strong { (viewer.role.name()) } }
                        @if let Some(csrf) = &viewer.sign_out {
                            form.signout method="post" action="/logout" {
                                input type="hidden" name="csrf" value=(csrf);
                                button.quiet { "Sign out" }
                            }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// A banner with the result of an action.
pub(super) fn banner(result: Option<&Outcome>) -> Markup {
    html! {
        @if let Some(result) = result {
            @if result.failed {
                div.banner.failed role="alert" { (neutral(&result.text)) }
            } @else {
                div.banner role="status" { (neutral(&result.text)) }
            }
        }
    }
}

fn count(n: Option<u64>) -> Markup {
    html! {
        @match n {
            Some(n) => (thousands(n)),
            None => span.muted { "–" },
        }
    }
}

/// `12,345`.
pub(super) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn rate(r: Option<f64>) -> Markup {
    html! {
        @match r {
            Some(r) if r.abs() >= 0.05 => span class=(if r > 0.0 { "rate up" } else { "rate down" }) {
                (format!("{:+.1}/s", r))
            },
            Some(_) => span.rate { "±0/s" },
            None => span.muted { "–" },
        }
    }
}

/// A duration in seconds, for a lag.
fn seconds(s: Option<f64>) -> Markup {
    html! {
        @match s {
            Some(s) if s.is_infinite() => span.muted { "> 5 min" },
            Some(s) if s < 1.0 => (format!("{:.0} ms", s * 1000.0)),
            Some(s) => (format!("{s:.1} s")),
            None => span.muted { "–" },
        }
    }
}

/// How long ago, in words.
pub(super) fn ago(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    format!("{} ago", crate::display::span(at, now))
}

fn queue_row(row: &QueueRow, now: DateTime<Utc>, csrf: &str, nonces: &dyn IssueNonce) -> Markup {
    let q = &row.status;
    html! {
        tr {
            td.name {
                a href=(format!("/poison/{}", urlencode(&q.queue))) { (neutral(&q.queue)) }
                br;
                a.sub href=(format!("/queues/{}/waiting", urlencode(&q.queue))) { "waiting" }
            }
            @if !q.declared {
                td colspan="7" .muted { "not declared yet — a worker declares it when it starts" }
            } @else if let Some(error) = &q.error {
                td colspan="7" .error { (neutral(error)) }
            } @else {
                td.num { (count(q.waiting)) }
                td.num.oldest {
                    @match q.waiting_since {
                        Some(since) => span title=(format!("since {} UTC", since.format("%Y-%m-%d %H:%M:%S"))) { (crate::display::span(since, now)) },
                        None if q.waiting.unwrap_or(0) > 0 && q.consumers.is_some() => span.muted title="RabbitMQ does not tell how long a message waited" { "not told" },
                        None => span.muted { "–" },
                    }
                }
                td.num { (rate(row.waiting_rate)) }
                td.num { (count(q.leased)) }
                td.num {
                    @if q.poisoned.unwrap_or(0) > 0 {
                        a.poison href=(format!("/poison/{}", urlencode(&q.queue))) { (count(q.poisoned)) }
                    } @else {
                        (count(q.poisoned))
                    }
                }
                td.num { (rate(row.poisoned_rate)) }
                td.consumers {
                    @if let Some(attached) = q.consumers {
                        @if attached == 0 {
                            span.badge.bad title="the broker counts no consumer attached now" { "none attached" } " "
                        } @else {
                            span.attached { (thousands(attached)) " attached" } " "
                        }
                    }
                    @if !may_act() {
                        @if row.paused == Some(true) { span.badge.bad { "paused" } }
                    } @else {
                    form.pause method="post" action=(format!("/queues/{}", urlencode(&q.queue))) {
                        input type="hidden" name="csrf" value=(csrf);
                        input type="hidden" name="nonce" value=(nonces.issue("pause", &q.queue));
                        @if row.paused == Some(true) {
                            span.badge.bad { "paused" } " "
                            button name="pause" value="resume" { "Resume" }
                        } @else {
                            button.quiet name="pause" value="pause" title="the queue's workers take no new messages until resumed" { "Pause" }
                        }
                    }
                    }
                }
            }
        }
    }
}

/// The live part of the overview (refreshed in place by the script).
pub(super) fn live(o: &Overview, csrf: &str, nonces: &dyn IssueNonce) -> Markup {
    let now = o.at;
    html! {
        section.card #queues {
            h2 { "Queues" span.when { "as of " (o.at.format("%H:%M:%S UTC")) } }
            table.grid {
                thead { tr {
                    th { "queue" } th.num { "waiting" } th.num title="how long the message waiting longest has waited" { "oldest" } th.num { "change" }
                    th.num { "leased" } th.num { "poison" } th.num { "change" } th { "consumers" }
                } }
                tbody {
                    @for row in &o.queues { (queue_row(row, now, csrf, nonces)) }
                }
            }
            @for idle in &o.unconsumed {
                p.warning.unconsumed role="alert" { (idle.warning()) }
            }
        }
        (workers_card(&o.workers, now))
        section.card #relay {
            h2 { "Relay backlog" }
            @let b = &o.status.relay;
            @if b.entries == 0 {
                p.ok { "Nothing waiting: every outbox entry is published." }
            } @else {
                p {
                    strong { (thousands(b.entries)) } " entries in "
                    strong { (thousands(b.partitions)) } " partitions"
                    @if let Some(oldest) = b.oldest {
                        ", the oldest written " strong { (ago(oldest, now)) }
                    }
                }
                table.grid {
                    thead { tr { th { "table" } th.num { "entries" } } }
                    tbody {
                        @for (table, entries) in &b.tables {
                            tr { td.name { (neutral(table)) } td.num { (thousands(*entries)) } }
                        }
                    }
                }
            }
            @let notes = crate::status::relay_notes(&o.status, now);
            @if let Some(warning) = &notes.warning {
                p.warning role="alert" { (warning) }
            }
            @for note in &notes.notes {
                p.muted { (note) }
            }
            @if o.status.relays.is_empty() {
                p.muted { "No relay has announced itself (a worker of the index queue runs one)." }
            } @else {
                table.grid {
                    thead { tr {
                        th { "relay" } th { "state" } th.num { "shares" }
                        th.num { "published" } th.num { "entries/s" }
                    } }
                    tbody {
                        @for r in &o.status.relays {
                            tr {
                                td.name { (neutral(&r.id)) }
                                td { @if r.live { "running" } @else { "stopped" } }
                                td.num { (thousands(r.shares)) }
                                td.num { (thousands(r.published)) }
                                td.num { (thousands(r.rate.round() as u64)) }
                            }
                        }
                    }
                }
            }
        }
        section.card #convergence {
            h2 { "Convergence" }
            @match &o.convergence {
                None => p.muted {
                    "Give the console the workers' metrics endpoints (" code { "--metrics http://HOST:PORT/metrics" }
                    ") or run it inside a worker (" code { "run --console" } ") to see each index's copy lag and the hot partitions."
                },
                Some(c) => {
                    @for (endpoint, error) in &c.unreachable {
                        p.error { (neutral(endpoint)) ": " (neutral(error)) }
                    }
                    @if c.lags.is_empty() {
                        p.muted { "No copies written since the workers started." }
                    } @else {
                        table.grid {
                            thead { tr { th { "index" } th.num { "copies" } th.num { "mean lag" } th.num { "p50 ≤" } th.num { "p99 ≤" } } }
                            tbody {
                                @for ((table, index), lag) in &c.lags {
                                    tr {
                                        td.name { (table) " · " (index) }
                                        td.num { (thousands(lag.count as u64)) }
                                        td.num { (seconds(lag.mean())) }
                                        td.num { (seconds(lag.quantile(0.5))) }
                                        td.num { (seconds(lag.quantile(0.99))) }
                                    }
                                }
                            }
                        }
                    }
                    @if !c.hot.is_empty() {
                        h3 { "Hot partitions" }
                        table.grid {
                            thead { tr { th { "table" } th { "partition" } th.num { "writes/s" } } }
                            tbody {
                                @for ((table, partition), rate) in &c.hot {
                                    tr { td.name { (table) } td.name { (partition) } td.num { (format!("{rate:.1}")) } }
                                }
                            }
                        }
                    }
                },
            }
        }
        section.card #audits {
            h2 { "Last audits" }
            @if o.status.audits.is_empty() {
                p.muted { "No table audited yet." }
            } @else {
                table.grid {
                    thead { tr {
                        th { "table" } th { "result" } th { "when" } th.num { "scanned" }
                        th.num { "missing" } th.num { "stale" } th.num { "orphaned" } th.num { "repaired" }
                    } }
                    tbody {
                        @for a in &o.status.audits {
                            tr {
                                td.name { (neutral(&a.table)) }
                                td { @if a.clean { span.badge.ok { "clean" } } @else { span.badge.bad { "drift" } } }
                                td.nowrap { (ago(a.at, now)) }
                                td.num { (thousands(a.scanned)) }
                                td.num { (thousands(a.missing)) }
                                td.num { (thousands(a.stale)) }
                                td.num { (thousands(a.orphaned)) }
                                td.num { (thousands(a.repaired)) }
                            }
                        }
                    }
                }
            }
        }
        section.card #jobs {
            h2 { "Jobs" }
            @if o.tables.is_empty() {
                p.muted { "No registered entity types in this store yet: jobs run over the tables they declare." }
            } @else if may_act() {
                form.inline method="post" action="/jobs" {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="nonce" value=(nonces.issue(JOB_FORM, ""));
                    label { "table "
                        select name="table" {
                            @for (table, _) in &o.tables { option value=(table) { (table) } }
                        }
                    }
                    label { "index (backfill) "
                        select name="index" {
                            option value="" { "—" }
                            @for (table, indexes) in &o.tables {
                                @for index in indexes {
                                    option value=(index) { (table) " · " (index) }
                                }
                            }
                        }
                    }
                    button name="kind" value="audit" { "Run audit" }
                    button name="kind" value="repair" { "Repair" }
                    button name="kind" value="backfill" { "Backfill index" }
                }
            }
            @if !o.migrations.is_empty() && may_act() {
                form.inline method="post" action="/jobs" {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="nonce" value=(nonces.issue(MIGRATE_FORM, ""));
                    label { "type "
                        select name="type" {
                            @for (table, kind, version) in &o.migrations {
                                option value=(format!("{table}:{kind}")) { (table) " · " (kind) " (current v" (version) ")" }
                            }
                        }
                    }
                    button name="kind" value="migrate" { "Migrate to the current version" }
                }
            }
            @if o.jobs.is_empty() {
                p.muted { "No jobs yet." }
            } @else {
                @if may_act() {
                    form.inline method="post" action="/jobs" {
                        input type="hidden" name="csrf" value=(csrf);
                        input type="hidden" name="nonce" value=(nonces.issue(CLEAR_FORM, ""));
                        button.quiet name="kind" value="clear" title="deletes the records of done and failed jobs; running jobs stay" { "Clear finished jobs" }
                    }
                }
                table.grid.jobs {
                    thead { tr { th { "job" } th { "table" } th { "progress" } th { "result" } th { "started" } } }
                    tbody { @for job in &o.jobs { (job_row(job, now)) } }
                }
            }
        }
    }
}

/// The workers card: every process with its last heartbeat.
pub(super) fn workers_card(workers: &[WorkerProcess], now: DateTime<Utc>) -> Markup {
    html! {
        section.card #workers {
            h2 { "Workers" }
            @if workers.is_empty() {
                p.muted { "No worker process has announced itself (workers started with " code { "tablekit-worker run" } " do, every 10 s)." }
            } @else {
                div.scroll {
                    table.grid.workers {
                        thead { tr {
                            th { "process" } th { "host" } th.num { "pid" } th { "version" } th { "queues" }
                            th { "heartbeat" } th.num { "in flight" } th.num { "processed/s" } th { "state" }
                        } }
                        tbody {
                            @for w in workers {
                                tr class=(if w.silent { "silent" } else { "" }) {
                                    td.name { (neutral(&w.id)) }
                                    td.name { (neutral(&w.host)) }
                                    td.num { (w.pid) }
                                    td { (neutral(&w.version)) }
                                    td.name { (w.queues.iter().map(|q| neutral(q).into_owned()).collect::<Vec<_>>().join(", ")) }
                                    td.nowrap { span title=(w.heartbeat_at.format("%Y-%m-%d %H:%M:%S UTC")) { (ago(w.heartbeat_at, now)) } }
                                    td.num { (thousands(w.in_flight)) " / " (thousands(w.concurrency)) }
                                    td.num { (format!("{:.1}", w.processed_per_second)) }
                                    td {
                                        @if w.stopped_at.is_some() {
                                            span.badge { "stopped" }
                                        } @else if w.silent {
                                            span.badge.bad title="no heartbeat for three intervals: it died, hangs or cannot reach the store" { "silent" }
                                        } @else {
                                            span.badge.ok { "running" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn job_row(job: &Job, now: DateTime<Utc>) -> Markup {
    let what = match (job.kind, &job.index, &job.entity_kind) {
        (JobKind::Backfill, Some(index), _) => format!("backfill of {index}"),
        (JobKind::Migrate, _, Some(kind)) => format!("migrate of {kind}"),
        (kind, _, _) => kind.name().to_owned(),
    };
    html! {
        tr data-job=(job.id) data-state=(format!("{:?}", job.state).to_lowercase()) {
            td { (what) @if job.resumed > 0 { span.muted { " (taken up again)" } } }
            td.name { (neutral(&job.table)) }
            td.progress {
                @match job.state {
                    JobState::Running => {
                        @if let Some(estimate) = job.estimate.filter(|e| *e > 0) {
                            progress value=(job.scanned.min(estimate)) max=(estimate) {}
                        } @else {
                            progress {}
                        }
                        " " (thousands(job.scanned)) " scanned"
                        @if job.drift > 0 { ", " (thousands(job.drift)) " out of step" }
                    },
                    _ => {
                        progress value="1" max="1" {}
                        " " (thousands(job.scanned)) " scanned"
                    },
                }
            }
            td {
                @match (&job.state, &job.report, &job.error) {
                    (JobState::Failed, _, Some(error)) => span.error { "failed: " (neutral(error)) },
                    (JobState::Done, _, _) if job.migration.is_some() => {
                        @if let Some(m) = &job.migration {
                            span.badge.ok { (thousands(m.rewritten)) " rewritten" }
                            span.muted {
                                " · by stored version: "
                                (m.versions.iter().map(|(v, n)| format!("v{v} {}", thousands(*n))).collect::<Vec<_>>().join(", "))
                                @if m.conflicts > 0 { " · " (thousands(m.conflicts)) " left to a concurrent write" }
                                @if m.unreadable > 0 { " · " (thousands(m.unreadable)) " unreadable" }
                            }
                        }
                    },
                    (JobState::Done, Some(r), _) => {
                        @let found = r.missing + r.stale + r.orphaned;
                        @if found == 0 && r.repaired == 0 {
                            span.badge.ok { "clean" }
                        } @else {
                            span class=(if found > r.repaired { "badge bad" } else { "badge ok" }) {
                                (thousands(found)) " found, " (thousands(r.repaired)) " repaired"
                            }
                        }
                        span.muted { " in " (format!("{:.1}", r.seconds)) " s" }
                    },
                    _ => span.muted { "running" },
                }
            }
            td.nowrap { (ago(job.started, now)) }
        }
    }
}

/// The overview page.
pub(super) fn overview(
    o: &Overview,
    csrf: &str,
    nonces: &dyn IssueNonce,
    result: Option<&Outcome>,
) -> Markup {
    html! {
        (banner(result))
        div #live data-src="/live" { (live(o, csrf, nonces)) }
    }
}

/// Asks before a repair writes to a table.
pub(super) fn confirm_repair(table: &str, csrf: &str, nonces: &dyn IssueNonce) -> Markup {
    html! {
        section.card.confirm {
            h2 { "Repair " code { (neutral(table)) } "?" }
            p {
                "A repair " strong { "writes to the table" } ": it rewrites every missing or stale index copy from its entity and deletes every orphaned copy. "
                "An audit finds the same drift and changes nothing."
            }
            form.inline method="post" action="/jobs" {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="nonce" value=(nonces.issue(REPAIR_FORM, table));
                input type="hidden" name="table" value=(table);
                input type="hidden" name="confirmed" value="yes";
                button.danger name="kind" value="repair" { "Repair " (neutral(table)) }
                button name="kind" value="audit" { "Run an audit instead" }
                a href="/" { "Cancel" }
            }
        }
    }
}

/// The login form (a console with a token).
pub(super) fn login(failed: bool) -> Markup {
    html! {
        section.card.login {
            h2 { "Sign in" }
            @if failed { p.error { "That is not the console's token." } }
            form method="post" action="/login" {
                label { "Token " input type="password" name="token" autocomplete="current-password" autofocus; }
                button { "Sign in" }
            }
        }
    }
}

/// A page that says what went wrong.
/// A refusal with the way back to the page it came from (`back`: its filter, page,
/// ticked messages and typed text kept).
pub(super) fn problem_back(message: &str, back: &str) -> Markup {
    html! {
        section.card {
            h2 { "Not done" }
            p.error { (neutral(message)) }
            p { a.back href=(back) { "Back to the page you came from" } " (its filter, page, ticked messages and typed queue kept) · " a href="/" { "the overview" } }
        }
    }
}

pub(super) fn problem(message: &str) -> Markup {
    html! {
        section.card { h2 { "Not done" } p.error { (neutral(message)) } p { a href="/" { "Back to the overview" } } }
    }
}

/// A path segment, percent-encoded.
pub(super) fn urlencode(segment: &str) -> String {
    form_urlencoded::byte_serialize(segment.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_times_read_at_a_glance() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1234567), "1,234,567");
        let now = Utc::now();
        assert_eq!(ago(now - chrono::Duration::seconds(5), now), "5 s ago");
        assert_eq!(
            ago(now - chrono::Duration::minutes(90), now),
            "1 h 30 min ago"
        );
        assert_eq!(urlencode("a b/c"), "a%20b%2Fc");
    }
}
