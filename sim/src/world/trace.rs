//! The trace of a run: what each task's poll brought (faults, queue events, publishes),
//! the crashes, and each delivery told in a few words.

use std::sync::Arc;

use tablekit_patterns::consistency::OutboxSink;
use tablekit_workers::Envelope;
use tablekit_workers::index::QueueSink;

use super::World;
use crate::exec::Observer;
use crate::queue::SimQueue;

/// A sink that notes each publish for the trace.
pub(super) struct TracedSink {
    pub(super) inner: QueueSink<SimQueue>,
    pub(super) log: Arc<std::sync::Mutex<Vec<String>>>,
}

impl OutboxSink for TracedSink {
    fn publish<'a>(
        &'a self,
        envelope: &'a tablekit_patterns::consistency::Envelope,
    ) -> tablekit_patterns::consistency::BoxFuture<'a, tablekit_patterns::Result<()>> {
        Box::pin(async move {
            let result = self.inner.publish(envelope).await;
            if let (Ok(bytes), Ok(mut log)) = (envelope.to_bytes(), self.log.lock()) {
                log.push(format!(
                    "publish {}{}",
                    describe(&bytes),
                    if result.is_ok() { "" } else { " FAILED" }
                ));
            }
            result
        })
    }
}

pub(super) struct Tracer<'a>(pub(super) &'a World);

impl Observer for Tracer<'_> {
    fn polled(&self, task: &str) {
        for line in self.0.chaos.take_log() {
            self.0.log(format!("{task}: fault {line}"));
        }
        for line in self.0.queue.take_log() {
            self.0.log(format!("{task}: queue {line}"));
        }
        let published = self.0.published.lock().map(|mut p| std::mem::take(&mut *p));
        for line in published.unwrap_or_default() {
            self.0.log(format!("{task}: {line}"));
        }
    }

    fn crashed(&self, task: &str) {
        self.0.log(format!("{task}: CRASHED, restarts"));
    }
}

/// A delivery in a few words, for the trace: its kind and the keys it touches.
pub(super) fn describe(body: &[u8]) -> String {
    let Ok(envelope) = Envelope::from_bytes(body) else {
        return "a malformed message".into();
    };
    let mut keys = Vec::new();
    if let Some(ops) = envelope
        .payload
        .get("operations")
        .and_then(|o| o.as_array())
    {
        for op in ops {
            let field = |name: &str| op.get(name).cloned().unwrap_or_default();
            let kind = field("op");
            let source = op
                .get("source")
                .or_else(|| op.get("dependent"))
                .cloned()
                .unwrap_or_default();
            let pk = source
                .get("partition_key")
                .and_then(|v| v.as_str())
                .unwrap_or("?")
                .to_owned();
            let source = source
                .get("row_key")
                .and_then(|v| v.as_str())
                .unwrap_or("?")
                .to_owned();
            // A copy's place (an expiry entry's instant, an index key), else the value.
            // A link's dependent.
            let value = op
                .get("target")
                .or_else(|| op.get("source").and(op.get("dependent")))
                .and_then(|t| t.get("row_key"))
                .cloned()
                .unwrap_or_else(|| field("value"));
            let version = field("version");
            let kind = kind.as_str().unwrap_or("?");
            let value = value.as_str().unwrap_or("");
            keys.push(format!("{kind}({pk}/{source} {value} v{version})"));
        }
    }
    if envelope.kind == "reclaim" {
        // The undoing of a write: its entity, the links and reservations it may have made.
        let rk = |v: &serde_json::Value| {
            v.get("row_key")
                .and_then(|r| r.as_str())
                .unwrap_or("?")
                .to_owned()
        };
        let p = &envelope.payload;
        if let Some(source) = p.get("source") {
            keys.push(format!("of {}", rk(source)));
        }
        for link in p
            .get("links")
            .and_then(|l| l.as_array())
            .into_iter()
            .flatten()
        {
            if let Some(from) = link.get(1) {
                keys.push(format!("link {}", rk(from)));
            }
        }
        for at in p
            .get("reservations")
            .and_then(|r| r.as_array())
            .into_iter()
            .flatten()
        {
            keys.push(format!(
                "reservation {}",
                at.get("partition_key")
                    .and_then(|v| v.as_str())
                    .unwrap_or("?")
            ));
        }
    }
    format!(
        "{} {} [{}]",
        envelope.kind,
        &envelope.id.simple().to_string()[..8],
        keys.join(" ")
    )
}
