//! The broker's queues behind one tablekit queue: declaring the quorum queue with its
//! retry and poison queues, counting their ready messages, and deleting them.

use std::time::Duration;

use lapin::Channel;
use lapin::options::QueueDeclareOptions;
use lapin::types::{FieldTable, ShortString};

use super::super::{PAUSED_SUFFIX, QueueOptions, RETRY_INFIX, check_queue_name, poison_queue};
use super::connection::{RabbitQueue, is_not_found, unavailable};
use super::headers::string_arg;
use crate::error::{Error, Result};

pub(super) fn retry_queue(queue: &str, delay: Duration) -> String {
    format!("{queue}{RETRY_INFIX}{}", delay.as_millis())
}

/// The queue whose existence pauses a queue's consumers: an empty durable queue, read with
/// a passive declare.
pub(super) fn paused_marker(queue: &str) -> String {
    format!("{queue}{PAUSED_SUFFIX}")
}

impl RabbitQueue {
    pub(super) async fn declare_one(
        channel: &Channel,
        name: &str,
        arguments: FieldTable,
    ) -> Result<lapin::Queue> {
        channel
            .queue_declare(
                ShortString::from(name),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                arguments,
            )
            .await
            .map_err(|e| Error::refused_because(format!("declaring `{name}`: {e}"), e))
    }

    /// The number of ready messages in a queue, or an error if it does not exist.
    pub(super) async fn ready_checked(&self, name: &str) -> Result<u64> {
        self.counts_checked(name).await.map(|(ready, _)| ready)
    }

    /// The numbers of ready messages and of consumers of a queue (one passive declare),
    /// or an error if it does not exist.
    pub(super) async fn counts_checked(&self, name: &str) -> Result<(u64, u64)> {
        let channel = self.channel().await?;
        let result = channel
            .queue_declare(
                ShortString::from(name),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await;
        let _ = channel.close(200, ShortString::from("done")).await;
        result
            .map(|q| (u64::from(q.message_count()), u64::from(q.consumer_count())))
            .map_err(|e| {
                if is_not_found(&e) {
                    Error::refused_because(format!("queue `{name}`: {e}"), e)
                } else {
                    unavailable(e)
                }
            })
    }

    /// The number of ready messages in a queue (0 if it does not exist).
    pub(super) async fn ready(&self, name: &str) -> Result<u64> {
        match self.ready_checked(name).await {
            Err(Error::Refused { .. }) => Ok(0),
            other => other,
        }
    }

    /// Purges a queue's ready messages (those its consumers hold stay) and answers how
    /// many went; a queue that does not exist holds none.
    pub(super) async fn purge_ready(&self, name: &str) -> Result<u64> {
        let channel = self.channel().await?;
        let result = channel
            .queue_purge(
                ShortString::from(name),
                lapin::options::QueuePurgeOptions::default(),
            )
            .await;
        let _ = channel.close(200, ShortString::from("purged")).await;
        match result {
            Ok(count) => Ok(u64::from(count)),
            Err(e) if is_not_found(&e) => Ok(0),
            Err(e) => Err(unavailable(e)),
        }
    }

    pub(super) async fn retry_delays(&self, queue: &str) -> Vec<Duration> {
        self.inner
            .state
            .lock()
            .await
            .retry_delays
            .get(queue)
            .cloned()
            .unwrap_or_else(|| QueueOptions::default().retry_delays)
    }

    /// Deletes a queue with its poison queue, retry queues and pause marker (and the
    /// messages in them).
    ///
    /// # Errors
    /// [`Error::Unavailable`].
    pub async fn delete_queue(&self, queue: &str, options: &QueueOptions) -> Result<()> {
        check_queue_name(queue)?;
        let mut names = vec![queue.to_owned(), poison_queue(queue), paused_marker(queue)];
        names.extend(options.retry_delays.iter().map(|d| retry_queue(queue, *d)));
        for name in names {
            let channel = self.channel().await?;
            // A queue that does not exist closes the channel; that is fine.
            let _ = channel
                .queue_delete(
                    ShortString::from(name.as_str()),
                    lapin::options::QueueDeleteOptions::default(),
                )
                .await;
            let _ = channel.close(200, ShortString::from("deleted")).await;
        }
        Ok(())
    }
}

pub(super) fn quorum_arguments(dead_letter_to: &str) -> FieldTable {
    let mut arguments = FieldTable::default();
    arguments.insert("x-queue-type".into(), string_arg("quorum"));
    arguments.insert("x-dead-letter-exchange".into(), string_arg(""));
    arguments.insert(
        "x-dead-letter-routing-key".into(),
        string_arg(dead_letter_to),
    );
    arguments.insert("x-dead-letter-strategy".into(), string_arg("at-least-once"));
    arguments.insert("x-overflow".into(), string_arg("reject-publish"));
    arguments
}
