//! Expiry (`#[entity(ttl = "…")]` and `#[entity(expires)]`) on every backend (memory, a
//! SQLite file and, with the `azure` feature, Azurite), with a hand-moved clock: reads
//! never return an expired entity (point get, queries, projections, index look-ups in the
//! partition and in another table, id-list members); the sweeper deletes expired
//! entities through the indexed delete, so their copies, id-list entries, unique
//! reservations, blobs and expiry entries go with them, and the audit stays clean; an
//! entity renewed before the sweep stays; the sweeper reads only the expired entries,
//! however many others the table holds; a sweeper process killed right after each of its
//! writes leaves, once the relay and another pass have run, exactly the live entities
//! with their copies and nothing of the expired one.

#![allow(missing_docs)]

mod support;

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use tablekit::core::AnyStore;
use tablekit::core::blob::BlobStore;
use tablekit::core::clock::ManualClock;
use tablekit::core::fault::FaultyStore;
use tablekit::patterns::consistency::outbox;
use tablekit::patterns::index::internals::expiry::{EXPIRY_INDEX, expiry_table};
use tablekit::patterns::index::record::is_tombstone;
use tablekit::patterns::index::{AuditOptions, InlineSink, OutboxSink, Relay, Sweeper, handlers};
use tablekit::prelude::*;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Sessions",
    kind = "Session",
    partition_key = "{user}",
    row_key = "s_{id:04}",
    ttl = "1h"
)]
#[index(name = "local", partition_key = "{user}", row_key = "tok_{token}")]
#[index(
    name = "by_token",
    table = "SessionsByToken",
    partition_key = "tokens",
    row_key = "{token}",
    properties = ["user"]
)]
#[index_entity(
    name = "device",
    key = "{device}",
    table = "SessionDevices",
    storage = "table"
)]
#[unique(name = "token", key = "{token}")]
struct Session {
    user: String,
    id: u32,
    token: String,
    device: String,
    #[entity(blob)]
    note: Option<Vec<u8>>,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Invites",
    kind = "Invite",
    partition_key = "{team}",
    row_key = "{code}"
)]
struct Invite {
    team: String,
    code: String,
    #[entity(expires)]
    ends: Option<DateTime<Utc>>,
}

#[derive(tablekit::Projection, Debug)]
struct TokenOnly {
    #[allow(dead_code)]
    token: String,
}

fn session(user: &str, id: u32, token: &str) -> Session {
    Session {
        user: user.to_owned(),
        id,
        token: token.to_owned(),
        device: "phone".to_owned(),
        note: (id == 1).then(|| vec![7; 100_000]),
    }
}

fn start() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-11-24T10:15:00Z")
        .expect("time")
        .with_timezone(&Utc)
}

struct Fixture {
    clock: ManualClock,
    blobs: BlobStore,
    sessions: IndexedTable<Session, AnyStore>,
    sweeper: Sweeper<AnyStore>,
}

async fn fixture(store: AnyStore) -> Fixture {
    let clock = ManualClock::new(start());
    let blobs = BlobStore::memory();
    let sessions = IndexedTable::<Session, _>::options()
        .blobs(blobs.clone())
        .inline_apply()
        .clock(clock.shared())
        .build(store.clone())
        .expect("options");
    sessions.create().await.expect("open");
    let sink: Arc<dyn OutboxSink> = Arc::new(InlineSink::new(handlers(
        store.clone(),
        Some(blobs.clone()),
    )));
    let sweeper = Sweeper::options()
        .sink(sink)
        .blobs(blobs.clone())
        .clock(clock.shared())
        .build(store);
    Fixture {
        clock,
        blobs,
        sessions,
        sweeper,
    }
}

impl Fixture {
    /// Asserts that an audit of the sessions finds every copy where it belongs.
    async fn assert_clean(&self) {
        let audit = self
            .sessions
            .audit(&AuditOptions::default())
            .await
            .expect("audit");
        assert!(audit.is_clean(), "{audit:?}");
    }

    /// The sessions through a table with no sink: a write's follow-up work (its copies
    /// in other tables, its expiry entry) waits in the outbox for the relay.
    fn deferred(&self, store: &AnyStore) -> IndexedTable<Session, AnyStore> {
        IndexedTable::<Session, _>::options()
            .blobs(self.blobs.clone())
            .clock(self.clock.shared())
            .follow_up_elsewhere()
            .build(store.clone())
            .expect("options")
    }
}

/// Whether a session reads (is stored and not expired).
async fn live(sessions: &IndexedTable<Session, AnyStore>, user: &str, id: &str) -> bool {
    sessions.get(user, id).await.expect("get").is_some()
}

/// The rows of a table, a delete's tombstones and their burials left out (hidden from
/// every read, buried after a grace period).
async fn count(store: &AnyStore, table: &str) -> usize {
    store
        .query_all(table, Query::new())
        .await
        .expect("query")
        .iter()
        .filter(|e| !is_tombstone(e) && !outbox::waiting(e))
        .count()
}

async fn reads_leave_expired_entities_out_and_the_sweeper_deletes_them(store: AnyStore) {
    let f = fixture(store.clone()).await;
    for (user, id, token) in [("ada", 1, "t1"), ("ada", 2, "t2"), ("bob", 3, "t3")] {
        f.sessions
            .insert(&session(user, id, token))
            .await
            .expect("insert");
    }
    assert!(!f.blobs.list("").await.expect("blobs").is_empty());
    // Half an hour on, session 2 is written again: its hour starts over.
    f.clock.advance(Duration::minutes(30));
    let mut renewed = session("ada", 2, "t2");
    renewed.device = "laptop".to_owned();
    f.sessions.upsert(&renewed).await.expect("renew");
    assert_eq!(count(&store, &expiry_table("Sessions")).await, 3);

    // Just before the hour nothing has expired; at the hour sessions 1 and 3 have.
    f.clock
        .advance(Duration::minutes(30) - Duration::seconds(1));
    assert!(live(&f.sessions, "ada", "s_0001").await);
    f.clock.advance(Duration::seconds(1));
    assert!(!live(&f.sessions, "ada", "s_0001").await);
    assert!(!live(&f.sessions, "bob", "s_0003").await);
    assert!(live(&f.sessions, "ada", "s_0002").await);
    let all = f.sessions.table().query(Query::new()).await.expect("query");
    assert_eq!(
        all.iter().map(|s| s.value.id).collect::<Vec<_>>(),
        vec![2],
        "a query returns only the live session"
    );
    let projected = f
        .sessions
        .table()
        .select::<TokenOnly>(Query::new())
        .await
        .expect("select");
    assert_eq!(
        projected.len(),
        1,
        "a projection leaves expired entities out"
    );
    let local = f
        .sessions
        .lookup_named("local")
        .keys(&[&"ada"])
        .keys(&[&"t1"])
        .get()
        .await;
    assert!(local.expect("find").is_none(), "same-partition copy");
    // The copies in another table carry only `user` (and the expiry).
    let copies = f
        .sessions
        .lookup_named("by_token")
        .entities()
        .await
        .expect("find");
    assert_eq!(
        copies
            .iter()
            .map(|c| c.row_key.as_str())
            .collect::<Vec<_>>(),
        vec!["t2"],
        "copies in another table"
    );
    let phones = f
        .sessions
        .list_named("device")
        .keys(&[&"phone"])
        .concurrency(4)
        .all()
        .await
        .expect("members");
    assert!(phones.is_empty(), "{phones:?}");

    let report = f.sweeper.sweep().await.expect("sweep");
    assert_eq!(
        (report.entries, report.deleted, report.renewed, report.gone),
        (2, 2, 0, 0),
        "{report:?}"
    );
    // Gone with their copies, list entries, reservations, blobs and expiry entries.
    let mut raw = store
        .query_all("Sessions", Query::new())
        .await
        .expect("raw");
    raw.retain(|e| !is_tombstone(e));
    assert!(
        raw.iter().all(|e| !e.row_key.contains("0001")
            && !e.row_key.contains("0003")
            && !e.row_key.contains("t1")),
        "{raw:?}"
    );
    assert_eq!(count(&store, "SessionsByToken").await, 1);
    assert_eq!(count(&store, &expiry_table("Sessions")).await, 1);
    assert!(f.blobs.list("").await.expect("blobs").is_empty());
    assert_eq!(
        f.sessions
            .list_named("device")
            .keys(&[&"phone"])
            .ids()
            .await
            .expect("ids"),
        Vec::new()
    );
    // The tokens are free again.
    f.sessions
        .insert(&session("cy", 4, "t1"))
        .await
        .expect("t1 is free");
    f.assert_clean().await;
    // A second pass finds nothing.
    let again = f.sweeper.sweep().await.expect("sweep");
    assert_eq!(again.entries, 0, "{again:?}");
}

async fn an_entity_renewed_before_the_sweep_stays(store: AnyStore) {
    let f = fixture(store.clone()).await;
    f.sessions
        .insert(&session("ada", 5, "t5"))
        .await
        .expect("insert");
    f.clock.advance(Duration::hours(2));
    // Renewed through a table with no sink: the old expiry entry stays until the relay
    // runs the write's follow-up work.
    let deferred = f.deferred(&store);
    deferred
        .upsert(&session("ada", 5, "t5"))
        .await
        .expect("renew");
    let report = f.sweeper.sweep().await.expect("sweep");
    assert_eq!(
        (report.entries, report.deleted, report.renewed),
        (1, 0, 1),
        "{report:?}"
    );
    assert!(live(&f.sessions, "ada", "s_0005").await);
    let sink: Arc<dyn OutboxSink> = Arc::new(InlineSink::new(handlers(
        store.clone(),
        Some(f.blobs.clone()),
    )));
    Relay::options()
        .grace(std::time::Duration::ZERO)
        .late(std::time::Duration::ZERO)
        .build(store.clone(), sink)
        .run_once()
        .await
        .expect("relay");
    f.assert_clean().await;
    // An hour after the renewal it expires after all.
    f.clock.advance(Duration::hours(1));
    let report = f.sweeper.sweep().await.expect("sweep");
    assert_eq!((report.entries, report.deleted), (1, 1), "{report:?}");
    assert!(!live(&f.sessions, "ada", "s_0005").await);
    assert_eq!(count(&store, "Sessions").await, 0);
}

async fn an_expiry_field_expires_its_entity_and_none_never_does(store: AnyStore) {
    let clock = ManualClock::new(start());
    let invites = IndexedTable::<Invite, _>::options()
        .inline_apply()
        .clock(clock.shared())
        .build(store.clone())
        .expect("options");
    invites.create().await.expect("open");
    let sweeper = Sweeper::options()
        .sink(Arc::new(InlineSink::new(handlers(store.clone(), None))))
        .clock(clock.shared())
        .build(store.clone());
    // Many invites that expire in a month, a few in ten minutes, one never.
    let many = 120;
    for i in 0..many {
        let invite = Invite {
            team: format!("team{}", i % 7),
            code: format!("late{i:04}"),
            ends: Some(start() + Duration::days(30)),
        };
        invites.insert(&invite).await.expect("insert");
    }
    for i in 0..5 {
        let invite = Invite {
            team: "red".to_owned(),
            code: format!("soon{i}"),
            ends: Some(start() + Duration::minutes(10)),
        };
        invites.insert(&invite).await.expect("insert");
    }
    let forever = Invite {
        team: "red".to_owned(),
        code: "forever".to_owned(),
        ends: None,
    };
    invites.insert(&forever).await.expect("insert");
    assert_eq!(count(&store, &expiry_table("Invites")).await, many + 5);

    clock.advance(Duration::minutes(11));
    let red = invites.table().partition("red").await.expect("partition");
    assert_eq!(
        red.into_iter().map(|s| s.value).collect::<Vec<_>>(),
        vec![forever.clone()]
    );
    let report = sweeper.sweep().await.expect("sweep");
    assert_eq!(
        (report.entries, report.deleted),
        (5, 5),
        "the sweeper reads the expired entries only: {report:?}"
    );
    assert_eq!(count(&store, "Invites").await, many + 1);

    clock.advance(Duration::days(365));
    let report = sweeper.sweep().await.expect("sweep");
    assert_eq!(report.deleted, many, "{report:?}");
    assert_eq!(
        invites
            .get("red", "forever")
            .await
            .expect("get")
            .map(|s| s.value),
        Some(forever)
    );
    assert_eq!(count(&store, &expiry_table("Invites")).await, 0);
    let audit = invites
        .audit(&AuditOptions::default())
        .await
        .expect("audit");
    assert!(audit.is_clean(), "{audit:?}");
    // The primaries record the entry as one of their targets.
    let stored = store
        .get("Invites", "red", "forever", None)
        .await
        .expect("get")
        .expect("stored");
    let record = tablekit::patterns::index::IndexRecord::read(&stored)
        .expect("record")
        .expect("a record");
    assert!(record.targets.iter().all(|t| t.index() != EXPIRY_INDEX));
}

/// An enum over the kinds of the invites' table: it expires because a variant does.
#[derive(EntityKind, Clone, Debug, PartialEq)]
enum InviteKinds {
    Invite(Invite),
}

/// Writes see an entity that expired and waits for the sweeper as absent: an insert
/// takes its keys (its copies, reservation, blob and expiry entry go as an update's
/// would), a replace or a typed update finds nothing; a live one still refuses an insert.
async fn writes_treat_an_expired_entity_as_absent(store: AnyStore) {
    let f = fixture(store.clone()).await;
    f.sessions
        .insert(&session("ada", 1, "t1"))
        .await
        .expect("insert");
    let expired_blob = f.blobs.list("").await.expect("blobs")[0].name.clone();
    f.clock.advance(Duration::hours(2));
    let again = session("ada", 1, "t9");
    let replaced = f.sessions.replace(&again, IfMatch::Any).await;
    assert_eq!(
        replaced.map(drop).map_err(|e| e.kind()),
        Err(ErrorKind::NotFound),
        "a replace of an expired entity"
    );
    let updated = f.sessions.update(&again, &["device"], IfMatch::Any).await;
    assert_eq!(
        updated.map(drop).map_err(|e| e.kind()),
        Err(ErrorKind::NotFound),
        "a typed update of an expired entity"
    );
    f.sessions
        .insert(&again)
        .await
        .expect("insert over expired");
    let read = f.sessions.get("ada", "s_0001").await.expect("get");
    assert_eq!(read.map(|s| s.value.token), Some("t9".to_owned()));
    let blobs: Vec<String> = f
        .blobs
        .list("")
        .await
        .expect("blobs")
        .into_iter()
        .map(|b| b.name)
        .collect();
    assert!(
        !blobs.contains(&expired_blob),
        "the expired value's blob went: {blobs:?}"
    );
    let taken = f.sessions.insert(&again).await;
    assert_eq!(
        taken.map(drop).map_err(|e| e.kind()),
        Err(ErrorKind::AlreadyExists),
        "a live entity still holds its keys"
    );
    // The expired value's copies and reservation went: its token is free again.
    assert!(
        store
            .get("Sessions", "ada", "tok_t1", None)
            .await
            .expect("get")
            .is_none_or(|e| is_tombstone(&e)),
        "the expired value's copy in the partition went"
    );
    let by_token: Vec<String> = store
        .query_all("SessionsByToken", Query::new())
        .await
        .expect("copies")
        .into_iter()
        .map(|c| c.row_key)
        .collect();
    assert_eq!(by_token, vec!["t9".to_owned()], "only the new value's copy");
    f.sessions
        .insert(&session("cy", 4, "t1"))
        .await
        .expect("t1 is free");
    assert_eq!(count(&store, "SessionsByToken").await, 2);
    assert_eq!(count(&store, &expiry_table("Sessions")).await, 2);
    let report = f.sweeper.sweep().await.expect("sweep");
    assert_eq!(report.entries, 0, "{report:?}");
    f.assert_clean().await;
}

/// In a batch, a write an entity in the way refuses fails on its own: an insert over a
/// live entity (AlreadyExists), a replace of an expired one (NotFound); an insert over an
/// expired one and a fresh insert are written.
async fn a_batch_refuses_only_the_writes_an_entity_in_the_way_refuses(store: AnyStore) {
    use tablekit::typed::TypedWrite;
    let f = fixture(store.clone()).await;
    for (id, token) in [(1, "t1"), (2, "t2")] {
        f.sessions
            .insert(&session("ada", id, token))
            .await
            .expect("insert");
    }
    f.clock.advance(Duration::hours(2));
    f.sessions
        .insert(&session("ada", 3, "t3"))
        .await
        .expect("insert");
    let report = f
        .sessions
        .write_all([
            TypedWrite::Insert(session("ada", 1, "t7")),
            TypedWrite::Insert(session("ada", 3, "t8")),
            TypedWrite::Replace(session("ada", 2, "t6"), IfMatch::Any),
            TypedWrite::Insert(session("ada", 4, "t4")),
        ])
        .await
        .expect("write all");
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let refused: Vec<(usize, ErrorKind)> = report
        .refused
        .iter()
        .map(|(at, e)| (*at, e.kind()))
        .collect();
    assert_eq!(
        refused,
        vec![(1, ErrorKind::AlreadyExists), (2, ErrorKind::NotFound)]
    );
    let written: Vec<usize> = report.written.iter().map(|(at, _)| *at).collect();
    assert_eq!(written, vec![0, 3]);
    let token = |id: &'static str| {
        let sessions = &f.sessions;
        async move {
            sessions
                .get("ada", id)
                .await
                .expect("get")
                .map(|s| s.value.token)
        }
    };
    assert_eq!(token("s_0001").await, Some("t7".to_owned()));
    assert_eq!(token("s_0002").await, None);
    assert_eq!(token("s_0003").await, Some("t3".to_owned()));
    assert_eq!(token("s_0004").await, Some("t4".to_owned()));
    let report = f.sweeper.sweep().await.expect("sweep");
    assert_eq!((report.deleted, report.failed), (1, 0), "{report:?}");
    f.assert_clean().await;
}

/// A batch whose planning fails (the store stops answering) reports each of its
/// writes as failed and returns; once the store answers, the same writes go through.
async fn a_batch_whose_reads_fail_reports_its_writes_failed(store: AnyStore) {
    use tablekit::typed::TypedWrite;
    let faulty = FaultyStore::new(store.clone());
    let clock = ManualClock::new(start());
    let sessions = IndexedTable::<Session, _>::options()
        .blobs(BlobStore::memory())
        .inline_apply()
        .clock(clock.shared())
        .build(faulty.clone())
        .expect("options");
    sessions.create().await.expect("open");
    let writes = || (2..=4).map(|id| TypedWrite::Upsert(session("ada", id, &format!("t{id}"))));
    // The store stops answering (reads and writes) from here on.
    faulty.crash_after_writes(0);
    let report = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        sessions.write_all(writes()),
    )
    .await
    .expect("write_all returns")
    .expect("write all");
    let failed: Vec<usize> = report
        .failed
        .iter()
        .flat_map(|(at, _)| at.iter().copied())
        .collect();
    assert_eq!(failed, vec![0, 1, 2], "{:?}", report.failed);
    assert!(
        report
            .failed
            .iter()
            .all(|(_, e)| e.kind() == ErrorKind::Transient)
    );
    assert!(report.written.is_empty() && report.refused.is_empty());
    assert_eq!(count(&store, "Sessions").await, 0);
    faulty.recover();
    let report = sessions.write_all(writes()).await.expect("write all");
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(report.written.len(), 3);
}

/// A verified look-up asks the primary: an entity renewed after its copy in another
/// table was written is found while the copy still carries the old expiry.
async fn a_verified_lookup_finds_a_renewed_entity_through_a_stale_copy(store: AnyStore) {
    let f = fixture(store.clone()).await;
    f.sessions
        .insert(&session("ada", 5, "t5"))
        .await
        .expect("insert");
    f.clock.advance(Duration::minutes(50));
    // Renewed through a table with no sink: the copy in `SessionsByToken` keeps the old
    // expiry until the relay runs the write's follow-up work.
    let deferred = f.deferred(&store);
    deferred
        .upsert(&session("ada", 5, "t5"))
        .await
        .expect("renew");
    f.clock.advance(Duration::minutes(20));
    assert!(live(&f.sessions, "ada", "s_0005").await);
    let unverified = f
        .sessions
        .lookup_named("by_token")
        .keys(&[])
        .keys(&[&"t5"])
        .get()
        .await;
    assert!(
        unverified.expect("find").is_none(),
        "the copy alone says it expired"
    );
    let verified = &deferred;
    let found = verified
        .lookup_named("by_token")
        .keys(&[])
        .keys(&[&"t5"])
        .verified()
        .get()
        .await
        .expect("find");
    assert_eq!(found.map(|s| s.value.id), Some(5));
    let page = verified
        .lookup_named("by_token")
        .keys(&[])
        .keys(&[])
        .verified()
        .page(10, None)
        .await
        .expect("page");
    assert_eq!(
        page.items.iter().map(|s| s.value.id).collect::<Vec<_>>(),
        vec![5]
    );
}

/// A sweeper pass goes on past an entry it cannot sweep, and counts it.
async fn a_bad_expiry_entry_is_counted_and_the_others_are_swept(store: AnyStore) {
    let f = fixture(store.clone()).await;
    for (user, id, token) in [("ada", 2, "t2"), ("bob", 3, "t3")] {
        f.sessions
            .insert(&session(user, id, token))
            .await
            .expect("insert");
    }
    let entries = store
        .query_all(&expiry_table("Sessions"), Query::new())
        .await
        .expect("entries");
    let bad = Entity::new(&entries[0].partition_key, "00000000000000000000-bad");
    store
        .execute(&expiry_table("Sessions"), WriteOp::Insert(bad))
        .await
        .expect("a bad entry");
    f.clock.advance(Duration::hours(2));
    let report = f.sweeper.sweep().await.expect("sweep");
    assert_eq!(
        (report.entries, report.deleted, report.failed),
        (3, 2, 1),
        "{report:?}"
    );
    assert_eq!(count(&store, "Sessions").await, 0);
}

/// A second type of the invites' table, with an index in the partition.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Invites",
    kind = "Pass",
    partition_key = "{team}",
    row_key = "p_{code}"
)]
#[index(name = "by_code", partition_key = "{team}", row_key = "pc_{code}")]
struct Pass {
    team: String,
    code: String,
    #[entity(expires)]
    ends: Option<DateTime<Utc>>,
}

/// A type whose registered layout this sweeper cannot read keeps its expired entities
/// (and their copies), counted as failed; the table's other types are swept.
async fn a_type_whose_layout_does_not_read_is_left_and_counted(store: AnyStore) {
    let f = fixture(store.clone()).await;
    let invites = IndexedTable::<Invite, _>::options()
        .inline_apply()
        .clock(f.clock.shared())
        .build(store.clone())
        .expect("options");
    let passes = IndexedTable::<Pass, _>::options()
        .inline_apply()
        .clock(f.clock.shared())
        .build(store.clone())
        .expect("options");
    invites.create().await.expect("open");
    passes.create().await.expect("open");
    let ends = Some(start() + Duration::minutes(5));
    invites
        .insert(&Invite {
            team: "red".to_owned(),
            code: "a".to_owned(),
            ends,
        })
        .await
        .expect("insert");
    passes
        .insert(&Pass {
            team: "red".to_owned(),
            code: "1".to_owned(),
            ends,
        })
        .await
        .expect("insert");
    // A record of Pass this sweeper cannot read (a template it does not parse).
    let mut record = store
        .get("TablekitSchemas", "Invites", "Pass", None)
        .await
        .expect("get")
        .expect("the Pass schema record");
    for value in record.properties.values_mut() {
        if let Value::String(json) = value {
            *json = json.replace("pc_{code}", "pc_{code");
        }
    }
    store
        .execute("TablekitSchemas", WriteOp::InsertOrReplace(record))
        .await
        .expect("a bad record");
    f.clock.advance(Duration::minutes(10));
    let report = f.sweeper.sweep().await.expect("sweep");
    assert_eq!(
        (report.entries, report.deleted, report.failed),
        (2, 1, 2),
        "one layout and one entry failed: {report:?}"
    );
    let stored = |rk: &'static str| {
        let store = store.clone();
        async move {
            store
                .get("Invites", "red", rk, None)
                .await
                .expect("get")
                .is_some_and(|e| !is_tombstone(&e))
        }
    };
    assert!(!stored("a").await, "the invite was swept");
    assert!(stored("p_1").await, "the pass stays");
    assert!(stored("pc_1").await, "with its copy");
}

/// An enum over an expiring type expires too: its projections read the expiry.
async fn an_entity_kind_enum_leaves_expired_entities_out(store: AnyStore) {
    assert!(<InviteKinds as tablekit::typed::Record>::expires());
    let clock = ManualClock::new(start());
    let invites = IndexedTable::<Invite, _>::options()
        .inline_apply()
        .clock(clock.shared())
        .build(store.clone())
        .expect("options");
    invites.create().await.expect("open");
    for (code, minutes) in [("a", 5), ("b", 50)] {
        let invite = Invite {
            team: "red".to_owned(),
            code: code.to_owned(),
            ends: Some(start() + Duration::minutes(minutes)),
        };
        invites.insert(&invite).await.expect("insert");
    }
    // The inserts' outbox entries are removed (the table holds the invites alone).
    invites.flush().await;
    clock.advance(Duration::minutes(10));
    let kinds = Table::<InviteKinds, _>::options()
        .clock(clock.shared())
        .build(store.clone());
    let all = kinds.query(Query::new()).await.expect("query");
    assert_eq!(all.len(), 1);
    let codes = kinds
        .select::<CodeOnly>(Query::new())
        .await
        .expect("select");
    assert_eq!(
        codes.into_iter().map(|c| c.value.code).collect::<Vec<_>>(),
        vec!["b".to_owned()]
    );
}

#[derive(tablekit::Projection, Debug)]
struct CodeOnly {
    code: String,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Drafts",
    kind = "Draft",
    partition_key = "{team}",
    row_key = "{code}"
)]
struct Draft {
    team: String,
    code: String,
    #[entity(expires)]
    ends: Option<DateTime<Utc>>,
    #[entity(blob)]
    body: Option<Vec<u8>>,
}

/// A large entity past its expiry field reads as absent, with or without its blobs.
async fn a_large_table_leaves_expired_entities_out(store: AnyStore) {
    let clock = ManualClock::new(start());
    let drafts = tablekit::patterns::large::LargeTable::<Draft, _>::options()
        .inline_cleanup()
        .clock(clock.shared())
        .build(store.clone(), BlobStore::memory());
    drafts.open().await.expect("open");
    let draft = Draft {
        team: "red".to_owned(),
        code: "d1".to_owned(),
        ends: Some(start() + Duration::minutes(5)),
        body: Some(vec![1; 200_000]),
    };
    drafts.insert(&draft).await.expect("insert");
    let read = drafts.get("red", "d1").await.expect("get");
    assert_eq!(read.map(|s| s.value), Some(draft));
    clock.advance(Duration::minutes(5));
    assert!(drafts.get("red", "d1").await.expect("get").is_none());
    assert!(drafts.get_lazy("red", "d1").await.expect("lazy").is_none());
    assert_eq!(count(&store, "Drafts").await, 1, "stored until deleted");
}

on_backends!(
    reads_leave_expired_entities_out_and_the_sweeper_deletes_them,
    an_entity_renewed_before_the_sweep_stays,
    an_expiry_field_expires_its_entity_and_none_never_does,
    writes_treat_an_expired_entity_as_absent,
    a_verified_lookup_finds_a_renewed_entity_through_a_stale_copy,
    a_bad_expiry_entry_is_counted_and_the_others_are_swept,
    a_type_whose_layout_does_not_read_is_left_and_counted,
    a_batch_refuses_only_the_writes_an_entity_in_the_way_refuses,
    a_batch_whose_reads_fail_reports_its_writes_failed,
    an_entity_kind_enum_leaves_expired_entities_out,
    a_large_table_leaves_expired_entities_out,
);

const CHILD_STORE: &str = "TABLEKIT_EXPIRY_CHILD_STORE";
const CHILD_AFTER: &str = "TABLEKIT_EXPIRY_CHILD_AFTER";

/// In the child process: one sweeper pass, two hours after the start, through a store
/// that ends the process right after the given write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_kill_child() {
    let (Ok(url), Ok(after)) = (std::env::var(CHILD_STORE), std::env::var(CHILD_AFTER)) else {
        return; // Only meaningful as the child of the kill test.
    };
    let store = support::kill::KilledAfter::new(
        AnyStore::create(&url).await.expect("store"),
        after.parse().expect("a write number"),
    );
    let clock = ManualClock::new(start() + Duration::hours(2));
    let sweeper = Sweeper::options()
        .sink(Arc::new(InlineSink::new(handlers(store.clone(), None))))
        .clock(clock.shared())
        .build(store);
    sweeper.sweep().await.expect("sweep");
    // Reaching here means the kill point lay past the last write.
    std::process::exit(support::kill::FINISHED);
}

/// A sweeper process killed right after each of its writes in turn (the pending marker,
/// the delete's transaction, each follow-up step, the outbox clean-up): after the relay
/// and a second pass, the expired session is gone with its copy, id-list entry,
/// reservation and expiry entry; the live one keeps all of its own; the audit is clean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweeper_killed_between_any_two_steps_leaves_exactly_the_live_entities() {
    let dir = tempfile::tempdir().expect("dir");
    let mut after = 0;
    loop {
        let url = format!("sqlite:{}/case{after}", dir.path().display());
        let store = AnyStore::create(&url).await.expect("store");
        let clock = ManualClock::new(start());
        let sessions = IndexedTable::<Session, _>::options()
            .inline_apply()
            .clock(clock.shared())
            .build(store.clone())
            .expect("options");
        sessions.create().await.expect("open");
        let mut gone = session("ada", 7, "t7");
        gone.note = None;
        sessions.insert(&gone).await.expect("insert");
        clock.advance(Duration::minutes(90));
        sessions
            .insert(&session("bob", 8, "t8"))
            .await
            .expect("insert");
        let killed = support::kill::run_child(
            "expiry_kill_child",
            &[
                (CHILD_STORE, url.as_str()),
                (CHILD_AFTER, after.to_string().as_str()),
            ],
        );

        let sink: Arc<dyn OutboxSink> = Arc::new(InlineSink::new(handlers(store.clone(), None)));
        let relay = Relay::options()
            .grace(std::time::Duration::ZERO)
            .late(std::time::Duration::ZERO)
            .build(store.clone(), sink.clone());
        relay.run_once().await.expect("relay");
        clock.advance(Duration::minutes(30));
        let sweeper = Sweeper::options()
            .sink(sink)
            .clock(clock.shared())
            .build(store.clone());
        sweeper.sweep().await.expect("sweep");
        relay.run_once().await.expect("relay");

        let stored = |pk: &'static str, rk: &'static str| {
            let store = store.clone();
            async move {
                store
                    .get("Sessions", pk, rk, None)
                    .await
                    .expect("get")
                    .filter(|e| !is_tombstone(e))
            }
        };
        assert!(
            stored("ada", "s_0007").await.is_none(),
            "after write {after}"
        );
        assert!(
            stored("bob", "s_0008").await.is_some(),
            "after write {after}"
        );
        let copies = store
            .query_all("SessionsByToken", Query::new())
            .await
            .expect("copies");
        assert_eq!(
            copies
                .iter()
                .map(|c| c.row_key.as_str())
                .collect::<Vec<_>>(),
            vec!["t8"],
            "after write {after}"
        );
        assert_eq!(
            count(&store, &expiry_table("Sessions")).await,
            1,
            "after write {after}"
        );
        sessions
            .insert(&session("cy", 9, "t7"))
            .await
            .unwrap_or_else(|e| panic!("after write {after}: t7 should be free: {e}"));
        let audit = sessions
            .audit(&AuditOptions::default())
            .await
            .expect("audit");
        assert!(audit.is_clean(), "after write {after}: {audit:?}");
        if !killed {
            assert!(
                after >= 3,
                "the sweep has at least 3 writes, ended after {after}"
            );
            break;
        }
        after += 1;
    }
}
