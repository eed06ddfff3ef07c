//! Blob fields and large values in the blob store: moving them out of an entity
//! ([`offload`]) and back ([`restore`]), the addresses an entity keeps, the deletion of
//! blobs an entity stopped referencing ([`DeleteBlobs`]) and the sweep of blobs no entity
//! references. A leaf of the write path: [`crate::index`]'s blob declaration and
//! [`super::LargeTable`] both use it.

use std::collections::BTreeSet;
use std::time::Duration;

use percent_encoding::utf8_percent_encode;
use serde::{Deserialize, Serialize};
use tablekit_core::blob::BlobStore;
use tablekit_core::limits::{self, MAX_ENTITY_BYTES, MAX_PROPERTY_BYTES};
use tablekit_core::{Entity, TableStore, Value};

use crate::address::{BLOB_NAME_SET as NAME_SET, EntityRef};
use crate::consistency::outbox::ago;
use crate::consistency::{Operation, Registry};
use crate::error::{Error, Result};

/// The prefix of the property holding a property's blob address.
pub const ADDRESS_PREFIX: &str = "TablekitBlob_";

/// Deletes the blobs an entity stopped referencing (operation kind `delete_blobs`), each
/// unless the entity references it again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeleteBlobs {
    /// The entity that held the blobs' addresses.
    pub entity: EntityRef,
    /// The blobs.
    pub names: Vec<String>,
}

impl Operation for DeleteBlobs {
    const KIND: &'static str = "delete_blobs";
    const VERSION: u32 = 1;
}

impl DeleteBlobs {
    /// The blobs `old` references and `new` does not; `None` when there are none.
    pub fn dropped(entity: &EntityRef, old: Option<&Entity>, new: Option<&Entity>) -> Option<Self> {
        let kept: Vec<String> = new
            .map(|e| addresses(e).into_iter().map(|(_, n, _)| n).collect())
            .unwrap_or_default();
        let names: Vec<String> = old
            .map(addresses)
            .unwrap_or_default()
            .into_iter()
            .map(|(_, name, _)| name)
            .filter(|name| !kept.contains(name))
            .collect();
        (!names.is_empty()).then(|| DeleteBlobs {
            entity: entity.clone(),
            names,
        })
    }

    /// Deletes the blobs the entity does not reference. Returns how many were deleted.
    ///
    /// # Errors
    /// The store's and the blob store's errors.
    pub async fn apply<S: TableStore>(&self, store: &S, blobs: &BlobStore) -> Result<usize> {
        let holder = store
            .get_if_table_exists(
                &self.entity.table,
                &self.entity.partition_key,
                &self.entity.row_key,
            )
            .await?;
        let mut deleted = 0;
        for name in &self.names {
            if holder.as_ref().is_some_and(|h| references(h, name)) {
                continue;
            }
            if blobs.delete(name).await? {
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// Registers the handler of this operation in `registry`.
    pub fn register<S: TableStore + Clone + 'static>(
        registry: Registry,
        store: S,
        blobs: BlobStore,
    ) -> Registry {
        registry.register(move |operation: DeleteBlobs| {
            let (store, blobs) = (store.clone(), blobs.clone());
            async move {
                operation.apply(&store, &blobs).await?;
                Ok(())
            }
        })
    }
}

/// The blob folder of one property of one entity.
pub fn blob_folder(entity: &EntityRef, property: &str) -> String {
    format!(
        "large/{}/{}/{}/{}/",
        segment(&entity.table),
        segment(&entity.partition_key),
        segment(&entity.row_key),
        segment(property)
    )
}

/// The folder of every blob of one entity.
pub fn blob_root(entity: &EntityRef) -> String {
    format!(
        "large/{}/{}/{}/",
        segment(&entity.table),
        segment(&entity.partition_key),
        segment(&entity.row_key),
    )
}

/// A key as a blob-name segment: percent-encoded, and `~` (which encoding never
/// produces) for the empty key.
fn segment(text: &str) -> String {
    if text.is_empty() {
        "~".to_owned()
    } else {
        utf8_percent_encode(text, NAME_SET).to_string()
    }
}

/// The blob addresses an entity holds: (property, blob name, whether the value is text).
pub fn addresses(entity: &Entity) -> Vec<(String, String, bool)> {
    entity
        .properties
        .iter()
        .filter_map(|(name, value)| {
            let property = name.strip_prefix(ADDRESS_PREFIX)?;
            let Value::String(address) = value else {
                return None;
            };
            let (kind, blob) = address.split_once(':')?;
            Some((property.to_owned(), blob.to_owned(), kind == "s"))
        })
        .collect()
}

/// Whether an entity holds the address of `blob`.
pub fn references(entity: &Entity, blob: &str) -> bool {
    addresses(entity).iter().any(|(_, name, _)| name == blob)
}

/// What a sweep found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Blobs looked at.
    pub blobs: usize,
    /// Blobs no entity referenced, deleted.
    pub deleted: usize,
    /// Unreferenced blobs younger than the grace period, left.
    pub young: usize,
}

/// Moves the `declared` blob properties, values over 64 KiB and, while the entity would
/// pass 1 MiB, its largest values to the blob store; the entity keeps their addresses.
///
/// # Errors
/// The blob store's errors.
pub async fn offload(
    blobs: &BlobStore,
    table: &str,
    declared: &[&str],
    entity: &mut Entity,
) -> Result<()> {
    let nonce = tablekit_core::random::uuid().simple().to_string();
    offload_with_nonce(blobs, table, declared, entity, &nonce[..12]).await
}

/// Whether [`offload`] would move any value of `entity` to the blob store: a declared
/// field it holds, a value over the property limit, or an entity over the entity limit.
pub fn would_offload(declared: &[&str], entity: &Entity) -> bool {
    entity.properties.iter().any(|(name, value)| {
        matches!(value, Value::Binary(_) | Value::String(_))
            && (declared.contains(&name.as_str()) || limits::value_size(value) > MAX_PROPERTY_BYTES)
    }) || limits::entity_size(entity) > MAX_ENTITY_BYTES
}

/// As [`offload`], naming each blob after `nonce` (a part unique to the write, which an
/// intent can name before the upload: see [`crate::index::reclaim`]).
///
/// # Errors
/// The blob store's errors.
pub async fn offload_with_nonce(
    blobs: &BlobStore,
    table: &str,
    declared: &[&str],
    entity: &mut Entity,
    nonce: &str,
) -> Result<()> {
    let at = EntityRef::new(table, &entity.partition_key, &entity.row_key);
    let declared: BTreeSet<&str> = declared.iter().copied().collect();
    let mut chosen: Vec<String> = entity
        .properties
        .iter()
        .filter(|(name, value)| {
            matches!(value, Value::Binary(_) | Value::String(_))
                && (declared.contains(name.as_str())
                    || limits::value_size(value) > MAX_PROPERTY_BYTES)
        })
        .map(|(name, _)| name.clone())
        .collect();
    // Then the largest values, until the entity fits.
    let mut rest: Vec<(usize, String)> = entity
        .properties
        .iter()
        .filter(|(name, value)| {
            matches!(value, Value::Binary(_) | Value::String(_)) && !chosen.contains(name)
        })
        .map(|(name, value)| (limits::value_size(value), name.clone()))
        .collect();
    rest.sort();
    let mut size = limits::entity_size(entity);
    for name in &chosen {
        size -= entity.properties.get(name).map_or(0, limits::value_size);
    }
    // An address costs its property name and the blob name, in UTF-16.
    let address_bytes = 2 * (blob_folder(&at, "").len() + 160);
    while size + address_bytes * chosen.len() > MAX_ENTITY_BYTES {
        let Some((value_size, name)) = rest.pop() else {
            break;
        };
        size -= value_size;
        chosen.push(name);
    }
    for name in chosen {
        let Some(value) = entity.properties.shift_remove(&name) else {
            continue;
        };
        let (bytes, kind) = match value {
            Value::Binary(b) => (b, "b"),
            Value::String(s) => (s.into_bytes(), "s"),
            other => {
                entity.properties.insert(name, other);
                continue;
            }
        };
        let blob = blobs
            // The content's hash names the blob, after a part unique to this write: a
            // blob is never shared by two writes, so deleting one a write replaced can
            // never take one a later write uses.
            .put_content_addressed(&format!("{}{nonce}-", blob_folder(&at, &name)), bytes)
            .await?;
        entity.properties.insert(
            format!("{ADDRESS_PREFIX}{name}"),
            Value::String(format!("{kind}:{blob}")),
        );
    }
    Ok(())
}

/// Puts the offloaded properties back.
///
/// # Errors
/// The blob store's errors; [`Error::Malformed`] for a missing blob.
pub async fn restore(blobs: &BlobStore, table: &str, mut entity: Entity) -> Result<Entity> {
    for (property, name, text) in addresses(&entity) {
        let bytes = blobs.get(&name).await?.ok_or_else(|| {
            Error::malformed(
                format!("{table}({}, {})", entity.partition_key, entity.row_key),
                format!("the blob `{name}` of `{property}` is missing"),
            )
        })?;
        let value = if text {
            Value::String(
                String::from_utf8(bytes)
                    .map_err(|e| Error::malformed(format!("blob `{name}`"), e))?,
            )
        } else {
            Value::Binary(bytes)
        };
        entity
            .properties
            .shift_remove(&format!("{ADDRESS_PREFIX}{property}"));
        entity.properties.insert(property, value);
    }
    Ok(entity)
}

/// Deletes the blobs of `table`'s entities that no entity references and that are older
/// than `grace` (younger ones may belong to a write in progress): what a write that
/// failed, or whose process died, after uploading its blobs left. It lists the table's
/// blob folder.
///
/// # Errors
/// The store's and blob store's errors.
pub async fn sweep_unreferenced<S: TableStore>(
    store: &S,
    blobs: &BlobStore,
    table: &str,
    grace: Duration,
) -> Result<SweepReport> {
    let folder = format!("large/{}/", utf8_percent_encode(table, NAME_SET));
    let cutoff = ago(grace);
    let mut report = SweepReport::default();
    for blob in blobs.list(&folder).await? {
        report.blobs += 1;
        let Some(rest) = blob.name.strip_prefix(&folder) else {
            continue;
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let [pk, rk, ..] = parts.as_slice() else {
            continue;
        };
        let decode = |s: &str| {
            if s == "~" {
                return Ok(String::new());
            }
            percent_encoding::percent_decode_str(s)
                .decode_utf8()
                .map(|c| c.into_owned())
        };
        let (Ok(pk), Ok(rk)) = (decode(pk), decode(rk)) else {
            continue;
        };
        let entity = store.get_if_table_exists(table, &pk, &rk).await?;
        if entity.is_some_and(|e| references(&e, &blob.name)) {
            continue;
        }
        if blob.last_modified > cutoff {
            report.young += 1;
            continue;
        }
        if blobs.delete(&blob.name).await? {
            report.deleted += 1;
        }
    }
    Ok(report)
}
