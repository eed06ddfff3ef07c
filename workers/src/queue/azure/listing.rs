//! What the account holds, read without changing it: its queues (List Queues, a page of
//! names at a time) and the messages at the front of a queue (Peek Messages).

use reqwest::{Method, StatusCode};
use serde::Deserialize;

use super::super::{PeekQuery, WaitingMessage, is_poison_queue, operation_of};
use super::wire::{messages, parse_http_date, poison_wire, service_error};
use super::{AzureQueue, MAX_BATCH};
use crate::error::{Error, Result};

/// The most queue names one List Queues answer holds (the service's own limit).
const LIST_PAGE: usize = 5000;

/// A List Queues answer: one page of names and the marker of the next.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct QueueList {
    #[serde(default)]
    queues: Option<ListedQueues>,
    #[serde(default)]
    next_marker: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct ListedQueues {
    #[serde(rename = "Queue", default)]
    queues: Vec<ListedQueue>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
struct ListedQueue {
    name: String,
}

/// One List Queues answer read: the names, and the marker of the next page (`None` at the
/// end).
fn queue_page(xml: &str) -> Result<(Vec<String>, Option<String>)> {
    let list: QueueList = quick_xml::de::from_str(xml)
        .map_err(|e| Error::storage_because("an unreadable list of queues", e))?;
    let names = list
        .queues
        .map(|q| q.queues.into_iter().map(|q| q.name).collect())
        .unwrap_or_default();
    Ok((names, list.next_marker.filter(|m| !m.is_empty())))
}

impl AzureQueue {
    /// The account's queues but poison queues, by name, a page of [`LIST_PAGE`] names a
    /// call; `None` through a queue's own access signature, which cannot list.
    pub(super) async fn list_queues(&self) -> Result<Option<Vec<String>>> {
        if self
            .inner
            .access
            .as_ref()
            .is_some_and(|access| !access.is_account_sas())
        {
            return Ok(None);
        }
        self.allowed("(the account's queues)", "l", "listing queues")?;
        let mut names = Vec::new();
        let mut marker: Option<String> = None;
        loop {
            let mut query = vec![
                ("comp", "list".to_owned()),
                ("maxresults", LIST_PAGE.to_string()),
            ];
            if let Some(marker) = &marker {
                query.push(("marker", marker.clone()));
            }
            let response = self.request(Method::GET, "/", &query, None).await?;
            if !response.status().is_success() {
                return Err(service_error(response, "(the account's queues)").await);
            }
            let text = response
                .text()
                .await
                .map_err(|e| Error::unavailable_because("reading the list of queues", e))?;
            let (page, next) = queue_page(&text)?;
            names.extend(page.into_iter().filter(|name| !is_poison_queue(name)));
            match next {
                Some(next) => marker = Some(next),
                None => break,
            }
        }
        names.sort();
        Ok(Some(names))
    }

    /// The messages at the front of `queue` (at most [`MAX_BATCH`]), peeked: visible ones
    /// only — the service does not show leased or delayed messages.
    pub(super) async fn peek_front(
        &self,
        queue: &str,
        query: &PeekQuery,
    ) -> Result<Vec<WaitingMessage>> {
        if query.newest_first {
            return Err(Error::Unsupported(
                "Azure Queue Storage peeks at the front of a queue only (up to 32 messages): its newest messages cannot be shown"
                    .into(),
            ));
        }
        let limit = query.bounded_limit().min(MAX_BATCH);
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.allowed(queue, "r", "peeking messages")?;
        let response = self
            .request(
                Method::GET,
                &format!("/{queue}/messages"),
                &[
                    ("peekonly", "true".to_owned()),
                    ("numofmessages", limit.to_string()),
                ],
                None,
            )
            .await?;
        if response.status() == StatusCode::NOT_FOUND {
            return Ok(Vec::new());
        }
        let mut waiting = Vec::new();
        for message in messages(response, queue).await? {
            let wire = poison_wire(&message.message_id, &message.message_text);
            // A body claim-checked to the blob store is read back for its kind; one that
            // cannot be read shows no kind.
            let kind = self
                .body_of(&wire)
                .await
                .ok()
                .and_then(|body| operation_of(&body));
            let inserted = message.insertion_time.as_deref().and_then(parse_http_date);
            waiting.push(WaitingMessage {
                id: wire.id,
                handle: Some(message.message_id),
                kind,
                sent_at: wire.sent.or(inserted),
                attempts: message.dequeue_count.unwrap_or(0),
                next_attempt: None,
                leased: false,
            });
        }
        Ok(waiting)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_queues_reads_its_names_and_the_next_marker() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?><EnumerationResults ServiceEndpoint="http://127.0.0.1:10001/devstoreaccount1/"><Prefix/><MaxResults>5000</MaxResults><Queues><Queue><Name>jobs</Name></Queue><Queue><Name>jobs-poison</Name></Queue></Queues><NextMarker>/devstoreaccount1/x</NextMarker></EnumerationResults>"#;
        let (names, next) = queue_page(xml).expect("reads");
        assert_eq!(names, ["jobs", "jobs-poison"]);
        assert_eq!(next.as_deref(), Some("/devstoreaccount1/x"));
        let last = r#"<EnumerationResults><Queues/><NextMarker/></EnumerationResults>"#;
        assert_eq!(queue_page(last).expect("reads"), (Vec::new(), None));
        let none = r#"<EnumerationResults></EnumerationResults>"#;
        assert_eq!(queue_page(none).expect("reads"), (Vec::new(), None));
    }
}
