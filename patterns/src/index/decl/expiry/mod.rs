//! Expiry (time to live): entities of a type declared with `#[entity(ttl = "30d")]` or an
//! `#[entity(expires)]` field carry their expiry time in `TablekitExpires`. Reads leave
//! expired entities out (point gets, queries, index look-ups, id-list members); the
//! [`Sweeper`] deletes them through the indexed delete, so their copies, id-list entries,
//! unique reservations, blobs and change events follow as for any delete.
//!
//! The sweeper does not scan tables. Every expiring primary has an entry in the **expiry
//! index**, an inter-partition index kept by the same machinery as a declared one (the
//! entry is a copy target, `TablekitExpiry`, in `<table>Expiry`, written and removed as
//! follow-up work and checked by the audit):
//!
//! - PartitionKey `yyyyMMddHH-nn`: the hour the entity expires in, and one of 16 shards
//!   chosen by a hash of the primary's keys, so that writes with the same time to live do
//!   not all append to one partition;
//! - RowKey `yyyyMMddHHmmssffffff-<hash>`: the expiry time to the microsecond, then a hash
//!   of the primary's keys.
//!
//! A pass asks for `PartitionKey lt '<the next hour>' and RowKey lt '<now>~'`: the entries
//! that have expired, in the hours up to now. Its cost follows the number of expired
//! entities (plus the entries of the current hour the service filters out), never the
//! size of the table.
//!
//! Steps and what a crash leaves: the sweeper reads an entry, reads the primary, and
//! deletes it under the ETag it read, if it has expired (a write that renewed it in
//! between wins: the delete is refused and the primary stays). The delete is one indexed
//! write: the primary and its same-partition copies go in one transaction with the
//! follow-up work that removes the rest, the entry included. A crash before the delete
//! leaves the entry for the next pass; after it, the relay finishes the follow-up work.

pub mod entry;
mod sweeper;
pub(crate) mod write;

use chrono::{DateTime, Utc};

pub use entry::{
    EXPIRY_INDEX, EXPIRY_TABLE_SUFFIX, entry_at, expired_query, expiry_table, ttl_end,
};
pub use sweeper::{SweepReport, Sweeper, SweeperOptions};

use crate::error::Result;
use crate::index::record::{CopyTarget, DeclaredLayout, Elsewhere, EntityRef, LaysOut, Target};

/// The expiry index entry of `source`, which expires at `at`: a copy without properties.
pub fn entry_target(source: &EntityRef, at: DateTime<Utc>) -> Target {
    Target::from(CopyTarget {
        index: EXPIRY_INDEX.to_owned(),
        at: entry_at(source, at),
        properties: Some(Vec::new()),
    })
}

/// How expiry lays out: a primary's entry in the expiry index is its target once it has
/// an expiry time (`Layout::expiry_target`, from the entity as written), so nothing here
/// renders one; the entries live in the type's expiry table.
struct Entries;

impl LaysOut for Entries {
    fn check(&self, declared: &DeclaredLayout) -> Result<()> {
        match declared.setting("ttl") {
            Some(_) => declared.needs::<u64>("ttl").map(drop),
            None => declared.needs::<String>("field").map(drop),
        }
    }

    fn tables(&self, _declared: &DeclaredLayout, table: &str) -> Vec<String> {
        vec![expiry_table(table)]
    }

    fn follow_up(&self, _declared: &DeclaredLayout, at: &Elsewhere<'_>) -> Option<String> {
        Some(format!("expiry: entries in table `{}`", expiry_table(at.table)))
    }
}

crate::index::registry::roles::declaration! {
    write::Expiry {
        attribute: "expiry",
        steps: [write, read],
        targets: [],
        operations: [],
        lays_out: Entries,
    }
}
