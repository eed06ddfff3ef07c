//! Unique values across partitions (`#[unique(name = "email", key = "{email}")]`): no two
//! entities of a type hold the same value at once, whatever their partitions.
//!
//! A table store only guarantees uniqueness of keys, and an entity group transaction only
//! spans one partition. So each value has a **reservation**, an entity keyed by the value
//! (PartitionKey the rendered value, RowKey the unique value's name) in a reservation
//! table (`<table>Unique` unless declared), naming its holder. The primary's index record
//! lists the reservations it holds ([`UniqueTarget`]); a reservation is valid while its
//! holder's record lists it. The steps of a write that takes a new value:
//!
//! | step | a crash after it leaves | finished by |
//! |---|---|---|
//! | 1. reserve: insert the reservation (holder, the write's version, a lease) | a reservation its holder does not list | a writer meeting it after the lease takes it over; the audit deletes it |
//! | 2. commit the primary, listing the value, and the release of the old value as follow-up work | the old value still reserved | the relay publishes the release |
//! | 3. release: delete the old reservation unless its holder lists it again | — | — |
//!
//! The rules that keep those steps safe under concurrency:
//! - **Taken.** A writer that meets another holder's reservation reads the holder: if
//!   its record lists the reservation, or the reservation's lease has not run out (the
//!   holder's write may be in flight), the value is taken ([`Error::ValueTaken`], nothing
//!   written). Otherwise the reservation is dead: the writer first fences every write of
//!   the holder still pending that reserves it (claims its intent, as the relay does
//!   after its grace, so a write stalled past its lease can no longer commit), reads the
//!   holder's record again, and takes the reservation over under its ETag, so of two
//!   writers taking over one of them wins.
//! - **Own.** A reservation that already names the writing primary (a value changed back,
//!   a retry) is renewed under its ETag with the new write's version and lease.
//! - **Release.** A release deletes a reservation only when it still names the primary,
//!   no write of the primary that reserves it is pending (its intent recorded, neither
//!   committed nor undone: a later write that took the value again) and the primary's
//!   record does not list it; the delete is conditional on the ETag read, so a renewal
//!   between the check and the delete makes the release look again.
//! - **Lease.** A writer's reservation must outlive the time from its reservation to its
//!   commit; the lease (30 s by default, [`IndexedTableOptions::unique_lease`]) is renewed when
//!   a write is planned again after half of it ran out.
//!
//! [`IndexedTableOptions::unique_lease`]: crate::index::IndexedTableOptions::unique_lease

mod apply;
mod audit;
pub(crate) mod record;
pub(crate) mod write;

use std::time::Duration;

use chrono::{DateTime, Utc};
use tablekit_core::limits::KeyKind;
use tablekit_core::{Entity, ErrorKind, IfMatch, TableStore, Value};

use crate::consistency::RetryPolicy;
use crate::error::{Error, Result};
use crate::index::record::{
    DeclaredLayout, Elsewhere, EntityRef, IndexRecord, LaysOut, Primary, Target,
};
use crate::index::stored::delete_unless_changed;
use record::UniqueTarget;

/// The kind recorded on reservations.
pub const RESERVATION_KIND: &str = "TablekitReservation";
/// The property naming a reservation's holder (JSON [`EntityRef`]).
pub const HOLDER_PROPERTY: &str = "TablekitHolder";
/// The property holding the version of the holder's write that made or renewed the
/// reservation.
pub const HOLDER_VERSION_PROPERTY: &str = "TablekitHolderVersion";
/// The property holding the end of a reservation's lease.
pub const LEASE_PROPERTY: &str = "TablekitLease";
/// The id of the intent of the write that made or renewed a reservation.
const INTENT_PROPERTY: &str = "TablekitIntent";
/// How long a reservation protects a write in flight, unless the table says otherwise.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// A stored reservation.
#[derive(Clone, Debug, PartialEq)]
pub struct Reservation {
    /// Where it is.
    pub at: EntityRef,
    /// The unique value's name.
    pub name: String,
    /// The entity it names.
    pub holder: EntityRef,
    /// The version of the holder's write that made or last renewed it.
    pub version: i64,
    /// When its lease ends.
    pub lease_until: DateTime<Utc>,
    /// The id of the intent of the write that made or last renewed it, if it recorded
    /// one (see [`crate::index::reclaim`]).
    pub intent: Option<String>,
    /// Its ETag.
    pub etag: Option<tablekit_core::ETag>,
}

impl Reservation {
    /// Reads a stored reservation.
    ///
    /// # Errors
    /// [`Error::Malformed`] when the entity is not a reservation.
    pub fn read(table: &str, entity: &Entity) -> Result<Self> {
        let what = || {
            format!(
                "reservation {table}({}, {})",
                entity.partition_key, entity.row_key
            )
        };
        let holder = match entity.properties.get(HOLDER_PROPERTY) {
            Some(Value::String(json)) => {
                serde_json::from_str(json).map_err(|e| Error::malformed(what(), e))?
            }
            _ => return Err(Error::malformed(what(), "no TablekitHolder")),
        };
        let version = match entity.properties.get(HOLDER_VERSION_PROPERTY) {
            Some(Value::Int64(v)) => *v,
            _ => return Err(Error::malformed(what(), "no TablekitHolderVersion")),
        };
        let lease_until = match entity.properties.get(LEASE_PROPERTY) {
            Some(Value::DateTime(t)) => *t,
            _ => return Err(Error::malformed(what(), "no TablekitLease")),
        };
        Ok(Reservation {
            at: EntityRef::new(table, &entity.partition_key, &entity.row_key),
            name: entity.row_key.clone(),
            holder,
            version,
            lease_until,
            intent: match entity.properties.get(INTENT_PROPERTY) {
                Some(Value::String(id)) => Some(id.clone()),
                _ => None,
            },
            etag: entity.etag.clone(),
        })
    }

    /// The entity of a reservation.
    ///
    /// # Errors
    /// [`Error::Encode`] when the holder does not encode.
    pub fn entity(&self) -> Result<Entity> {
        let mut entity = Entity::new(&self.at.partition_key, &self.at.row_key);
        entity.properties.insert(
            tablekit_core::typed::DEFAULT_KIND_PROPERTY.to_owned(),
            Value::String(RESERVATION_KIND.to_owned()),
        );
        entity.properties.insert(
            HOLDER_PROPERTY.to_owned(),
            Value::String(crate::error::json("a reservation's holder", &self.holder)?),
        );
        entity.properties.insert(
            HOLDER_VERSION_PROPERTY.to_owned(),
            Value::Int64(self.version),
        );
        entity
            .properties
            .insert(LEASE_PROPERTY.to_owned(), Value::DateTime(self.lease_until));
        if let Some(intent) = &self.intent {
            entity
                .properties
                .insert(INTENT_PROPERTY.to_owned(), Value::String(intent.clone()));
        }
        Ok(entity)
    }

    /// Whether its lease still protects a write in flight at `now`.
    pub fn leased(&self, now: DateTime<Utc>) -> bool {
        self.lease_until > now
    }

    /// The value reserved, as rendered (the PartitionKey).
    pub fn value(&self) -> &str {
        &self.at.partition_key
    }

    fn taken(&self, in_flight: bool) -> Error {
        Error::ValueTaken {
            name: self.name.clone(),
            value: self.value().to_owned(),
            holder: Box::new(self.holder.clone()),
            in_flight,
        }
    }
}

/// The target a reservation stands for in its holder's record.
fn target_of(at: &EntityRef) -> Target {
    Target::from(UniqueTarget {
        name: at.row_key.clone(),
        at: at.clone(),
    })
}

/// The reservation at `at`, if any.
///
/// # Errors
/// The store's errors; [`Error::Malformed`].
pub async fn read<S: TableStore>(store: &S, at: &EntityRef) -> Result<Option<Reservation>> {
    store
        .get_if_table_exists(&at.table, &at.partition_key, &at.row_key)
        .await?
        .map(|e| Reservation::read(&at.table, &e))
        .transpose()
}

/// Whether `holder`'s stored record lists the reservation at `at`.
///
/// # Errors
/// The store's errors; [`Error::Malformed`] for a record that does not read.
pub async fn holder_lists<S: TableStore>(
    store: &S,
    holder: &EntityRef,
    at: &EntityRef,
) -> Result<bool> {
    let primary = store
        .get_if_table_exists(&holder.table, &holder.partition_key, &holder.row_key)
        .await?;
    let Some(primary) = primary else {
        return Ok(false);
    };
    Ok(IndexRecord::read(&primary)?.is_some_and(|r| r.targets.contains(&target_of(at))))
}

/// Reserves the value at `at` for `holder`'s write at `version`, with a lease until
/// `now + lease` (step 1): inserts the reservation, renews one that already names
/// `holder`, or takes over a dead one.
///
/// # Errors
/// [`Error::ValueTaken`] when another entity holds the value or has it in flight;
/// [`Error::Contention`] when the reservation kept changing; the store's errors.
pub async fn reserve<S: TableStore>(
    store: &S,
    at: &EntityRef,
    holder: &EntityRef,
    version: i64,
    lease: Duration,
) -> Result<()> {
    reserve_for(store, at, holder, version, lease, None).await
}

/// As [`reserve`], for a write that recorded the intent `intent` (its id): the
/// reservation names it, so only that intent's undoing releases it.
///
/// # Errors
/// As [`reserve`].
pub async fn reserve_for<S: TableStore>(
    store: &S,
    at: &EntityRef,
    holder: &EntityRef,
    version: i64,
    lease: Duration,
    intent: Option<&str>,
) -> Result<()> {
    let lease = chrono::Duration::from_std(lease).unwrap_or(chrono::Duration::MAX);
    // A race lost is read again, after the policy's backoff.
    let mut retry = RetryPolicy::default().start();
    loop {
        retry.next(|| format!("reservation {at}")).await?;
        let now = tablekit_core::clock::now();
        let mine = Reservation {
            at: at.clone(),
            name: at.row_key.clone(),
            holder: holder.clone(),
            version,
            lease_until: now.checked_add_signed(lease).unwrap_or(now),
            intent: intent.map(str::to_owned),
            etag: None,
        };
        match store.insert(&at.table, mine.entity()?).await {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let Some(found) = read(store, at).await? else {
            continue;
        };
        let mut renewed = mine.clone();
        if found.holder == *holder {
            // Never below a newer write's version: a release between the two versions
            // would take the newer write's value away.
            renewed.version = version.max(found.version);
        } else {
            if found.leased(now) {
                // The holder's write may be in flight.
                if holder_lists(store, &found.holder, at).await? {
                    return Err(found.taken(false));
                }
                return Err(found.taken(true));
            }
            // The lease ran out, but a write stalled past it may still commit: every
            // pending write of the holder that reserves the value is fenced first (its
            // intent claimed, as the relay would after its grace: its commit can no
            // longer land). Then the holder's record decides.
            fence_pending(store, &found.holder, at).await?;
            if holder_lists(store, &found.holder, at).await? {
                return Err(found.taken(false));
            }
        }
        // Our own reservation to renew, or a dead one to take over: under its ETag.
        let if_match = found.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        match store.replace(&at.table, renewed.entity()?, if_match).await {
            Ok(_) => return Ok(()),
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::PreconditionFailed | ErrorKind::NotFound
                ) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Releases the reservation at `at` a write of `holder` that never committed may have
/// made (the undoing of that write): unless a write of the holder that reserves it is
/// pending or the holder lists it, whichever write tagged it last. Running it twice, or
/// late, changes nothing.
///
/// # Errors
/// The store's errors.
pub async fn release_intent<S: TableStore>(
    store: &S,
    at: &EntityRef,
    holder: &EntityRef,
) -> Result<bool> {
    let Some(found) = read(store, at).await? else {
        return Ok(false);
    };
    if found.holder != *holder || wanted_in_flight(store, holder, at).await? {
        return Ok(false);
    }
    // The holder's committed value lists it: it stays, as the failed write left it. Its
    // version may be newer than the holder's committed one: the holder's later release
    // still applies, since the write that set it is no longer pending (see [`release`]).
    if holder_lists(store, holder, at).await? {
        return Ok(false);
    }
    // Renewed or released meanwhile: left as it is.
    let if_match = found.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
    delete_unless_changed(store, at, if_match).await
}

/// Releases the reservation at `at` for `holder`, whose write at `version` dropped the
/// value (step 3): deletes it unless it names another entity, was renewed by a newer
/// write, or is listed by the holder again. Running it twice, or late, changes nothing.
///
/// # Errors
/// [`Error::Contention`] when the reservation kept changing; the store's errors.
pub async fn release<S: TableStore>(
    store: &S,
    at: &EntityRef,
    holder: &EntityRef,
    version: i64,
) -> Result<bool> {
    let mut retry = RetryPolicy::default().start();
    loop {
        retry
            .next(|| format!("release of reservation {at}"))
            .await?;
        let Some(found) = read(store, at).await? else {
            return Ok(false);
        };
        // A newer write that took the value again: pending (its intent), or without an
        // intent (a reservation made before intents) at a newer version.
        if found.holder != *holder
            || (found.intent.is_none() && found.version > version)
            || wanted_in_flight(store, holder, at).await?
            || holder_lists(store, holder, at).await?
        {
            return Ok(false);
        }
        let if_match = found.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
        match store
            .delete(&at.table, &at.partition_key, &at.row_key, if_match)
            .await
        {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
            Err(e) if e.kind() == ErrorKind::PreconditionFailed => {}
            Err(e) => return Err(e),
        }
    }
}

/// Whether a write of `holder` is in flight that reserves `at`: its intent recorded and
/// still pending (neither committed nor undone), so it may yet commit listing the value.
/// Each write tags the reservation with its intent, and a concurrent write of the same
/// holder re-tags it: so every pending intent of the holder is read (its partition's
/// outbox entries, its pending work, not its entities). Asked before the holder's
/// record: a write that commits in between is then seen listing the value.
async fn wanted_in_flight<S: TableStore>(
    store: &S,
    holder: &EntityRef,
    at: &EntityRef,
) -> Result<bool> {
    Ok(!pending_reserving(store, holder, at).await?.is_empty())
}

/// The pending intent entries of `holder`'s writes that reserve `at`.
async fn pending_reserving<S: TableStore>(
    store: &S,
    holder: &EntityRef,
    at: &EntityRef,
) -> Result<Vec<Entity>> {
    Ok(crate::index::reclaim::pending_writes(store, holder)
        .await?
        .into_iter()
        .filter(|(_, undoing)| undoing.reservations.contains(at))
        .map(|(entry, _)| entry)
        .collect())
}

/// Claims every pending intent of `holder` whose write reserves `at` (see
/// [`outbox::claim_intent`](crate::consistency::outbox::claim_intent)): none of those
/// writes can commit after this. The claimed intents become ordinary work the relay
/// publishes (their undoing).
async fn fence_pending<S: TableStore>(store: &S, holder: &EntityRef, at: &EntityRef) -> Result<()> {
    for entry in pending_reserving(store, holder, at).await? {
        if let Some(etag) = entry.etag.clone() {
            crate::consistency::outbox::claim_intent(store, &holder.table, &entry, etag).await?;
        }
    }
    Ok(())
}

/// Deletes a dead reservation: one whose holder does not list it and whose lease ran out
/// at `now` (what a crash between steps 1 and 2 leaves). Returns whether it deleted.
///
/// # Errors
/// The store's errors.
pub async fn reclaim<S: TableStore>(
    store: &S,
    found: &Reservation,
    now: DateTime<Utc>,
) -> Result<bool> {
    if found.leased(now)
        || wanted_in_flight(store, &found.holder, &found.at).await?
        || holder_lists(store, &found.holder, &found.at).await?
    {
        return Ok(false);
    }
    let if_match = found.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
    delete_unless_changed(store, &found.at, if_match).await
}

/// What names a type's default reservation table after its primaries' table.
pub const RESERVATION_TABLE_SUFFIX: &str = "Unique";

/// The reservation table of the unique value `declared` for primaries in `table`:
/// `<table>Unique` unless it names its own.
fn reservation_table(declared: &DeclaredLayout, table: &str) -> String {
    declared
        .table
        .clone()
        .unwrap_or_else(|| format!("{table}{RESERVATION_TABLE_SUFFIX}"))
}

/// How `#[unique]` lays out: a primary reserves its value in the reservation table.
struct Reservations;

impl LaysOut for Reservations {
    fn check(&self, declared: &DeclaredLayout) -> Result<()> {
        declared.needs_template("key").map(drop)
    }

    fn targets(&self, declared: &DeclaredLayout, primary: &Primary<'_>) -> Result<Vec<Target>> {
        let key = declared.needs_template("key")?;
        Ok(vec![Target::from(UniqueTarget {
            name: declared.name.clone(),
            at: EntityRef::new(
                reservation_table(declared, &primary.source.table),
                (primary.render)(key, KeyKind::PartitionKey)?,
                declared.name.clone(),
            ),
        })])
    }

    fn tables(&self, declared: &DeclaredLayout, table: &str) -> Vec<String> {
        vec![reservation_table(declared, table)]
    }

    fn follow_up(&self, declared: &DeclaredLayout, at: &Elsewhere<'_>) -> Option<String> {
        Some(format!(
            "unique value `{}`: reservations in table `{}`, released after the write",
            declared.name,
            reservation_table(declared, at.table)
        ))
    }
}

crate::index::registry::roles::declaration! {
    write::Unique {
        attribute: "unique",
        steps: [write, upkeep],
        targets: [record::UniqueTarget],
        operations: [record::ReleaseUnique, record::ClaimUnique],
        lays_out: Reservations,
    }
}
