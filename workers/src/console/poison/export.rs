//! A set exported before it is confirmed: `GET /poison/<queue>/confirm/<token>/export`
//! streams the messages of a dry run's set as JSON lines — id, handle, operation kind and
//! version, reason, delivery count, times, headers and the whole body (as text when it is
//! UTF-8, else base64) — so that an operator keeps what a discard deletes. The set is left
//! in place: exporting confirms nothing.
//!
//! Bounded memory whatever the set holds: the messages are read a few at a time, each
//! line written out before the next is read.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::super::{Shared, html, view as frame};
use super::view;
use crate::queue::{PoisonMessage, PoisonQuery, Queue};

/// How many messages are read before their lines are sent.
const CHUNK: usize = 16;

/// The JSON line of one message, newline included.
fn line_of(message: &PoisonMessage) -> Vec<u8> {
    crate::queue::desk::export_line(message)
}

pub(crate) async fn export(
    State(console): State<Shared>,
    Path((queue, token)): Path<(String, String)>,
) -> Response {
    let Some(bound) = console.sets.peek(&token, &queue) else {
        return html(
            StatusCode::NOT_FOUND,
            frame::page("Gone", None, view::confirmation_gone(&queue)),
        );
    };
    let lines: futures::stream::BoxStream<'static, std::io::Result<Vec<u8>>> =
        if bound.scope == "all" {
            // A filter's set: read in pages of whole messages, those of the set kept.
            let set: std::collections::HashSet<String> = bound.handles.into_iter().collect();
            Box::pin(futures::stream::unfold(
                (
                    console,
                    queue.clone(),
                    bound.filter,
                    set,
                    Some(None::<String>),
                ),
                |(console, queue, filter, set, cursor)| async move {
                    let after = cursor?;
                    let query = PoisonQuery::new(CHUNK, usize::MAX)
                        .filter(filter.clone())
                        .after(after);
                    match console.broker.poison_page(&queue, &query).await {
                        Ok(page) => {
                            let chunk: Vec<u8> = page
                                .messages
                                .iter()
                                .filter(|m| set.contains(&m.handle))
                                .flat_map(line_of)
                                .collect();
                            let next = page.next.map(Some);
                            Some((Ok(chunk), (console, queue, filter, set, next)))
                        }
                        Err(e) => Some((
                            Err(std::io::Error::other(e)),
                            (console, queue, filter, set, None),
                        )),
                    }
                },
            ))
        } else {
            // Named messages: each read by its handle.
            Box::pin(futures::stream::unfold(
                (console, queue.clone(), bound.handles, 0usize),
                |(console, queue, handles, at)| async move {
                    if at >= handles.len() {
                        return None;
                    }
                    let end = (at + CHUNK).min(handles.len());
                    let mut chunk = Vec::new();
                    for handle in &handles[at..end] {
                        match console.broker.poison_body(&queue, handle).await {
                            Ok(Some(message)) => chunk.extend(line_of(&message)),
                            // Gone since the set was made: not in the export, as not in
                            // the action.
                            Ok(None) => {}
                            Err(e) => {
                                return Some((
                                    Err(std::io::Error::other(e)),
                                    (console, queue, Vec::new(), 0),
                                ));
                            }
                        }
                    }
                    Some((Ok(chunk), (console, queue, handles, end)))
                },
            ))
        };
    let name = format!(
        "attachment; filename=\"poison-{}.jsonl\"",
        queue
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            })
            .take(64)
            .collect::<String>()
    );
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "application/x-ndjson".to_owned()),
            (header::CONTENT_DISPOSITION, name),
        ],
        Body::from_stream(lines),
    )
        .into_response()
}
