//! The simulated application's entity types: two indexed ones that between them declare
//! every feature — a same-partition index, indexes in other tables, id lists in all three
//! storages, a unique value, a denormalised field, a time to live and an `expires` field,
//! change events, blob fields and a count kept without a scan — and a large one, written through `LargeTable`. The
//! member has two versions: writers of both run at once, and a migrator rewrites the old.

use chrono::{DateTime, Utc};
use tablekit_derive::{Entity, FieldEnum};

/// A member's city: an enum field stored by name, a key part of the `by_city` index and
/// the `city` id list.
#[derive(FieldEnum, Clone, Copy, Debug, PartialEq, Eq)]
#[field_enum(rename_all = "lowercase", crate = "tablekit_core")]
pub enum City {
    /// Oslo.
    Oslo,
    /// Lima.
    Lima,
    /// Pune.
    Pune,
    /// Rome.
    Rome,
}

/// Declares a member type: the same table, kind, fields and declarations in both
/// programs, the version aside.
macro_rules! member_type {
    ($(#[$doc:meta])* $name:ident, version = $version:tt) => {
        $(#[$doc])*
        #[derive(Entity, Clone, Debug, PartialEq)]
        #[entity(
            table = "Members",
            kind = "Member",
            partition_key = "{team}",
            row_key = "m_{id:02}",
            changes = "member-changes",
            version = $version,
            crate = "tablekit_core"
        )]
        #[index(name = "nick", partition_key = "{team}", row_key = "nick_{nick}")]
        #[index(
            name = "by_city",
            table = "MembersByCity",
            partition_key = "{city}",
            row_key = "{team},{id:02}"
        )]
        #[index_entity(name = "city", key = "{city}")]
        #[index_entity(
            name = "level",
            key = "{level}",
            table = "MemberLevels",
            storage = "table"
        )]
        #[index_entity(name = "tag", key = "{tag}", storage = "blob")]
        #[unique(name = "email", key = "{email}")]
        #[count(name = "per_city", key = "{city}", shards = 2)]
        #[feed(retention = "1h", shares = 4)]
        pub struct $name {
            pub team: String,
            pub id: u32,
            pub nick: String,
            pub city: City,
            pub level: u32,
            pub tag: String,
            pub email: String,
            /// The number of the write that wrote this value (each write has its own).
            pub rev: i64,
            #[entity(expires)]
            pub ends: Option<DateTime<Utc>>,
            #[entity(blob)]
            pub photo: Option<Vec<u8>>,
        }
    };
}

member_type!(
    /// A team member: indexes of every kind, id lists in the partition, a table and
    /// blobs, a unique email, an optional end of membership, a photo in the blob store,
    /// change events; archived by the archive worker.
    Member,
    version = 2
);

member_type!(
    /// `Member` as the program before it declared it (version 1, the same fields and
    /// declarations): a writer process still running that program writes some members
    /// with it, and the migrator rewrites them to version 2.
    LegacyMember,
    version = 1
);

/// A badge: lives an hour from its last write, copies its holder's email, is found by
/// code in another table, carries a note in the blob store and publishes its changes.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Badges",
    kind = "Badge",
    partition_key = "{team}",
    row_key = "b_{id:02}",
    ttl = "1h",
    changes = "badge-changes",
    crate = "tablekit_core"
)]
#[index(
    name = "by_code",
    table = "BadgesByCode",
    partition_key = "codes",
    row_key = "{code},{team},{id:02}"
)]
pub struct Badge {
    pub team: String,
    pub id: u32,
    pub code: String,
    pub holder: u32,
    #[entity(denormalized(
        from = "Member",
        table = "Members",
        partition_key = "{team}",
        row_key = "m_{holder:02}",
        property = "email"
    ))]
    pub holder_email: Option<String>,
    /// The number of the write that wrote this value.
    pub rev: i64,
    #[entity(blob)]
    pub note: Option<Vec<u8>>,
}

/// A document: a `LargeTable` entity, its body in the blob store and, now and then, a
/// text over the table service's limit for one property (offloaded as well). Its
/// primaries carry no index record: the blob declaration is the only one that acts.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Documents",
    kind = "Document",
    partition_key = "{team}",
    row_key = "d_{id:02}",
    crate = "tablekit_core"
)]
pub struct Document {
    pub team: String,
    pub id: u32,
    /// The number of the write that wrote this value.
    pub rev: i64,
    #[entity(blob)]
    pub body: Option<Vec<u8>>,
    pub text: String,
}

/// A tally: a data series of counters, one a minute, 600 to a span of ten hours — more
/// than one entity holds, so each span is a wide entity of three chunks written in one
/// transaction.
#[derive(Entity, Clone, Debug, Default, PartialEq)]
#[entity(
    table = "Tallies",
    kind = "Tally",
    partition_key = "{team}",
    row_key = "t_{start}",
    crate = "tablekit_core"
)]
#[series(
    start = "start",
    points = "counts",
    every = "1m",
    span = "10h",
    spill = "chunks"
)]
pub struct Tally {
    pub team: String,
    pub start: DateTime<Utc>,
    pub counts: tablekit_core::typed::Points<i64>,
}
