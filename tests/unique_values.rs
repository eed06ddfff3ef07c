//! Unique values across partitions (`#[unique]`) on every backend (memory, a SQLite file
//! and, with the `azure` feature, Azurite): a taken value is refused with its holder and
//! nothing is written; of 16 writers in 16 partitions claiming one value exactly one wins;
//! a changed value is released after the commit, a deleted entity's value too; a value
//! changed back and forth under concurrency stays with its holder; a write stopped
//! between any two of its steps leaves the value held by exactly the committed entity or
//! free, once the lease and the relay have run, and the audit finds and repairs what the
//! stop left.

#![allow(missing_docs)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use tablekit::core::AnyStore;
use tablekit::core::fault::FaultyStore;
use tablekit::core::typed::TypedWrite;
use tablekit::patterns::Error as PatternError;
use tablekit::patterns::index::internals::unique::{self, Reservation};
use tablekit::patterns::index::{
    AuditOptions, EntityRef, InlineSink, OutboxSink, Relay, WriteOutcome,
};
use tablekit::prelude::*;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Users",
    kind = "User",
    partition_key = "{team}",
    row_key = "u_{id:04}"
)]
#[unique(name = "email", key = "{email}")]
struct User {
    team: String,
    id: u32,
    email: String,
}

fn user(team: &str, id: u32, email: &str) -> User {
    User {
        team: team.to_owned(),
        id,
        email: email.to_owned(),
    }
}

fn holder(u: &User) -> EntityRef {
    EntityRef::new("Users", &u.team, format!("u_{:04}", u.id))
}

fn at(email: &str) -> EntityRef {
    EntityRef::new("UsersUnique", email, "email")
}

async fn reservation<S: TableStore>(store: &S, email: &str) -> Option<Reservation> {
    unique::read(store, &at(email)).await.expect("read")
}

async fn open<S: TableStore + Clone + 'static>(store: S) -> IndexedTable<User, S> {
    let users = IndexedTable::<User, S>::options()
        .inline_apply()
        .build(store)
        .expect("options");
    users.create().await.expect("open");
    users
}

fn taken_by(result: Result<WriteOutcome, PatternError>) -> (EntityRef, bool) {
    match result {
        Err(PatternError::ValueTaken {
            name,
            holder,
            in_flight,
            ..
        }) => {
            assert_eq!(name, "email");
            (*holder, in_flight)
        }
        other => panic!("expected ValueTaken, got {other:?}"),
    }
}

/// Every stored user, and for each value what holds it: the final state tests check.
async fn holders(users: &IndexedTable<User, impl TableStore + Clone + 'static>) -> Vec<User> {
    let mut all: Vec<User> = users
        .store()
        .query_all("Users", Query::new())
        .await
        .expect("users")
        .into_iter()
        .filter(|e| e.properties.contains_key("email"))
        .map(|e| User::from_entity(e).expect("user").value)
        .collect();
    all.sort_by(|a, b| (&a.team, a.id).cmp(&(&b.team, b.id)));
    all
}

/// Each stored user's value is reserved for it, and no two users hold one value.
async fn assert_consistent<S: TableStore + Clone + 'static>(users: &IndexedTable<User, S>) {
    let all = holders(users).await;
    let mut emails: Vec<&str> = all.iter().map(|u| u.email.as_str()).collect();
    emails.sort_unstable();
    let before = emails.len();
    emails.dedup();
    assert_eq!(emails.len(), before, "two users hold one value: {all:?}");
    for u in &all {
        let r = reservation(users.store(), &u.email)
            .await
            .unwrap_or_else(|| panic!("{u:?} holds an unreserved value"));
        assert_eq!(r.holder, holder(u), "{u:?}");
    }
}

async fn assert_audit_clean<S: TableStore + Clone + 'static>(users: &IndexedTable<User, S>) {
    let report = users.audit(&AuditOptions::default()).await.expect("audit");
    assert!(report.is_clean(), "{report:?}");
}

async fn a_taken_value_is_refused_naming_its_holder_and_nothing_is_written(store: AnyStore) {
    let users = open(store.clone()).await;
    let ada = user("a", 1, "ada@example.com");
    users.insert(&ada).await.expect("insert");
    let r = reservation(&store, "ada@example.com")
        .await
        .expect("reserved");
    assert_eq!(r.holder, holder(&ada));

    let other = user("b", 2, "ada@example.com");
    let (by, in_flight) = taken_by(users.insert(&other).await);
    assert_eq!((by, in_flight), (holder(&ada), false));
    let (by, _) = taken_by(users.upsert(&other).await);
    assert_eq!(by, holder(&ada));
    assert!(users.get("b", "u_0002").await.expect("get").is_none());
    assert_eq!(
        reservation(&store, "ada@example.com")
            .await
            .expect("kept")
            .holder,
        holder(&ada)
    );
    // Writing the holder again with its own value is no conflict.
    users.upsert(&ada).await.expect("rewrite");
    assert_consistent(&users).await;
    assert_audit_clean(&users).await;
}

async fn sixteen_writers_in_sixteen_partitions_claim_one_value_and_one_wins(store: AnyStore) {
    let users = open(store.clone()).await;
    let tasks: Vec<_> = (0..16u32)
        .map(|i| {
            let users = users.clone();
            tokio::spawn(async move {
                let claimant = user(&format!("team{i:02}"), i, "one@example.com");
                (claimant.clone(), users.insert(&claimant).await)
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut losers = 0;
    for task in tasks {
        let (claimant, result) = task.await.expect("task");
        match result {
            Ok(_) => winners.push(claimant),
            Err(PatternError::ValueTaken { .. }) => losers += 1,
            Err(other) => panic!("unexpected {other}"),
        }
    }
    assert_eq!((winners.len(), losers), (1, 15), "{winners:?}");
    assert_eq!(holders(&users).await, winners);
    assert_eq!(
        reservation(&store, "one@example.com")
            .await
            .expect("reserved")
            .holder,
        holder(&winners[0])
    );
}

async fn a_changed_value_is_released_after_the_commit_and_a_delete_releases_it(store: AnyStore) {
    let users = open(store.clone()).await;
    let mut ada = user("a", 1, "x@example.com");
    users.insert(&ada).await.expect("insert");
    ada.email = "y@example.com".to_owned();
    users.replace(&ada, IfMatch::Any).await.expect("change");
    assert!(reservation(&store, "x@example.com").await.is_none());
    assert_eq!(
        reservation(&store, "y@example.com")
            .await
            .expect("y")
            .holder,
        holder(&ada)
    );
    // The old value is free for another entity at once.
    let bob = user("b", 2, "x@example.com");
    users.insert(&bob).await.expect("x is free");
    // A typed partial update of the value moves it as well.
    ada.email = "z@example.com".to_owned();
    users
        .update(&ada, &["email"], IfMatch::Any)
        .await
        .expect("update");
    assert!(reservation(&store, "y@example.com").await.is_none());
    users
        .delete("a", "u_0001", IfMatch::Any)
        .await
        .expect("delete");
    assert!(reservation(&store, "z@example.com").await.is_none());
    assert_consistent(&users).await;
    assert_audit_clean(&users).await;
}

async fn a_value_changed_back_and_forth_under_concurrency_stays_consistent(store: AnyStore) {
    let users = open(store.clone()).await;
    let flipper = {
        let users = users.clone();
        tokio::spawn(async move {
            let mut ada = user("a", 1, "x@example.com");
            for round in 0..20 {
                ada.email = if round % 2 == 0 { "x" } else { "y" }.to_owned() + "@example.com";
                match users.upsert(&ada).await {
                    Ok(_) | Err(PatternError::ValueTaken { .. }) => {}
                    Err(other) => panic!("flip {round}: {other}"),
                }
            }
        })
    };
    let claimer = {
        let users = users.clone();
        tokio::spawn(async move {
            let mut won = 0;
            for round in 0..20 {
                let email = if round % 3 == 0 { "x" } else { "y" }.to_owned() + "@example.com";
                match users.upsert(&user("b", 2, &email)).await {
                    Ok(_) => won += 1,
                    Err(PatternError::ValueTaken { .. }) => {}
                    Err(other) => panic!("claim {round}: {other}"),
                }
            }
            won
        })
    };
    flipper.await.expect("flipper");
    claimer.await.expect("claimer");
    assert_consistent(&users).await;
    // A value no one holds is not reserved (released after each change).
    for email in ["x@example.com", "y@example.com"] {
        if let Some(r) = reservation(&store, email).await {
            let held = holders(&users).await.iter().any(|u| u.email == email);
            assert!(held, "{email} reserved by {} but not held", r.holder);
        }
    }
    assert_audit_clean(&users).await;
}

/// A write stopped at each of its writes in turn (the reservation, the commit, the
/// release; then every later write, as if the process died there), then restarted: the
/// relay publishes what the outbox kept, the lease runs out, and the audit repairs what
/// is left. The value ends up held by exactly the committed entity, or free.
async fn a_write_stopped_between_any_two_steps_leaves_the_value_held_or_free(store: AnyStore) {
    const LEASE: Duration = Duration::from_millis(300);
    for stop in 0..6 {
        let table_store = FaultyStore::new(store.clone());
        // The entries' removal in the write: the stop counts the write's own steps.
        let users = IndexedTable::<User, _>::options()
            .engine(
                tablekit::patterns::consistency::Engine::options()
                    .removal_in_line()
                    .build(table_store.clone()),
            )
            .inline_apply()
            .unique_lease(LEASE)
            .build(table_store.clone())
            .expect("options");
        users.create().await.expect("open");
        // A fresh pair of values per round.
        let (x, y) = (
            format!("x{stop}@example.com"),
            format!("y{stop}@example.com"),
        );
        let mut ada = user("a", stop, &x);
        users.insert(&ada).await.expect("insert");

        // The change x → y, stopped at its `stop`-th write.
        ada.email = y.clone();
        table_store.crash_after_writes(stop as usize);
        let changed = users.upsert(&ada).await;
        table_store.recover();

        // Restart: the relay publishes what the outbox kept, then the lease runs out
        // and the audit repairs the rest.
        let handlers = tablekit::patterns::index::handlers(store.clone(), None);
        let sink: Arc<dyn OutboxSink> = Arc::new(InlineSink::new(handlers));
        Relay::options()
            .grace(Duration::ZERO)
            .build(store.clone(), sink)
            .run_once()
            .await
            .expect("relay");
        tokio::time::sleep(LEASE + Duration::from_millis(50)).await;
        let repaired = users
            .audit(&AuditOptions {
                repair: true,
                ..AuditOptions::default()
            })
            .await
            .expect("audit");
        // A committed value was reserved before its commit: nothing is ever missing,
        // only reservations a stop left behind are (orphans).
        assert_eq!(repaired.missing, 0, "stop {stop}: {repaired:?}");
        let clean = users.audit(&AuditOptions::default()).await.expect("audit");
        assert!(clean.is_clean(), "stop {stop}: {repaired:?} then {clean:?}");

        let stored = users
            .get("a", &format!("u_{stop:04}"))
            .await
            .expect("get")
            .expect("ada stays")
            .value;
        if changed.is_ok() {
            assert_eq!(stored.email, y, "stop {stop}: the change was acknowledged");
        }
        let (held, free) = if stored.email == y {
            (&y, &x)
        } else {
            (&x, &y)
        };
        assert_eq!(
            reservation(users.store(), held).await.map(|r| r.holder),
            Some(holder(&stored)),
            "stop {stop}: the committed value is reserved for its holder"
        );
        assert!(
            reservation(users.store(), free).await.is_none(),
            "stop {stop}: the other value is free"
        );
        // And another entity can take the free one.
        users
            .insert(&user("b", 100 + stop, free))
            .await
            .unwrap_or_else(|e| panic!("stop {stop}: {free} should be free: {e}"));
    }
}

async fn a_reservation_left_by_a_dead_writer_is_taken_over_after_its_lease(store: AnyStore) {
    const LEASE: Duration = Duration::from_millis(400);
    let faulty = FaultyStore::new(store.clone());
    let users = IndexedTable::<User, _>::options()
        .inline_apply()
        .unique_lease(LEASE)
        .build(faulty.clone())
        .expect("options");
    users.create().await.expect("open");
    // The writer records its intent (the partition's pending marker, the intent entry)
    // and reserves, then dies before its commit.
    faulty.crash_after_writes(3);
    users
        .insert(&user("a", 1, "dead@example.com"))
        .await
        .expect_err("crashed");
    faulty.recover();
    let left = reservation(&store, "dead@example.com")
        .await
        .expect("the reservation stays");
    assert_eq!(left.holder, holder(&user("a", 1, "dead@example.com")));

    // Within the lease, the value may still be in flight: refused as such.
    let bob = user("b", 2, "dead@example.com");
    let (by, in_flight) = taken_by(users.insert(&bob).await);
    assert_eq!((by, in_flight), (left.holder.clone(), true));
    // The audit leaves a reservation within its lease alone.
    assert_audit_clean(&users).await;
    tokio::time::sleep(LEASE + Duration::from_millis(50)).await;
    // After it, the audit reports the orphan, and a writer takes it over.
    let report = users.audit(&AuditOptions::default()).await.expect("audit");
    assert_eq!(report.orphaned, 1, "{report:?}");
    users.insert(&bob).await.expect("taken over");
    assert_eq!(
        reservation(&store, "dead@example.com")
            .await
            .expect("held")
            .holder,
        holder(&bob)
    );
    assert_consistent(&users).await;
}

async fn write_all_refuses_a_taken_value_and_writes_the_rest(store: AnyStore) {
    let users = open(store.clone()).await;
    users
        .insert(&user("a", 1, "taken@example.com"))
        .await
        .expect("insert");
    let report = users
        .write_all([
            TypedWrite::Upsert(user("a", 2, "free1@example.com")),
            TypedWrite::Upsert(user("a", 3, "taken@example.com")),
            TypedWrite::Upsert(user("a", 4, "free2@example.com")),
            // Its keys are taken: refused by the store after its value was reserved.
            TypedWrite::Insert(user("a", 1, "fresh@example.com")),
        ])
        .await
        .expect("write_all");
    let mut refused: Vec<(usize, bool)> = report
        .refused
        .iter()
        .map(|(i, e)| (*i, matches!(e, PatternError::ValueTaken { .. })))
        .collect();
    refused.sort_unstable();
    assert_eq!(refused, [(1, true), (3, false)]);
    assert_eq!(holders(&users).await.len(), 3);
    assert_consistent(&users).await;
    // The refused insert's reservation went with it.
    assert!(reservation(&store, "fresh@example.com").await.is_none());
    assert_audit_clean(&users).await;
}

on_backends!(
    a_taken_value_is_refused_naming_its_holder_and_nothing_is_written,
    sixteen_writers_in_sixteen_partitions_claim_one_value_and_one_wins,
    a_changed_value_is_released_after_the_commit_and_a_delete_releases_it,
    a_value_changed_back_and_forth_under_concurrency_stays_consistent,
    a_write_stopped_between_any_two_steps_leaves_the_value_held_or_free,
    a_reservation_left_by_a_dead_writer_is_taken_over_after_its_lease,
    write_all_refuses_a_taken_value_and_writes_the_rest,
);

// ---- Process kills between the steps -------------------------------------------------

const CHILD_STORE: &str = "TABLEKIT_TEST_UNIQUE_KILL_STORE";
const CHILD_AFTER: &str = "TABLEKIT_TEST_UNIQUE_KILL_AFTER";
/// The lease of the child's reservations: short, so the parent can wait it out.
const CHILD_LEASE: Duration = Duration::from_millis(300);

/// In the child process: changes Ada's value from x to y through a store that ends the
/// process right after the given write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unique_kill_child() {
    let (Ok(url), Ok(after)) = (std::env::var(CHILD_STORE), std::env::var(CHILD_AFTER)) else {
        return; // Only meaningful as the child of the kill tests.
    };
    let store = support::kill::KilledAfter::new(
        AnyStore::create(&url).await.expect("store"),
        after.parse().expect("a write number"),
    );
    let users = IndexedTable::<User, _>::options()
        .inline_apply()
        .unique_lease(CHILD_LEASE)
        .build(store)
        .expect("options");
    users
        .upsert(&user("a", 1, "y@example.com"))
        .await
        .expect("change");
    // Reaching here means the kill point lay past the last write.
    std::process::exit(support::kill::FINISHED);
}

/// A process changing a value, killed right after each of its writes in turn (the new
/// value's reservation, the pending marker, the commit, the old value's release, the
/// outbox clean-up): after the relay, the lease and the audit's repair, the value the
/// stored entity holds is reserved for it and the other is free.
async fn kills_between_every_step(base: &str) {
    let mut after = 0;
    loop {
        let url = format!("{base}{after}");
        let store = AnyStore::create(&url).await.expect("store");
        let users = open(store.clone()).await;
        users
            .insert(&user("a", 1, "x@example.com"))
            .await
            .expect("insert");
        let killed = support::kill::run_child(
            "unique_kill_child",
            &[
                (CHILD_STORE, url.as_str()),
                (CHILD_AFTER, after.to_string().as_str()),
            ],
        );

        let handlers = tablekit::patterns::index::handlers(store.clone(), None);
        let sink: Arc<dyn OutboxSink> = Arc::new(InlineSink::new(handlers));
        Relay::options()
            .grace(Duration::ZERO)
            .late(Duration::ZERO)
            .build(store.clone(), sink)
            .run_once()
            .await
            .expect("relay");
        tokio::time::sleep(CHILD_LEASE + Duration::from_millis(50)).await;
        let repaired = users
            .audit(&AuditOptions {
                repair: true,
                ..AuditOptions::default()
            })
            .await
            .expect("audit");
        assert_eq!(repaired.missing, 0, "after write {after}: {repaired:?}");
        assert_audit_clean(&users).await;

        let ada = users
            .get("a", "u_0001")
            .await
            .expect("get")
            .expect("ada stays")
            .value;
        let (held, free) = if ada.email == "y@example.com" {
            ("y@example.com", "x@example.com")
        } else {
            ("x@example.com", "y@example.com")
        };
        assert_eq!(
            reservation(&store, held).await.map(|r| r.holder),
            Some(holder(&ada)),
            "after write {after}"
        );
        assert!(
            reservation(&store, free).await.is_none(),
            "after write {after}: {free} is free"
        );
        users
            .insert(&user("b", 2, free))
            .await
            .unwrap_or_else(|e| panic!("after write {after}: {free} should be free: {e}"));
        if !killed {
            assert_eq!(ada.email, "y@example.com", "the finished change holds");
            assert!(
                after >= 3,
                "the change has at least 3 writes, ended after {after}"
            );
            break;
        }
        after += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writer_leaves_the_value_held_or_free_on_sqlite() {
    let dir = tempfile::tempdir().expect("a temp dir");
    kills_between_every_step(&format!("sqlite:{}/case", dir.path().display())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writer_leaves_the_value_held_or_free_on_azurite() {
    if support::azure().await.is_none() {
        return;
    }
    let Some(url) = support::azurite() else {
        return;
    };
    // The prefix ends the connection string: each case appends to it.
    kills_between_every_step(&url).await;
}
