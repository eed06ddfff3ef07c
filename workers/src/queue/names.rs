//! Queue names: a queue's poison queue, the names tablekit derives from a queue's
//! (RabbitMQ's retry queues and pause markers), and the check every name passes before a
//! broker sees it.

use crate::error::{Error, Result};

/// The suffix of a queue's poison queue.
pub const POISON_SUFFIX: &str = "-poison";

/// The longest queue name AMQP allows (a short string), in bytes.
pub const MAX_QUEUE_NAME_BYTES: usize = 255;

/// The name of a queue's poison queue.
pub fn poison_queue(queue: &str) -> String {
    format!("{queue}{POISON_SUFFIX}")
}

/// Whether `name` is a poison queue's name (it ends with [`POISON_SUFFIX`]): never a queue
/// to send or replay to, nor one [`Queue::exists`](super::Queue::exists) or [`Queue::declared_queues`](super::Queue::declared_queues) counts.
pub fn is_poison_queue(name: &str) -> bool {
    name.ends_with(POISON_SUFFIX)
}

/// The suffix of a retry queue's name before its delay (`<queue>-retry-<ms>`, RabbitMQ).
pub(crate) const RETRY_INFIX: &str = "-retry-";

/// The suffix of a queue's pause marker (`<queue>-paused`, RabbitMQ).
pub(crate) const PAUSED_SUFFIX: &str = "-paused";

/// Whether `name` is a name tablekit derives from a queue's other than its poison queue
/// (RabbitMQ's retry queues `<queue>-retry-<ms>` and pause markers `<queue>-paused`): never
/// a queue to send, replay or pause.
pub fn is_derived_queue(name: &str) -> bool {
    if name.ends_with(PAUSED_SUFFIX) {
        return true;
    }
    name.rsplit_once(RETRY_INFIX).is_some_and(|(queue, ms)| {
        !queue.is_empty() && !ms.is_empty() && ms.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Checks a queue name: 1 to 200 bytes (room for the `-poison` and retry suffixes within
/// AMQP's 255), printable, not starting with `amq.` (reserved by AMQP).
///
/// # Errors
/// [`Error::InvalidQueueName`].
pub fn check_queue_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("a queue name cannot be empty")
    } else if name.len() > 200 {
        Some(
            "a queue name has at most 200 bytes (AMQP allows 255, and the poison and retry queues add a suffix)",
        )
    } else if name.starts_with("amq.") {
        Some("names starting with `amq.` are reserved by AMQP")
    } else if name.chars().any(char::is_control) {
        Some("a queue name cannot hold control characters")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidQueueName {
            name: name.chars().take(64).collect(),
            reason,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_are_checked_before_any_broker_sees_them() {
        assert!(check_queue_name("archive").is_ok());
        assert!(check_queue_name(&"a".repeat(200)).is_ok());
        for bad in [
            String::new(),
            "a".repeat(201),
            "amq.x".into(),
            "a\nb".into(),
        ] {
            assert!(
                matches!(check_queue_name(&bad), Err(Error::InvalidQueueName { .. })),
                "{bad:?}"
            );
        }
        assert_eq!(poison_queue("archive"), "archive-poison");
        assert!(is_poison_queue(&poison_queue("archive")));
        assert!(!is_poison_queue("archive"));
        assert!(!is_poison_queue("poison-archive"));
    }
}
