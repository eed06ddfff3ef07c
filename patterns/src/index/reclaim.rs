//! Undoing what a write did outside its transaction before its commit, when the commit
//! never lands: the reservations of its unique values, the links it put beside sources
//! in other partitions, the blobs it uploaded. Before its first such step an indexed
//! write records a [`Reclaim`] as an intent in its own partition
//! ([`Engine::record_intent`](crate::consistency::Engine::record_intent)); its commit
//! deletes the intent under its ETag. A write that fails claims the intent and hands it
//! to the sink; a write whose process died leaves it to the relay, which claims it after
//! the grace period (the claim fences the write: its commit can no longer land).
//!
//! Applying a [`Reclaim`] (`IndexApplier`'s work, as all index work) is idempotent and never takes what a committed write holds: a
//! reservation is released only when its holder's record does not list it, a link only
//! when its dependent does not claim it, a blob only when the entity does not reference it.

use serde::{Deserialize, Serialize};
use tablekit_core::TableStore;
use tablekit_core::blob::BlobStore;

use super::record::{EntityRef, Target};
use crate::consistency::{Envelope, Operation, outbox};
use crate::error::Result;

/// The undoing of a write's steps outside its transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reclaim {
    /// The intent's id: what the write reserved and linked is tagged with it.
    pub id: String,
    /// The primary written.
    pub source: EntityRef,
    /// Reservations the write may have taken.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<EntityRef>,
    /// Links the write may have put: (property, source, source property).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<(String, EntityRef, String)>,
    /// The part of the names of the blobs the write may have uploaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob_nonce: Option<String>,
}

impl Operation for Reclaim {
    const KIND: &'static str = "reclaim";
    const VERSION: u32 = 1;
}

impl Reclaim {
    /// The steps outside the transaction a write to `source` with `targets` may take
    /// (with `blob_nonce` when it uploads blobs).
    pub fn of(source: &EntityRef, targets: &std::collections::BTreeSet<Target>) -> Self {
        let mut reclaim = Reclaim {
            id: tablekit_core::random::uuid().simple().to_string(),
            source: source.clone(),
            reservations: Vec::new(),
            links: Vec::new(),
            blob_nonce: None,
        };
        for target in targets {
            target.reclaim(source, &mut reclaim);
        }
        reclaim
    }

    /// Whether there is nothing to undo.
    pub fn is_empty(&self) -> bool {
        self.reservations.is_empty() && self.links.is_empty() && self.blob_nonce.is_none()
    }

    /// The envelope of this work.
    ///
    /// # Errors
    /// [`Error::Encode`](crate::Error::Encode).
    pub fn envelope(&self) -> Result<Envelope> {
        let id = uuid::Uuid::parse_str(&self.id).unwrap_or_else(|_| tablekit_core::random::uuid());
        Envelope::with_id(id, self)
    }
}

/// The writes of `source` still in flight: each pending intent (recorded, neither
/// committed nor claimed) in `source`'s partition, with the undoing it records. Reads the
/// partition's outbox entries only (its pending work, not its entities); a table that
/// does not exist has none.
///
/// # Errors
/// The store's errors.
pub(crate) async fn pending_writes<S: TableStore>(
    store: &S,
    source: &EntityRef,
) -> Result<Vec<(tablekit_core::Entity, Reclaim)>> {
    use futures::TryStreamExt;
    let query = outbox::partition_query(&source.partition_key);
    let mut entries = std::pin::pin!(store.query_stream(&source.table, query));
    let mut pending = Vec::new();
    loop {
        let entry = match entries.try_next().await {
            Ok(Some(entry)) => entry,
            Ok(None) => return Ok(pending),
            Err(e) if e.kind() == tablekit_core::ErrorKind::TableNotFound => return Ok(pending),
            Err(e) => return Err(e),
        };
        if !outbox::is_intent(&entry) {
            continue;
        }
        let Ok(envelope) = outbox::read_entry(&entry) else {
            continue;
        };
        if envelope.kind != <Reclaim as Operation>::KIND {
            continue;
        }
        let Ok(undoing) = serde_json::from_value::<Reclaim>(envelope.payload) else {
            continue;
        };
        if undoing.source == *source {
            pending.push((entry, undoing));
        }
    }
}

/// Deletes the blobs of `source` whose names carry `nonce` (those its undone write
/// uploaded) unless the entity references them.
///
/// # Errors
/// The store's and blob store's errors.
pub(crate) async fn undo_blobs<S: TableStore>(
    store: &S,
    blobs: &BlobStore,
    source: &EntityRef,
    nonce: &str,
) -> Result<()> {
    let mine = format!("/{nonce}-");
    let uploaded: Vec<String> = blobs
        .list(&crate::large::blobs::blob_root(source))
        .await?
        .into_iter()
        .map(|b| b.name)
        .filter(|name| name.contains(&mine))
        .collect();
    if uploaded.is_empty() {
        return Ok(());
    }
    let primary = store
        .get_if_table_exists(&source.table, &source.partition_key, &source.row_key)
        .await?;
    for name in uploaded {
        if !primary
            .as_ref()
            .is_some_and(|p| crate::large::blobs::references(p, &name))
        {
            blobs.delete(&name).await?;
        }
    }
    Ok(())
}
