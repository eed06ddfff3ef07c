//! What each write class costs on a networked store, counted with the round-trip model
//! (`tablekit::core::roundtrip`): every store call and every publish waits 20 ms on
//! tokio's paused clock, so a write's time over 20 ms is the number of round trips on its
//! critical path — deterministic, like its call counts. The writes go through
//! `IndexedTable` with a sink that waits one round trip per publish, after a first write
//! in the partition (its pending marker is leased, as in steady state).
//!
//! `cargo test --test round_trips -- --nocapture` prints the table; each row's figures
//! are asserted as the ceiling the write class must stay under.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::duplicated_attributes,
    missing_docs
)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tablekit::core::roundtrip::{CallCounts, Latency, RoundTripStore, RoundTrips};
use tablekit::core::{IfMatch, MemoryStore};
use tablekit::patterns::consistency::{BoxFuture, Envelope, OutboxSink, RoundTripSink};
use tablekit::patterns::index::IndexedTable;
use tablekit::prelude::*;

const LATENCY_MS: u64 = 20;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "RtPlain", partition_key = "{dept}", row_key = "e{id:04}")]
struct Plain {
    dept: String,
    id: u32,
    email: String,
    city: String,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "RtOther", partition_key = "{dept}", row_key = "e{id:04}")]
#[index(
    name = "by_email",
    table = "RtOtherByEmail",
    partition_key = "{dept}",
    row_key = "{email}"
)]
struct Other {
    dept: String,
    id: u32,
    email: String,
    city: String,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "RtUnique", partition_key = "{dept}", row_key = "e{id:04}")]
#[unique(name = "email", key = "{email}")]
struct Unique {
    dept: String,
    id: u32,
    email: String,
    city: String,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "RtChanges",
    partition_key = "{dept}",
    row_key = "e{id:04}",
    changes = "rt-changes"
)]
struct Changes {
    dept: String,
    id: u32,
    email: String,
    city: String,
}

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "RtFull",
    partition_key = "{dept}",
    row_key = "e{id:04}",
    ttl = "1h",
    changes = "rt-full-changes"
)]
#[index(name = "nick", partition_key = "{dept}", row_key = "nick_{email}")]
#[index(
    name = "by_email",
    table = "RtFullByEmail",
    partition_key = "{dept}",
    row_key = "{email}"
)]
#[index_entity(name = "city", key = "{city}")]
#[unique(name = "email", key = "{email}")]
struct Full {
    dept: String,
    id: u32,
    email: String,
    city: String,
}

/// A sink that takes every operation (the publish's round trip is `RoundTripSink`'s).
struct Accept;

impl OutboxSink for Accept {
    fn publish<'a>(&'a self, _: &'a Envelope) -> BoxFuture<'a, tablekit::patterns::Result<()>> {
        Box::pin(async { Ok(()) })
    }
}

/// One write's cost: its calls and its round trips in a row.
#[derive(Clone, Copy, Debug)]
struct Cost {
    calls: CallCounts,
    in_a_row: u64,
}

impl std::fmt::Display for Cost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:>2} + {} calls, {:>2} in a row, {:>2} entities",
            self.calls.store_calls(),
            self.calls.publishes,
            self.in_a_row,
            self.calls.entities
        )
    }
}

/// A write's cost: its time, and every call it caused (its outbox entries' removal,
/// which follows off its critical path, included: `flush` waits for it).
async fn cost<T>(
    trips: &RoundTrips,
    write: impl Future<Output = T>,
    flush: impl Future<Output = ()>,
) -> (T, Cost) {
    trips.reset();
    let started = tokio::time::Instant::now();
    let out = write.await;
    let elapsed = started.elapsed().as_millis() as u64;
    flush.await;
    (
        out,
        Cost {
            calls: trips.counts(),
            in_a_row: elapsed / LATENCY_MS,
        },
    )
}

fn paused() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap()
}

trait Sample: tablekit::typed::EntityType + Clone + Send + Sync + 'static {
    fn sample(id: u32, email: &str) -> Self;
}

macro_rules! sample {
    ($($t:ident),*) => {$(
        impl Sample for $t {
            fn sample(id: u32, email: &str) -> Self {
                $t { dept: "Sales".into(), id, email: email.into(), city: format!("city-{email}") }
            }
        }
    )*};
}
/// `Other` with a count kept without a scan beside its index in another table.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "RtCounted", partition_key = "{dept}", row_key = "e{id:04}")]
#[index(
    name = "by_email",
    table = "RtCountedByEmail",
    partition_key = "{dept}",
    row_key = "{email}"
)]
#[count(name = "per_city", key = "{city}", shards = 4)]
struct Counted {
    dept: String,
    id: u32,
    email: String,
    city: String,
}

/// `Plain` with a change feed: each write's change recorded in its own transaction.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "RtFed", partition_key = "{dept}", row_key = "e{id:04}")]
#[feed]
struct Fed {
    dept: String,
    id: u32,
    email: String,
    city: String,
}

sample!(Plain, Other, Unique, Changes, Full, Listed, Counted, Fed);

/// Insert, replace (`IfMatch::Any`) and delete (`IfMatch::Any`) of one value of `E`.
async fn measure<E>(inline: bool) -> [Cost; 3]
where
    E: Sample,
    IndexedTable<E, RoundTripStore<MemoryStore>>: Sized,
{
    let trips = RoundTrips::new(Latency::None);
    let store = RoundTripStore::with_trips(MemoryStore::new(), trips.clone());
    let sink = Arc::new(RoundTripSink::new(Arc::new(Accept), trips.clone()));
    let options = IndexedTable::<E, _>::options().sink(sink);
    let options = if inline {
        options.inline_apply()
    } else {
        options
    };
    let table = options.build(store.clone()).unwrap();
    table.create().await.unwrap();
    // The partition's marker is leased (a delete's burial is delayed work in the
    // outbox, whatever the type declares): the steady state.
    table.insert(&E::sample(1, "warm@x")).await.unwrap();
    table.delete("Sales", "e0001", IfMatch::Any).await.unwrap();
    table.flush().await;
    trips.set_latency(Latency::millis(LATENCY_MS));
    trips.record(true);
    let (_, insert) = cost(&trips, table.insert(&E::sample(2, "a@x")), table.flush()).await;
    if std::env::var("ROUND_TRIPS_LOG").is_ok() {
        println!(
            "{}: insert {:#?}",
            std::any::type_name::<E>(),
            trips.take_log()
        );
    }
    let (_, replace) = cost(
        &trips,
        table.replace(&E::sample(2, "b@x"), IfMatch::Any),
        table.flush(),
    )
    .await;
    if std::env::var("ROUND_TRIPS_LOG").is_ok() {
        println!(
            "{}: replace {:?}",
            std::any::type_name::<E>(),
            trips
                .take_log()
                .iter()
                .map(|c| format!("{:?} {} {}", c.kind, c.target, c.in_flight))
                .collect::<Vec<_>>()
        );
    }
    let (_, delete) = cost(
        &trips,
        table.delete("Sales", "e0002", IfMatch::Any),
        table.flush(),
    )
    .await;
    if std::env::var("ROUND_TRIPS_LOG").is_ok() {
        println!(
            "{}: delete {:?}",
            std::any::type_name::<E>(),
            trips
                .take_log()
                .iter()
                .map(|c| format!("{:?} {} {}", c.kind, c.target, c.in_flight))
                .collect::<Vec<_>>()
        );
    }
    [insert, replace, delete]
}

fn row(name: &str, costs: &[Cost; 3]) {
    println!(
        "{name:<34} insert {}   replace {}   delete {}",
        costs[0], costs[1], costs[2]
    );
}

#[test]
fn each_write_class_stays_at_its_round_trip_ceiling() {
    paused().block_on(async {
        let plain = measure::<Plain>(false).await;
        let other = measure::<Other>(false).await;
        let unique = measure::<Unique>(false).await;
        let changes = measure::<Changes>(false).await;
        let fed = measure::<Fed>(false).await;
        let full = measure::<Full>(false).await;
        println!(
            "writes at {LATENCY_MS} ms per store call and per publish (store calls + publishes)"
        );
        row("no declaration", &plain);
        row("index in another table", &other);
        row("unique value", &unique);
        row("change events", &changes);
        row("change feed", &fed);
        row("every declaration", &full);
        let other_inline = measure::<Other>(true).await;
        let full_inline = measure::<Full>(true).await;
        println!("with the follow-up work applied in process (inline_apply)");
        row("index in another table", &other_inline);
        row("every declaration", &full_inline);

        let in_a_row = |c: &[Cost; 3]| [c[0].in_a_row, c[1].in_a_row, c[2].in_a_row];
        // Targets: an insert with an index elsewhere or change events in 2 round trips in
        // a row; a fully declared insert in 5, replace in 6, delete in 5; a plain replace
        // under `IfMatch::Any` in 2.
        assert_eq!(in_a_row(&plain), [1, 2, 2]);
        assert_eq!(other[0].in_a_row, 2, "{}", other[0]);
        assert_eq!(changes[0].in_a_row, 2, "{}", changes[0]);
        // A feed's change rides in the write's own transaction: not one call more than a
        // write that declares nothing (once its partition's marker is leased).
        assert_eq!(in_a_row(&fed), in_a_row(&plain));
        for (fed, plain) in fed.iter().zip(&plain) {
            assert_eq!(fed.calls.total(), plain.calls.total(), "{fed} vs {plain}");
        }
        assert!(full[0].in_a_row <= 5, "{}", full[0]);
        assert!(full[1].in_a_row <= 6, "{}", full[1]);
        assert!(full[2].in_a_row <= 5, "{}", full[2]);
    });
}

#[test]
fn a_round_trip_store_passes_the_conformance_suite_shape_of_a_write() {
    // The wrapper adds no call of its own: an insert is one write.
    paused().block_on(async {
        let store = RoundTripStore::new(MemoryStore::new(), Latency::millis(LATENCY_MS));
        store.create_table("Things").await.unwrap();
        store.trips().reset();
        let (_, c) = cost(
            store.trips(),
            store.insert("Things", Entity::new("p", "r")),
            async {},
        )
        .await;
        assert_eq!(
            (c.calls.writes, c.calls.store_calls(), c.in_a_row),
            (1, 1, 1)
        );
        tokio::time::sleep(Duration::ZERO).await;
    });
}

/// Applies the follow-up work waiting in `table`'s outbox (delayed work too) with the
/// index worker's handlers, each piece at 20 ms per store call: what each cost, named
/// after `what` and its operations.
async fn follow_up(
    store: &RoundTripStore<MemoryStore>,
    table: &str,
    trips: &RoundTrips,
    registry: &tablekit::patterns::consistency::Registry,
    what: &str,
) -> Vec<(String, Cost)> {
    use tablekit::patterns::consistency::outbox;
    let mut costs = Vec::new();
    for entry in outbox::scan(store.inner(), table).await.unwrap() {
        let Ok(envelope) = outbox::read_entry(&entry) else {
            continue;
        };
        store
            .delete(table, &entry.partition_key, &entry.row_key, IfMatch::Any)
            .await
            .unwrap();
        if envelope.kind != "index" {
            // A change event: the application's consumer takes it.
            continue;
        }
        let ops: Vec<String> = envelope
            .payload
            .get("operations")
            .and_then(|o| o.as_array())
            .map(|ops| {
                ops.iter()
                    .filter_map(|op| op.get("op").and_then(|o| o.as_str()))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        trips.set_latency(Latency::millis(LATENCY_MS));
        let (handled, cost) = cost(trips, registry.handle(envelope), async {}).await;
        trips.set_latency(Latency::None);
        handled.unwrap();
        costs.push((format!("{what}: {}", ops.join(" + ")), cost));
    }
    costs
}

/// The worker's side: each piece of follow-up work a fully declared write leaves, applied
/// by the index worker's handlers, with its store calls and round trips in a row.
#[test]
fn each_piece_of_follow_up_work_stays_at_its_round_trip_ceiling() {
    paused().block_on(async {
        let trips = RoundTrips::new(Latency::None);
        let store = RoundTripStore::with_trips(MemoryStore::new(), trips.clone());
        // No sink: the work waits in the outbox, where the test takes it from.
        let table = IndexedTable::<Full, _>::options()
            .follow_up_elsewhere()
            .build(store.clone())
            .unwrap();
        table.create().await.unwrap();
        let registry = tablekit::patterns::index::handlers(store.clone(), None);
        let mut costs: Vec<(String, Cost)> = Vec::new();
        let writes: [(&str, u32, &str); 3] = [
            ("insert", 2, "a@x"),
            ("replace", 2, "b@x"),
            ("delete", 2, ""),
        ];
        for (what, id, email) in writes {
            match what {
                "insert" => table.insert(&Full::sample(id, email)).await.map(drop),
                "replace" => table
                    .replace(&Full::sample(id, email), IfMatch::Any)
                    .await
                    .map(drop),
                _ => table.delete("Sales", "e0002", IfMatch::Any).await.map(drop),
            }
            .unwrap();
            costs.extend(follow_up(&store, "RtFull", &trips, &registry, what).await);
        }
        println!(
            "follow-up work of a fully declared write, applied by the index worker's handlers"
        );
        for (what, cost) in &costs {
            println!("{what:<72} {cost}");
        }
        // Ceilings, each piece at its floor: a piece's operations on different targets
        // run at once, so a piece costs its longest operation. A copy put reads the
        // primary and the slot at once, writes, reads the primary again (3 in a row: the
        // last read catches a primary that moved on during the write); a copy's deletion
        // reads it and deletes it if it is still this primary's (2); a reservation's
        // release reads it, then the holder's pending writes, then the holder, then
        // deletes it conditionally (4: each read must follow the one before, or a write
        // that commits in between is missed — see `unique::release`).
        // The delete's tombstone burial (delayed work) reads the tombstone and deletes it
        // if it is still that delete's (2).
        assert_eq!(costs.len(), 4, "{costs:?}");
        let ceilings = [
            ("insert: put_copy + put_copy", 3),
            (
                "replace: release_unique + put_copy + put_copy + delete_copy + delete_copy",
                4,
            ),
            ("delete: release_unique + delete_copy + delete_copy", 4),
            ("delete: bury", 2),
        ];
        for (what, ceiling) in ceilings {
            let Some((_, cost)) = costs.iter().find(|(piece, _)| piece == what) else {
                panic!("no piece {what}: {costs:?}");
            };
            assert!(cost.in_a_row <= ceiling, "{what}: {cost}");
        }
    });
}

/// A worker-kept id list in a table of its own.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "RtListed", partition_key = "{dept}", row_key = "e{id:04}")]
#[index_entity(
    name = "city",
    key = "{city}",
    storage = "table",
    table = "RtListedByCity"
)]
struct Listed {
    dept: String,
    id: u32,
    email: String,
    city: String,
}

/// The source of a denormalised field.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "RtLeads",
    kind = "Lead",
    partition_key = "{dept}",
    row_key = "l{id:04}"
)]
struct Lead {
    dept: String,
    id: u32,
    email: String,
}

/// A project holding its lead's email, from another table.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "RtProjects", partition_key = "{code}", row_key = "project")]
struct Project {
    code: String,
    dept: String,
    lead: u32,
    #[entity(denormalized(
        from = "Lead",
        table = "RtLeads",
        partition_key = "{dept}",
        row_key = "l{lead:04}",
        property = "email"
    ))]
    lead_email: Option<String>,
}

/// The worker's other operations: an id list's change, a denormalised field's link and
/// its update when the source changes, each at its floor.
#[test]
fn each_worker_operation_stays_at_its_round_trip_ceiling() {
    paused().block_on(async {
        let trips = RoundTrips::new(Latency::None);
        let store = RoundTripStore::with_trips(MemoryStore::new(), trips.clone());
        let registry = tablekit::patterns::index::handlers(store.clone(), None);
        // No sink: each write's work waits in the outbox, where the test takes it from.
        let listed = IndexedTable::<Listed, _>::options()
            .follow_up_elsewhere()
            .build(store.clone())
            .unwrap();
        let leads = IndexedTable::<Lead, _>::options()
            .follow_up_elsewhere()
            .build(store.clone())
            .unwrap();
        let projects = IndexedTable::<Project, _>::options()
            .follow_up_elsewhere()
            .build(store.clone())
            .unwrap();
        listed.create().await.unwrap();
        // The dependent's type first: the source's table then knows to track it.
        projects.create().await.unwrap();
        leads.create().await.unwrap();
        let mut costs: Vec<(String, Cost)> = Vec::new();

        listed.insert(&Listed::sample(1, "a@x")).await.unwrap();
        costs.extend(follow_up(&store, "RtListed", &trips, &registry, "id list: insert").await);
        let mut moved = Listed::sample(1, "a@x");
        moved.city = "elsewhere".into();
        listed.replace(&moved, IfMatch::Any).await.unwrap();
        costs.extend(follow_up(&store, "RtListed", &trips, &registry, "id list: replace").await);

        let lead = Lead {
            dept: "Sales".into(),
            id: 1,
            email: "lead@x".into(),
        };
        leads.insert(&lead).await.unwrap();
        costs.extend(follow_up(&store, "RtLeads", &trips, &registry, "lead: insert").await);
        let project = Project {
            code: "p1".into(),
            dept: "Sales".into(),
            lead: 1,
            lead_email: None,
        };
        projects.insert(&project).await.unwrap();
        costs.extend(follow_up(&store, "RtProjects", &trips, &registry, "link: insert").await);
        let lead = Lead {
            email: "new@x".into(),
            ..lead
        };
        // The source's write: the stored version read, its links read (to merge the
        // dependents of its partition in its transaction), the transaction (its links
        // read again after it as follow-up work).
        trips.set_latency(Latency::millis(LATENCY_MS));
        let (replaced, write) = cost(&trips, leads.replace(&lead, IfMatch::Any), async {}).await;
        trips.set_latency(Latency::None);
        replaced.unwrap();
        println!("source of a denormalised field: replace (no sink)      {write}");
        assert!(write.in_a_row <= 3, "{write}");
        costs.extend(follow_up(&store, "RtLeads", &trips, &registry, "source: replace").await);
        costs.extend(follow_up(&store, "RtProjects", &trips, &registry, "dependent").await);

        // The archive worker's move of an entity with an index in another table, by the
        // worker process's archiver (after a first move: it holds the partition's
        // pending marker and the registry's layouts, as in steady state): the source
        // read, the copy inserted (the slot is read only when it is taken), the source deleted (its
        // tombstone and outbox entry in one transaction), its index work applied in
        // process (the copy read, then deleted); the outbox entry's removal follows off
        // the delivery's path.
        let others = IndexedTable::<Other, _>::options()
            .follow_up_elsewhere()
            .build(store.clone())
            .unwrap();
        others.create().await.unwrap();
        for id in [7, 8] {
            others
                .insert(&Other::sample(id, &format!("arch{id}@x")))
                .await
                .unwrap();
        }
        costs.extend(follow_up(&store, "RtOther", &trips, &registry, "archived: insert").await);
        let move_one = |id: u32| tablekit::workers::archive::ArchiveOperation {
            source_table: "RtOther".into(),
            target_table: "RtOtherArchive".into(),
            partition_key: "Sales".into(),
            row_key: format!("e{id:04}"),
        };
        let archiver = tablekit::workers::archive::Archiver::for_worker(store.clone(), None, None);
        archiver.archive(&move_one(7)).await.unwrap();
        archiver.engine().flush().await;
        trips.record(true);
        trips.set_latency(Latency::millis(LATENCY_MS));
        let (moved, archive) = cost(
            &trips,
            archiver.archive(&move_one(8)),
            archiver.engine().flush(),
        )
        .await;
        trips.set_latency(Latency::None);
        assert_eq!(
            moved.unwrap(),
            tablekit::workers::archive::ArchiveOutcome::Archived
        );
        if std::env::var("ROUND_TRIPS_LOG").is_ok() {
            for call in trips.take_log() {
                println!(
                    "archive: {:?} {} {}",
                    call.kind, call.target, call.in_flight
                );
            }
        }
        costs.push((
            "archive move (index work applied in process)".into(),
            archive,
        ));

        println!("the index worker's other operations");
        for (what, cost) in &costs {
            println!("{what:<72} {cost}");
        }
        // Ceilings, each at its floor: an id list's change reads the value's pages,
        // writes one, and looks for the member on a second page a concurrent change may
        // have put it on (3); a link's update reads the source and the dependent at once,
        // merges the dependent, reads the source again beside the dependent (for its
        // copies) (3; 1 when the field is current); a source's write reads its links
        // again after its commit, beside its dependents' updates (1); a move reads the source,
        // inserts the copy, deletes the source (its tombstone and outbox entry in one
        // transaction), applies the delete's index work (2) (5; the entry's removal
        // follows off the delivery's path).
        let ceilings = [3, 3, 1, 1, 3, 3, 3, 5];
        let names: Vec<&str> = costs.iter().map(|(what, _)| what.as_str()).collect();
        assert_eq!(costs.len(), ceilings.len(), "{names:?}");
        for ((what, cost), ceiling) in costs.iter().zip(ceilings) {
            assert!(cost.in_a_row <= ceiling, "{what}: {cost}");
        }
    });
}

/// The index worker's deliveries in flight that write one partition share entity group
/// transactions (`CoalescingStore` under the worker's handlers): ten copies of one index
/// partition cost two write round trips in all, not ten.
#[test]
fn deliveries_writing_one_partition_share_transactions() {
    use tablekit::patterns::consistency::outbox;
    paused().block_on(async {
        let trips = RoundTrips::new(Latency::None);
        let store = RoundTripStore::with_trips(MemoryStore::new(), trips.clone());
        let table = IndexedTable::<Other, _>::options()
            .follow_up_elsewhere()
            .build(store.clone())
            .unwrap();
        table.create().await.unwrap();
        for id in 1..=10 {
            table
                .insert(&Other::sample(id, &format!("m{id}@x")))
                .await
                .unwrap();
        }
        let mut work = Vec::new();
        for entry in outbox::scan(store.inner(), "RtOther").await.unwrap() {
            work.push(outbox::read_entry(&entry).unwrap());
        }
        assert_eq!(work.len(), 10);
        let registry = tablekit::workers::index::register(
            tablekit::workers::Registry::new(),
            store.clone(),
            None,
        );
        trips.set_latency(Latency::millis(LATENCY_MS));
        trips.reset();
        let started = tokio::time::Instant::now();
        let handled = futures::future::join_all(work.into_iter().map(|e| registry.handle(e))).await;
        let elapsed = started.elapsed().as_millis() as u64 / LATENCY_MS;
        assert!(handled.iter().all(Result::is_ok), "{handled:?}");
        let counts = trips.counts();
        println!("ten copies' deliveries at once: {counts}, {elapsed} in a row");
        // Each delivery reads its primary and slot, then writes: the first alone, the
        // nine that came while it was in flight in one transaction.
        assert_eq!((counts.writes, counts.batches), (1, 1), "{counts}");
        for id in 1..=10 {
            let row = format!("m{id}@x");
            let copy = store
                .inner()
                .get("RtOtherByEmail", "Sales", &row, None)
                .await;
            assert!(copy.unwrap().is_some(), "copy {id}");
        }
    });
}

/// A wide type: 600 readings, chunk 0 and two more chunks.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "RtWide", partition_key = "{dept}", row_key = "w{id:04}")]
#[wide]
struct Wide {
    dept: String,
    id: u32,
    #[wide]
    readings: std::collections::BTreeMap<String, i64>,
}

/// A series spilling to chunks: 600 points a span.
#[derive(Entity, Clone, Debug, Default, PartialEq)]
#[entity(table = "RtSeries", partition_key = "{dept}", row_key = "s_{start}")]
#[series(
    start = "start",
    points = "counts",
    every = "1m",
    span = "10h",
    spill = "chunks"
)]
struct Counts {
    dept: String,
    start: chrono::DateTime<chrono::Utc>,
    counts: tablekit::typed::Points<i64>,
}

#[test]
fn a_wide_write_and_a_series_add_stay_at_their_round_trip_ceiling() {
    paused().block_on(async {
        let trips = RoundTrips::new(Latency::None);
        let store = RoundTripStore::with_trips(MemoryStore::new(), trips.clone());
        let sink = Arc::new(RoundTripSink::new(Arc::new(Accept), trips.clone()));
        let wide = IndexedTable::<Wide, _>::options()
            .sink(sink.clone())
            .build(store.clone())
            .unwrap();
        wide.create().await.unwrap();
        let series = IndexedTable::<Counts, _>::options()
            .sink(sink)
            .build(store.clone())
            .unwrap();
        series.create().await.unwrap();
        let value = |id: u32, bias: i64| Wide {
            dept: "Sales".into(),
            id,
            readings: (0..600).map(|i| (format!("r{i:04}"), i + bias)).collect(),
        };
        let key = Counts {
            dept: "Sales".into(),
            ..Counts::default()
        };
        let at = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        // The partition's marker leased: the steady state.
        wide.insert(&value(1, 0)).await.unwrap();
        series.add(&key, at, 1).await.unwrap();
        wide.flush().await;
        trips.set_latency(Latency::millis(LATENCY_MS));
        let (_, insert) = cost(&trips, wide.insert(&value(2, 0)), wide.flush()).await;
        let (_, replace) = cost(
            &trips,
            wide.replace(&value(2, 1), IfMatch::Any),
            wide.flush(),
        )
        .await;
        let (_, get) = cost(&trips, wide.get("Sales", "w0002"), async {}).await;
        let (_, add) = cost(&trips, series.add(&key, at, 1), series.flush()).await;
        println!("wide insert {insert}   replace {replace}   get {get}");
        println!("series add (a span in chunks) {add}");
        // An insert is its transaction; a replace reads the primary and its chunks, then
        // commits; a read is chunk 0 and one range query; an add reads the span (2), then
        // replaces it (3).
        assert_eq!(insert.in_a_row, 1, "{insert}");
        assert_eq!(replace.in_a_row, 3, "{replace}");
        assert_eq!(get.in_a_row, 2, "{get}");
        assert_eq!(add.in_a_row, 5, "{add}");
    });
}

/// Batch reads and counts: 100 keys of one partition in at most 2 round trips in a row
/// (100 gets would be 100 calls); a count reads keys only, a page per 1,000.
#[test]
fn batch_reads_and_counts_stay_at_their_round_trip_ceiling() {
    paused().block_on(async {
        let trips = RoundTrips::new(Latency::None);
        let store = RoundTripStore::with_trips(MemoryStore::new(), trips.clone());
        let table = IndexedTable::<Plain, _>::options()
            .inline_apply()
            .build(store.clone())
            .unwrap();
        table.create().await.unwrap();
        let values: Vec<tablekit::typed::TypedWrite<Plain>> = (0..150)
            .map(|id| tablekit::typed::TypedWrite::Upsert(Plain::sample(id, &format!("p{id}@x"))))
            .collect();
        table
            .write_all(values)
            .await
            .unwrap()
            .into_result()
            .unwrap();
        table.flush().await;
        trips.set_latency(Latency::millis(LATENCY_MS));

        // 100 typed keys (and two that are missing), in the order asked.
        let mut ids: Vec<u32> = (0..100).rev().collect();
        ids.extend([900, 901]);
        let keys = ids.iter().map(|id| table.primary().key("Sales").key(*id));
        let (found, cost) = cost(&trips, table.get_many(keys), async {}).await;
        let found = found.unwrap();
        assert_eq!(found.len(), 102);
        for (id, hit) in ids.iter().zip(&found) {
            assert_eq!(hit.as_ref().map(|s| s.value.id), (*id < 100).then_some(*id));
        }
        assert!(cost.in_a_row <= 2, "get_many: {cost}");
        assert_eq!(cost.calls.queries, 8, "100 keys, 14 per query: {cost}");
        assert_eq!(cost.calls.gets, 0, "{cost}");

        let (count, cost) = cost_of_count(&trips, &table).await;
        assert_eq!(count, 150);
        assert_eq!(cost.calls.queries, 1, "150 keys: one page: {cost}");
        assert_eq!(cost.calls.store_calls(), 1, "{cost}");
    });
}

async fn cost_of_count(
    trips: &RoundTrips,
    table: &IndexedTable<Plain, RoundTripStore<MemoryStore>>,
) -> (u64, Cost) {
    let (count, cost) = cost(trips, table.primary().key("Sales").count_scan(), async {}).await;
    (count.unwrap(), cost)
}

/// A count kept without a scan: a write's critical path gains no round trip (its work
/// rides in the write's outbox entry), and the worker's apply is at its floor — the
/// primary read, the member and counter rows read at once, one transaction, the primary
/// read again (4 in a row; 2 when nothing changes).
#[test]
fn a_count_adds_no_round_trip_to_a_write_and_its_apply_is_at_its_floor() {
    paused().block_on(async {
        let other = measure::<Other>(false).await;
        let counted = measure::<Counted>(false).await;
        row("index in another table", &other);
        row("the same with a count", &counted);
        for (o, c) in other.iter().zip(&counted) {
            assert_eq!(c.in_a_row, o.in_a_row, "{o} vs {c}");
        }

        let trips = RoundTrips::new(Latency::None);
        let store = RoundTripStore::with_trips(MemoryStore::new(), trips.clone());
        let registry = tablekit::patterns::index::handlers(store.clone(), None);
        let table = IndexedTable::<Counted, _>::options()
            .follow_up_elsewhere()
            .build(store.clone())
            .unwrap();
        table.create().await.unwrap();
        table.insert(&Counted::sample(1, "a@x")).await.unwrap();
        let mut costs = follow_up(&store, "RtCounted", &trips, &registry, "insert").await;
        let mut moved = Counted::sample(1, "b@x");
        moved.city = "elsewhere".into();
        table.replace(&moved, IfMatch::Any).await.unwrap();
        costs.extend(follow_up(&store, "RtCounted", &trips, &registry, "replace").await);
        for (what, cost) in &costs {
            println!("{what:<72} {cost}");
        }
        // The insert's work: the copy and the membership at once (each 4 at most); the
        // replace's: a copy moved, one membership out and one in.
        assert!(!costs.is_empty());
        for (what, cost) in &costs {
            assert!(cost.in_a_row <= 4, "{what}: {cost}");
        }
    });
}
