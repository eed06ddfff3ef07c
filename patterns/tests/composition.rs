//! Compositions the simulation of the whole system found broken, each pinned here at the
//! step that broke (the simulation's seeds drift as the code changes; these do not).

use std::time::Duration;

mod support;
use support::{Held, Hold};

use tablekit_core::{Entity, MemoryStore, TableStore, Value};
use tablekit_patterns::consistency::{Engine, Envelope, outbox};
use tablekit_patterns::index::internals::unique;
use tablekit_patterns::index::operation::{
    Applied, IndexApplier, IndexOperation, IndexOperations, PutCopy, SyncDenormalized,
};
use tablekit_patterns::index::reclaim::Reclaim;
use tablekit_patterns::index::record::{CopyTarget, DenormalizedTarget};
use tablekit_patterns::index::record::{EntityRef, IndexRecord, Target, copy_of};

async fn store_with(tables: &[&str]) -> MemoryStore {
    let store = MemoryStore::new();
    for table in tables {
        store
            .create_table_if_not_exists(table)
            .await
            .expect("table");
    }
    store
}

fn empty_work() -> Envelope {
    Envelope::new(&IndexOperations::new(Vec::new())).expect("envelope")
}

/// The intent of a write of `source` reserving `reservations`.
fn reserving(source: &EntityRef, reservations: &[&EntityRef]) -> Envelope {
    Reclaim {
        id: uuid::Uuid::new_v4().simple().to_string(),
        source: source.clone(),
        reservations: reservations.iter().map(|r| (*r).clone()).collect(),
        links: Vec::new(),
        blob_nonce: None,
    }
    .envelope()
    .expect("envelope")
}

/// A member's write reserved its new email under an intent, then failed; its deleting
/// write (older version: planned first) released after the failed write's undoing ran.
/// The release was refused for the failed write's newer version and the value stayed
/// reserved for nobody. A newer version protects a reservation only while its write is
/// pending.
#[tokio::test]
async fn a_failed_writes_newer_reservation_does_not_outlive_the_release() {
    let store = store_with(&["Members", "MembersUnique"]).await;
    let engine = Engine::new(store.clone());
    let at = EntityRef::new("MembersUnique", "e1", "email");
    let holder = EntityRef::new("Members", "t0", "m_04");
    let intent = engine
        .record_intent("Members", "t0", reserving(&holder, &[&at]))
        .await
        .expect("intent");
    unique::reserve_for(
        &store,
        &at,
        &holder,
        100,
        Duration::ZERO,
        Some(&intent.id()),
    )
    .await
    .expect("reserve");
    // While the write is pending its reservation stands against an older release.
    assert!(
        !unique::release(&store, &at, &holder, 60)
            .await
            .expect("release")
    );
    assert!(unique::read(&store, &at).await.expect("read").is_some());
    // Settled (undone): the holder's record decides, and it does not list the value.
    engine.abandon(&intent).await;
    assert!(
        unique::release(&store, &at, &holder, 60)
            .await
            .expect("release")
    );
    assert!(unique::read(&store, &at).await.expect("read").is_none());
}

/// A delivery of a write's work put its copy, then failed before seeing that the primary
/// had moved on (deleted); a later delivery found the primary gone and stopped, leaving
/// the copy orphaned. Whichever delivery finds the primary moved on takes its own copy
/// back.
#[tokio::test]
async fn a_copy_written_for_a_primary_that_moved_on_is_taken_back() {
    let store = store_with(&["Members", "MembersByCity"]).await;
    let applier = IndexApplier::new(store.clone());
    let source = EntityRef::new("Members", "t1", "m_03");
    let target = EntityRef::new("MembersByCity", "Oslo", "t1_03");
    let mut primary = Entity::new("t1", "m_03");
    primary
        .properties
        .insert("Kind".into(), Value::String("Member".into()));
    let copy = copy_of(&primary, &source, 7, "by_city", &target, None, "Kind").expect("copy");
    store.insert("MembersByCity", copy).await.expect("copy");
    let put = IndexOperation::from(PutCopy {
        source: source.clone(),
        version: 7,
        index: "by_city".into(),
        target: target.clone(),
        properties: None,
        kind_property: "Kind".into(),
    });
    // The primary is gone: the work's next delivery takes the copy back.
    let applied = applier.apply(&put).await.expect("put");
    assert_eq!(applied, Applied::Superseded);
    assert!(
        store
            .get("MembersByCity", "Oslo", "t1_03", None)
            .await
            .expect("get")
            .is_none(),
        "the copy of a primary that moved on was left"
    );
    // A newer write's copy is never taken back by older work.
    let newer = copy_of(&primary, &source, 8, "by_city", &target, None, "Kind").expect("copy");
    store.insert("MembersByCity", newer).await.expect("copy");
    applier.apply(&put).await.expect("put");
    assert!(
        store
            .get("MembersByCity", "Oslo", "t1_03", None)
            .await
            .expect("get")
            .is_some()
    );
}

/// A write stalled past the relay's grace: the relay claimed its intent and ran the
/// undoing before the write reserved its value; the write then failed at its fence and
/// its reservation was left to nobody. A write abandoning an intent someone else settled
/// records the undoing again.
#[tokio::test]
async fn a_write_abandoning_a_settled_intent_records_its_undoing_again() {
    let store = store_with(&["Members"]).await;
    let engine = Engine::new(store.clone());
    let work = empty_work();
    let intent = engine
        .record_intent("Members", "t0", work.clone())
        .await
        .expect("intent");
    let row_key = format!("{}{}", outbox::OUTBOX_PREFIX, intent.id());
    // The relay claims the intent and finishes its work (the entry goes).
    let entry = store
        .get("Members", "t0", &row_key, None)
        .await
        .expect("get")
        .expect("the intent entry");
    let etag = entry.etag.clone().expect("etag");
    outbox::claim_intent(&store, "Members", &entry, etag)
        .await
        .expect("claim")
        .expect("claimed");
    store
        .delete("Members", "t0", &row_key, tablekit_core::IfMatch::Any)
        .await
        .expect("done");
    // The write fails late and abandons: its undoing is recorded again as work.
    engine.abandon(&intent).await;
    let entries = outbox::scan(&store, "Members").await.expect("scan");
    assert_eq!(entries.len(), 1, "the undoing recorded again: {entries:?}");
    assert!(!outbox::is_intent(&entries[0]), "recorded as ordinary work");
    assert_eq!(
        outbox::read_entry(&entries[0]).expect("envelope").payload,
        work.payload
    );
}

/// The same, when the abandoning write cannot read its intent (a store failure): it
/// cannot know whether the relay settled the intent before its late steps, so it records
/// the undoing again (a soak found the late reservation left when it gave up here).
#[tokio::test]
async fn a_write_that_cannot_read_its_intent_records_its_undoing_again() {
    let store = Held::new(Hold::FailRead(outbox::OUTBOX_PREFIX));
    store
        .create_table_if_not_exists("Members")
        .await
        .expect("table");
    let engine = Engine::new(store.clone());
    let work = empty_work();
    let intent = engine
        .record_intent("Members", "t0", work.clone())
        .await
        .expect("intent");
    store.arm();
    engine.abandon(&intent).await;
    let entries = outbox::scan(&store.inner, "Members").await.expect("scan");
    let work_entries: Vec<_> = entries.iter().filter(|e| !outbox::is_intent(e)).collect();
    assert_eq!(
        work_entries.len(),
        1,
        "the undoing recorded again: {entries:?}"
    );
    assert_eq!(
        outbox::read_entry(work_entries[0])
            .expect("envelope")
            .payload,
        work.payload
    );
    assert_eq!(
        entries.len(),
        2,
        "the intent stays for the relay: {entries:?}"
    );
}

/// A write stalled past its reservation's lease (the clock jumped between its reservation
/// and its commit): another writer took the value over as dead, and the stalled write
/// then committed the value with no reservation. A writer taking over a dead reservation
/// now fences the holder's pending writes first (claims their intents, as the relay does
/// after its grace): the stalled write can no longer commit.
#[tokio::test]
async fn taking_over_a_dead_reservation_fences_the_stalled_write() {
    let store = store_with(&["Members", "MembersUnique"]).await;
    let engine = Engine::new(store.clone());
    let at = EntityRef::new("MembersUnique", "e6", "email");
    let stalled = EntityRef::new("Members", "t1", "m_02");
    let other = EntityRef::new("Members", "t1", "m_03");
    let intent = engine
        .record_intent("Members", "t1", reserving(&stalled, &[&at]))
        .await
        .expect("intent");
    // A lease that ran out at once.
    unique::reserve_for(
        &store,
        &at,
        &stalled,
        100,
        Duration::ZERO,
        Some(&intent.id()),
    )
    .await
    .expect("reserve");
    tokio::time::sleep(Duration::from_millis(2)).await;
    unique::reserve_for(&store, &at, &other, 200, Duration::from_secs(30), None)
        .await
        .expect("a dead reservation is taken over");
    assert_eq!(
        unique::read(&store, &at)
            .await
            .expect("read")
            .map(|r| r.holder),
        Some(other)
    );
    // The stalled write's intent is claimed: its commit (which deletes the intent under
    // the ETag it was recorded with) can no longer land.
    let row_key = format!("{}{}", outbox::OUTBOX_PREFIX, intent.id());
    let entry = store
        .get("Members", "t1", &row_key, None)
        .await
        .expect("get")
        .expect("its undoing, as work");
    assert!(
        !outbox::is_intent(&entry),
        "the stalled write was not fenced"
    );
}

/// Two writes of one member reserving the same email: the second re-tagged the
/// reservation with its intent, failed, and its undoing released the reservation the
/// first, still in flight, then committed without. A reservation goes only when no write
/// of its holder that reserves it is pending.
#[tokio::test]
async fn a_failed_writes_undoing_leaves_the_reservation_another_pending_write_made() {
    let store = store_with(&["Members", "MembersUnique"]).await;
    let engine = Engine::new(store.clone());
    let at = EntityRef::new("MembersUnique", "e2", "email");
    let holder = EntityRef::new("Members", "t0", "m_04");
    let mut intents = Vec::new();
    for version in [10, 11] {
        let intent = engine
            .record_intent("Members", "t0", reserving(&holder, &[&at]))
            .await
            .expect("intent");
        unique::reserve_for(
            &store,
            &at,
            &holder,
            version,
            Duration::from_secs(30),
            Some(&intent.id()),
        )
        .await
        .expect("reserve");
        intents.push(intent);
    }
    // The second fails: its undoing leaves the first's reservation.
    engine.abandon(&intents[1]).await;
    assert!(
        !unique::release_intent(&store, &at, &holder)
            .await
            .expect("undo")
    );
    assert!(unique::read(&store, &at).await.expect("read").is_some());
    // The first fails too: now it goes, whatever its tag.
    engine.abandon(&intents[0]).await;
    assert!(
        unique::release_intent(&store, &at, &holder)
            .await
            .expect("undo")
    );
    assert!(unique::read(&store, &at).await.expect("read").is_none());
}

#[derive(tablekit_derive::Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Users",
    kind = "User",
    partition_key = "{team}",
    row_key = "u_{id:02}",
    crate = "tablekit_core"
)]
#[unique(name = "email", key = "{email}")]
struct User {
    team: String,
    id: u32,
    email: String,
}

/// A write stalled between its intent and its plan, past the relay's grace: the relay
/// claimed its intent and ran its undoing, then the write reserved its value, failed at
/// its fence and died; the reservation was left to no one. A write planned long after
/// its intent reads it first and reserves nothing once it was claimed.
#[tokio::test]
async fn a_stalled_write_reserves_nothing_after_its_intent_was_claimed() {
    let store = Held::new(Hold::Read("u_01"));
    let users = tablekit_patterns::index::IndexedTable::<User, _>::options()
        .unique_lease(Duration::from_millis(20))
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    users.create().await.expect("open");
    store.arm();
    let stalled = {
        let users = users.clone();
        tokio::spawn(async move {
            users
                .upsert(&User {
                    team: "t".into(),
                    id: 1,
                    email: "late@example.com".into(),
                })
                .await
        })
    };
    store.reached().await;
    // The stall outlasts half the lease, and the relay claims the intent meanwhile.
    tokio::time::sleep(Duration::from_millis(30)).await;
    for entry in outbox::scan(&store.inner, "Users").await.expect("scan") {
        if outbox::is_intent(&entry) {
            let etag = entry.etag.clone().expect("etag");
            outbox::claim_intent(&store.inner, "Users", &entry, etag)
                .await
                .expect("claim");
        }
    }
    store.release();
    let refused = stalled
        .await
        .expect("task")
        .expect_err("a fenced write does not land");
    assert!(refused.is_retryable(), "{refused}");
    let at = EntityRef::new("UsersUnique", "late@example.com", "email");
    assert!(
        unique::read(&store.inner, &at)
            .await
            .expect("read")
            .is_none(),
        "the stalled write reserved after its undoing ran"
    );
}

/// Two deliveries of a member's work bringing a badge's denormalised field and its
/// copies up to date: the first merged the member's email and read the badge to refresh
/// the copy; the second, after the member's delete, took the field off the badge and
/// found the copy as it was; the first then wrote the copy with the email, leaving it
/// ahead of its badge. A refresh reads its dependent again after its copy writes, and
/// starts over when the dependent changed.
#[tokio::test]
async fn a_late_copy_refresh_does_not_leave_the_copy_ahead_of_its_dependent() {
    let held = Held::new(Hold::Replace("z_t1_02"));
    let store = held.inner.clone();
    for table in ["Badges", "BadgesByCode", "Members"] {
        store
            .create_table_if_not_exists(table)
            .await
            .expect("table");
    }
    let badge = EntityRef::new("Badges", "t1", "b_02");
    let member = EntityRef::new("Members", "t1", "m_04");
    let at = EntityRef::new("BadgesByCode", "codes", "z_t1_02");
    let mut source = Entity::new("t1", "m_04");
    source
        .properties
        .insert("email".into(), Value::String("e5".into()));
    store.insert("Members", source).await.expect("member");
    let mut primary = Entity::new("t1", "b_02");
    primary
        .properties
        .insert("EntityKind".into(), Value::String("Badge".into()));
    primary
        .properties
        .insert("code".into(), Value::String("z".into()));
    let version = 7;
    IndexRecord {
        version,
        targets: [
            Target::from(CopyTarget {
                index: "by_code".into(),
                at: at.clone(),
                properties: None,
            }),
            Target::from(DenormalizedTarget {
                property: "holder_email".into(),
                source: member.clone(),
                source_property: "email".into(),
            }),
        ]
        .into_iter()
        .collect(),
    }
    .write(&mut primary)
    .expect("record");
    let copy = copy_of(
        &primary,
        &badge,
        version,
        "by_code",
        &at,
        None,
        "EntityKind",
    )
    .expect("copy");
    store.insert("Badges", primary).await.expect("badge");
    store.insert("BadgesByCode", copy).await.expect("copy");

    let sync = IndexOperation::from(SyncDenormalized {
        dependent: badge.clone(),
        property: "holder_email".into(),
        source: member.clone(),
        source_property: "email".into(),
    });

    // The first delivery: merges the email, then is held at its copy write.
    held.arm();
    let first = tokio::spawn({
        let applier = IndexApplier::new(held.clone());
        let sync = sync.clone();
        async move { applier.apply(&sync).await }
    });
    held.reached().await;
    // The member loses its email (deleted: its tombstone holds no properties), and the
    // second delivery runs whole.
    store
        .replace(
            "Members",
            Entity::new("t1", "m_04"),
            tablekit_core::IfMatch::Any,
        )
        .await
        .expect("member");
    IndexApplier::new(store.clone())
        .apply(&sync)
        .await
        .expect("second delivery");
    held.release();
    first.await.expect("join").expect("first delivery");
    let read = |table: &'static str, rk: &'static str, pk: &'static str| {
        let store = store.clone();
        async move {
            store
                .get(table, pk, rk, None)
                .await
                .expect("get")
                .expect("present")
                .properties
                .get("holder_email")
                .cloned()
        }
    };
    assert_eq!(
        read("BadgesByCode", "z_t1_02", "codes").await,
        read("Badges", "b_02", "t1").await,
        "the copy carries its badge's value"
    );
}

#[derive(tablekit_derive::Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Members",
    kind = "Member",
    partition_key = "{team}",
    row_key = "m_{id:02}",
    crate = "tablekit_core"
)]
struct Member {
    team: String,
    id: u32,
    email: String,
}

#[derive(tablekit_derive::Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Badges",
    kind = "Badge",
    partition_key = "{team}",
    row_key = "b_{id:02}",
    crate = "tablekit_core"
)]
struct Badge {
    team: String,
    id: u32,
    holder: u32,
    #[entity(denormalized(
        from = "Member",
        table = "Members",
        partition_key = "holders",
        row_key = "m_{holder:02}",
        property = "email"
    ))]
    holder_email: Option<String>,
}

/// A member's replace read its links (none yet) and was held before its commit; a badge
/// copying the member's email then put its link, read the member (the old email),
/// committed and synced its field (the old email again); then the member committed. The
/// member's write reads its links again after its commit and brings the badge it did not
/// see up to date.
#[tokio::test]
async fn a_dependent_linked_while_its_source_commits_gets_the_new_value() {
    let store = Held::new(Hold::Commit("m_01"));
    let members = tablekit_patterns::index::IndexedTable::<Member, _>::options()
        .track_dependents(true)
        .inline_apply()
        .build(store.clone())
        .expect("options");
    let badges = tablekit_patterns::index::IndexedTable::<Badge, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    members.create().await.expect("open");
    badges.create().await.expect("open");
    let member = |email: &str| Member {
        team: "holders".into(),
        id: 1,
        email: email.into(),
    };
    members
        .upsert(&member("old@example.com"))
        .await
        .expect("member");
    store.arm();
    let replace = {
        let members = members.clone();
        let new = member("new@example.com");
        tokio::spawn(async move { members.upsert(&new).await })
    };
    store.reached().await;
    badges
        .upsert(&Badge {
            team: "t1".into(),
            id: 3,
            holder: 1,
            holder_email: None,
        })
        .await
        .expect("badge");
    let badge = || async {
        badges
            .get("t1", "b_03")
            .await
            .expect("get")
            .expect("present")
            .value
            .holder_email
    };
    assert_eq!(
        badge().await.as_deref(),
        Some("old@example.com"),
        "the badge read the member before its commit"
    );
    store.release();
    replace.await.expect("task").expect("replace");
    assert_eq!(badge().await.as_deref(), Some("new@example.com"));
}
