//! Counts kept without a scan (`#[count(name = "by_status", key = "{status}", shards =
//! 4)]`): for each value of its key, the number of entities of the type that have it,
//! eventually consistent through the worker like an index in another table, and exact
//! once the work is drained.
//!
//! **Layout.** For each value and shard, one partition of the counts' table
//! (`<table>Counts` unless declared): PartitionKey `<count>|<value>|<shard:02>`, holding
//! a *member row* per primary counted there (RowKey: the primary's table and keys,
//! percent-encoded and joined by `,`) and one *counter row* (RowKey `~count`, property
//! `Count`). A primary's shard is a hash of its keys, so its additions and removals meet
//! in one partition; a hot value is spread over `shards` partitions, summed on read.
//!
//! **Why it is exact under redelivery and crashes.** A naive increment is not: applied
//! twice, it counts twice. Here the counter never changes alone:
//! - every change of a member row and of its shard's counter is one entity group
//!   transaction (insert the member row and add one, or delete it and take one away),
//!   each under the ETag the worker read it at, so in every partition the counter equals
//!   the number of member rows (a crash between steps leaves either both or neither; a
//!   second worker's change makes the first's fail and read again);
//! - the one operation (`SyncCount`) does not say "add" or "remove": it reads the
//!   primary and makes the member row agree with its record — there when the record
//!   lists it, gone otherwise — so applying it twice, late, or out of order does what
//!   the primary says at that time;
//! - it reads the shard's counter row first, then the member row and the primary, and
//!   commits under the counter's ETag even when the member row already agrees (the
//!   counter written back unchanged, a *touch*): the applications of one shard are
//!   ordered by their commits, each having read the primary after the commit before it,
//!   so once the operation of the primary's last write that changed the membership has
//!   committed, no older delivery — one that read the primary before that write and
//!   stalled, or failed half way while another delivery settled its message — can
//!   commit a member row behind it (its commit fails on the counter's ETag and it reads
//!   again).
//!
//! So once every operation is applied, each member row exists exactly when its primary
//! lists it, and each counter is the number of its partition's member rows: the sum over
//! the shards is the number of live entities with the value. The audit checks both sides
//! (a primary's member row, a member row's primary, a counter against its member rows)
//! and repairs what it finds; a backfill counts the entities stored before the
//! declaration.
//!
//! **Costs.** A write whose value changes hands on one operation per changed membership,
//! in its outbox entry (no round trip of its own); the worker's apply reads the counter
//! row, then the member row and the primary at once, and writes one transaction (three
//! round trips; a touch when nothing changes); a read is one point read per shard, all at
//! once.

mod apply;
mod audit;
mod read;
pub(crate) mod record;
pub(crate) mod write;

use percent_encoding::utf8_percent_encode;
use tablekit_core::limits::KeyKind;

pub use read::{Count, Counting, Pending};
pub use record::{CountTarget, SyncCount};

use crate::address::BLOB_NAME_SET;
use crate::error::{Error, Result};
use crate::index::record::{Elsewhere, LaysOut, Primary};
use crate::index::record::{DeclaredLayout, EntityRef, Target};

/// The attribute.
pub(crate) const ATTRIBUTE: &str = "count";
/// What names a count's default table after its primaries' table.
pub const COUNT_TABLE_SUFFIX: &str = "Counts";
/// The RowKey of a shard's counter row.
pub const COUNTER_ROW_KEY: &str = "~count";
/// The property of a counter row holding the count.
pub const COUNT_PROPERTY: &str = "Count";
/// The property of a member row naming its primary (JSON).
pub const MEMBER_OF_PROPERTY: &str = "TablekitMemberOf";
/// The marker of a member row.
pub const MEMBER_KIND: &str = "TablekitCountMember";
/// The marker of a counter row.
pub const COUNTER_KIND: &str = "TablekitCounter";

/// The counts' table of `declared`, for primaries in `table`.
pub fn count_table(declared: &DeclaredLayout, table: &str) -> String {
    declared
        .table
        .clone()
        .unwrap_or_else(|| format!("{table}{COUNT_TABLE_SUFFIX}"))
}

/// The shards of `declared` (1 unless declared).
///
/// # Errors
/// [`Error::Malformed`] for a `shards` setting that is not a number from 1 to 64.
pub fn shards(declared: &DeclaredLayout) -> Result<u32> {
    match declared.setting("shards") {
        None => Ok(1),
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=64).contains(n))
            .ok_or_else(|| {
                Error::malformed(
                    format!("count `{}`", declared.name),
                    format!("shards `{text}` is not a number from 1 to 64"),
                )
            }),
    }
}

/// The partition of shard `shard` of `value`.
pub fn shard_partition(count: &str, value: &str, shard: u32) -> String {
    format!("{count}|{value}|{shard:02}")
}

/// The shard a primary is counted in: a hash of its table and keys (FNV-1a, stable
/// across processes and releases).
pub fn shard_of(source: &EntityRef, shards: u32) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [&source.table, &source.partition_key, &source.row_key] {
        for byte in part.as_bytes().iter().chain([&0xff]) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    u32::try_from(hash % u64::from(shards.max(1))).unwrap_or(0)
}

/// The RowKey of a primary's member row.
pub fn member_row_key(source: &EntityRef) -> String {
    let encode = |text: &str| utf8_percent_encode(text, BLOB_NAME_SET).to_string();
    format!(
        "{},{},{}",
        encode(&source.table),
        encode(&source.partition_key),
        encode(&source.row_key)
    )
}

/// How a count lays out from the type's layout.
struct Layout;

impl LaysOut for Layout {
    fn check(&self, declared: &DeclaredLayout) -> Result<()> {
        declared.needs_template("key")?;
        shards(declared).map(drop)
    }

    fn targets(&self, declared: &DeclaredLayout, primary: &Primary<'_>) -> Result<Vec<Target>> {
        let source = primary.source;
        let key = declared.needs_template("key")?;
        let value = (primary.render)(key, KeyKind::PartitionKey)?;
        let shard = shard_of(source, shards(declared)?);
        let at = EntityRef::new(
            count_table(declared, &source.table),
            shard_partition(&declared.name, &value, shard),
            member_row_key(source),
        );
        Ok(vec![Target::from(CountTarget {
            count: declared.name.clone(),
            at,
        })])
    }

    fn tables(&self, declared: &DeclaredLayout, table: &str) -> Vec<String> {
        vec![count_table(declared, table)]
    }

    fn follow_up(&self, declared: &DeclaredLayout, at: &Elsewhere<'_>) -> Option<String> {
        Some(format!(
            "count `{}`: members and counters in table `{}`",
            declared.name,
            count_table(declared, at.table)
        ))
    }
}

crate::index::registry::roles::declaration! {
    write::Counts {
        attribute: ATTRIBUTE,
        steps: [write, upkeep],
        targets: [CountTarget],
        operations: [SyncCount],
        lays_out: Layout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_primary_always_lands_in_the_same_shard() {
        let source = EntityRef::new("Orders", "c1", "o1");
        let first = shard_of(&source, 8);
        assert!(first < 8);
        assert_eq!(shard_of(&source, 8), first);
        assert_eq!(shard_of(&source, 1), 0);
        let spread: std::collections::BTreeSet<u32> = (0..200)
            .map(|i| shard_of(&EntityRef::new("Orders", "c1", format!("o{i}")), 8))
            .collect();
        assert_eq!(spread.len(), 8, "200 primaries use every shard");
    }

    #[test]
    fn member_rows_of_different_primaries_differ() {
        let a = member_row_key(&EntityRef::new("T", "a,b", "c"));
        let b = member_row_key(&EntityRef::new("T", "a", "b,c"));
        assert_ne!(a, b);
        assert!(a.as_str() < COUNTER_ROW_KEY && b.as_str() < COUNTER_ROW_KEY);
    }
}
