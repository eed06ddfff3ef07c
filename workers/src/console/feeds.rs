//! The change feeds (`#[feed]`): `/feeds` lists each feed with its groups and their lag;
//! `/feeds/<table>/<group>` shows one group: its members, each share's holder, checkpoint,
//! the changes behind and the age of the oldest unhandled one, its parked changes, and
//! its deliveries per minute (recorded as a queue's are, under
//! [`crate::feed::history_series`]). Read-only: nothing here changes state.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};

use super::view::{ago, thousands, urlencode};
use super::{Shared, failure, html as page_of, view};
use crate::display::neutral;
use crate::status::FeedStatus;

/// How many parked changes the group's page shows.
const PARKED_SHOWN: usize = 50;

/// `GET /feeds`.
pub(super) async fn list(State(console): State<Shared>) -> Response {
    match crate::status::feeds(&console.store).await {
        Ok(feeds) => page_of(
            StatusCode::OK,
            view::page("Change feeds", Some(10), feeds_card(&feeds, Utc::now())),
        ),
        Err(e) => failure(&e),
    }
}

fn feeds_card(feeds: &[FeedStatus], now: DateTime<Utc>) -> Markup {
    html! {
        section.card {
            h2 { "Change feeds" }
            @if feeds.is_empty() {
                p.muted { "No registered type declares " code { "#[feed]" } "." }
            }
            @for feed in feeds {
                h3 { code { (neutral(&feed.table)) } " · " (thousands(feed.kept)) " changes kept in " (feed.shares) " shares, for " (feed.retention_secs / 3600) " h" }
                @if feed.groups.is_empty() {
                    p.muted { "No group reads it yet." }
                } @else {
                    table {
                        thead { tr { th { "group" } th { "members" } th { "shares read" } th { "behind" } th { "oldest unhandled" } th { "" } } }
                        tbody {
                            @for group in &feed.groups {
                                @let expired = group.shares.iter().filter(|s| s.expired).count();
                                tr {
                                    td { a href=(format!("/feeds/{}/{}", urlencode(&feed.table), urlencode(&group.group))) { (neutral(&group.group)) } }
                                    td { (group.members.len()) }
                                    td { (group.shares.len()) }
                                    td { (thousands(group.behind())) }
                                    td { (group.oldest_unread().map_or_else(|| "—".to_owned(), |at| ago(at, now))) }
                                    td { @if expired > 0 { span.bad { (expired) " shares past retention" } } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /feeds/<table>/<group>`.
pub(super) async fn group(
    State(console): State<Shared>,
    Path((table, group)): Path<(String, String)>,
) -> Response {
    let feeds = match crate::status::feeds(&console.store).await {
        Ok(feeds) => feeds,
        Err(e) => return failure(&e),
    };
    let now = Utc::now();
    let Some(feed) = feeds.iter().find(|f| f.table == table) else {
        return failure(&crate::error::Error::NotFound {
            table: neutral(&table).into_owned(),
            partition_key: String::new(),
            row_key: String::new(),
        });
    };
    let Some(lag) = feed.groups.iter().find(|g| g.group == group) else {
        return failure(&crate::error::Error::NotFound {
            table: neutral(&table).into_owned(),
            partition_key: format!("group {}", neutral(&group)),
            row_key: String::new(),
        });
    };
    let parked = tablekit_patterns::feed::parked(&console.store, &table, &group).await;
    let series = crate::feed::history_series(&table, &group);
    let month = crate::activity::history(
        &console.store,
        &series,
        now - chrono::Duration::days(30),
        now,
    )
    .await;
    let body = html! {
        section.card {
            h2 { "Group " code { (neutral(&group)) } " of " code { (neutral(&table)) } }
            p { (thousands(lag.behind())) " changes behind; the oldest unhandled "
                (lag.oldest_unread().map_or_else(|| "—".to_owned(), |at| ago(at, now))) "." }
            h3 { "Members" }
            @if lag.members.is_empty() { p.muted { "No member's heartbeat runs." } }
            ul { @for (member, until) in &lag.members { li { code { (neutral(member)) } " · heartbeat until " (until.to_rfc3339()) } } }
            h3 { "Shares" }
            table {
                thead { tr { th { "share" } th { "holder" } th { "lease until" } th { "checkpoint" } th { "last" } th { "oldest kept" } th { "behind" } th { "oldest unhandled" } } }
                tbody {
                    @for share in &lag.shares {
                        tr {
                            td { (share.share) }
                            td { (share.holder.as_deref().map_or_else(|| "—".to_owned(), |h| neutral(h).into_owned())) }
                            td { (share.until.map_or_else(|| "—".to_owned(), |u| u.to_rfc3339())) }
                            td { (share.checkpoint) }
                            td { (share.last) }
                            td { (share.oldest) }
                            td { (thousands(share.behind)) @if share.expired { " " span.bad { "past retention" } } }
                            td { (share.oldest_unread.map_or_else(|| "—".to_owned(), |at| ago(at, now))) }
                        }
                    }
                }
            }
        }
        section.card {
            h2 { "Parked changes" }
            @match &parked {
                Err(e) => p.bad { (neutral(&e.to_string())) },
                Ok(parked) if parked.is_empty() => p.muted { "None: the handler took every change." },
                Ok(parked) => {
                    p { (parked.len()) " parked (" code { "tablekit-worker feed parked" } " lists them all)." }
                    table {
                        thead { tr { th { "share/seq" } th { "parked" } th { "reason" } th { "change" } } }
                        tbody {
                            @for p in parked.iter().take(PARKED_SHOWN) {
                                tr {
                                    td { (p.share) "/" (p.seq) }
                                    td { (ago(p.parked_at, now)) }
                                    td { (neutral(&p.reason)) }
                                    td { code { (neutral(&p.change.chars().take(300).collect::<String>())) } }
                                }
                            }
                        }
                    }
                }
            }
        }
        @match &month {
            Ok(month) => (super::activity::queue_history(&series, month, now)),
            Err(e) => section.card { p.bad { (neutral(&e.to_string())) } },
        }
    };
    page_of(
        StatusCode::OK,
        view::page(&format!("Feed group {}", neutral(&group)), Some(10), body),
    )
}
