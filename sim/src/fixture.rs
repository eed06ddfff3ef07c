//! A stored fixture: a store written by tablekit as it was before the write path became
//! one planner of declaration modules, kept in `sim/tests/fixtures/stored/` and read by
//! today's code in `sim/tests/stored_fixture.rs` (stored data outlives the code that
//! wrote it). [`write()`] makes it: a SQLite table store (`store.db`) with every
//! declaration of the simulation's two types — same-partition and other-table copies, id
//! lists in the partition, a table and blobs, a unique value, a denormalised field,
//! expiry, change events, blob fields — a delete's tombstone, outbox entries left pending
//! for the relay (with their pending markers), a SQLite queue file (`queue.db`) holding
//! index work, change events and an archive request not yet handled, and the blob folder
//! (`blobs/`). Everything runs on a simulated clock fixed at [`written_at`], so the
//! badges' hour to live and the tombstone's grace period fall where the reader expects.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tablekit_core::blob::BlobStore;
use tablekit_core::clock::ManualClock;
use tablekit_core::{AnyStore, IfMatch, SqliteStore};
use tablekit_patterns::consistency::{Engine, OutboxSink};
use tablekit_patterns::index::IndexedTable;
use tablekit_workers::archive::{ArchiveOperation, archive_with_engine};
use tablekit_workers::index::QueueSink;
use tablekit_workers::queue::sqlite::SqliteQueue;
use tablekit_workers::queue::{ConsumeOptions, Consumer, Queue};
use tablekit_workers::{Envelope, Registry, WorkerConfig, handle_delivery};

use crate::entities::{Badge, City, Member};

/// The queues of the fixture.
pub const QUEUES: [&str; 4] = ["index", "archive", "member-changes", "badge-changes"];
/// The archive table.
pub const ARCHIVE: &str = "MembersArchive";

/// When the fixture was written (simulated).
pub fn written_at() -> DateTime<Utc> {
    DateTime::from_timestamp(1_795_000_000, 0).expect("a time")
}

/// Where the fixture is kept.
pub fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stored")
}

/// Member `id` of `team` as written at `rev`.
pub fn member(team: &str, id: u32, rev: i64) -> Member {
    Member {
        team: team.to_owned(),
        id,
        nick: format!("n{id}"),
        city: [City::Oslo, City::Rome][(id as usize + rev as usize) % 2],
        level: id % 3,
        tag: format!("t{}", id % 2),
        email: format!("{team}.{id}@example.com"),
        rev,
        ends: (id == 3).then(|| written_at() + chrono::Duration::days(30)),
        photo: Some(vec![u8::try_from(id).unwrap_or(0); 2048]),
    }
}

/// Badge `id` of `team`, held by member `holder`, as written at `rev`.
pub fn badge(team: &str, id: u32, holder: u32, rev: i64) -> Badge {
    Badge {
        team: team.to_owned(),
        id,
        code: format!("c{id}"),
        holder,
        holder_email: None,
        rev,
        note: Some(format!("note {id} rev {rev}").into_bytes()),
    }
}

/// The members the fixture holds once everything drained.
pub fn members_after() -> Vec<Member> {
    vec![
        member("t0", 0, 1),
        member("t0", 1, 2),
        member("t0", 3, 1),
        member("t1", 0, 1),
        member("t1", 1, 1),
        member("t1", 3, 1),
    ]
}

/// The badges it holds, their holders' emails copied.
pub fn badges_after() -> Vec<Badge> {
    let mut badges = vec![
        badge("t0", 0, 0, 1),
        badge("t0", 1, 3, 2),
        badge("t0", 2, 1, 1),
    ];
    for b in &mut badges {
        b.holder_email = Some(format!("{}.{}@example.com", b.team, b.holder));
    }
    badges
}

/// A fixture's store, queue file and blob folder, opened.
pub struct Opened {
    /// The table store.
    pub store: AnyStore,
    /// The queue file.
    pub queue: SqliteQueue,
    /// The blob folder.
    pub blobs: BlobStore,
}

/// Opens the fixture files in `dir`.
///
/// # Panics
/// When a file does not open.
pub async fn open(dir: &Path) -> Opened {
    let store = AnyStore::Sqlite(
        SqliteStore::create(dir.join("store.db"))
            .await
            .expect("the store file"),
    );
    let queue = SqliteQueue::open(dir.join("queue.db"))
        .await
        .expect("the queue file");
    let blobs = BlobStore::local(dir.join("blobs")).expect("the blob folder");
    Opened {
        store,
        queue,
        blobs,
    }
}

impl Opened {
    /// An engine over the store, publishing to the queue file with `sink`.
    pub async fn engine(&self, sink: bool) -> Engine<AnyStore> {
        if !sink {
            return Engine::new(self.store.clone());
        }
        let sink: Arc<dyn OutboxSink> = Arc::new(
            QueueSink::open(self.queue.clone(), "index")
                .await
                .expect("the queue sink"),
        );
        Engine::options().sink(sink).build(self.store.clone())
    }

    /// The members, written through an engine with or without a sink.
    pub async fn members(&self, sink: bool) -> IndexedTable<Member, AnyStore> {
        IndexedTable::options()
            .engine(self.engine(sink).await)
            .follow_up_elsewhere()
            .blobs(self.blobs.clone())
            .build(self.store.clone())
            .expect("the choice of where follow-up work is done is made")
    }

    /// The badges, written through an engine with or without a sink.
    pub async fn badges(&self, sink: bool) -> IndexedTable<Badge, AnyStore> {
        IndexedTable::options()
            .engine(self.engine(sink).await)
            .follow_up_elsewhere()
            .blobs(self.blobs.clone())
            .build(self.store.clone())
            .expect("the choice of where follow-up work is done is made")
    }

    /// Handles every message of every queue until they are all empty; returns how many
    /// were handled.
    pub async fn drain_queues(&self) -> usize {
        let engine = self.engine(true).await;
        let mut handled = 0;
        for name in QUEUES {
            let registry = match name {
                "index" => tablekit_workers::index::register(
                    Registry::new(),
                    self.store.clone(),
                    Some(self.blobs.clone()),
                ),
                "archive" => {
                    let (engine, blobs) = (engine.clone(), self.blobs.clone());
                    Registry::new().register(move |op: ArchiveOperation| {
                        let (engine, blobs) = (engine.clone(), blobs.clone());
                        async move {
                            archive_with_engine(&engine, Some(&blobs), &op).await?;
                            Ok(())
                        }
                    })
                }
                // A change consumer: the events must read as their type's.
                "member-changes" => {
                    tablekit_workers::changes::Changes::<Member>::registry(|_| async { Ok(()) })
                }
                _ => tablekit_workers::changes::Changes::<Badge>::registry(|_| async { Ok(()) }),
            };
            let config = WorkerConfig::new(name);
            let mut consumer = self
                .queue
                .consume(name, ConsumeOptions::default())
                .await
                .expect("consume");
            while let Ok(Ok(Some(delivery))) =
                tokio::time::timeout(Duration::from_millis(300), consumer.next()).await
            {
                let report = handle_delivery(delivery, &registry, &config).await;
                assert_eq!(report.poisoned, 0, "{name}: {report:?}");
                handled += 1;
            }
            consumer.close().await;
        }
        handled
    }
}

/// Writes the fixture into `dir` (emptied first) on a simulated clock at
/// [`written_at`]. Run once, by `tablekit-stored-fixture`, before the write path
/// changed: running it again would make the fixture follow the code.
///
/// # Panics
/// When a write fails: the fixture is then not made.
pub async fn write(dir: &Path) {
    let clock = ManualClock::new(written_at());
    let _clock = tablekit_core::clock::simulate(clock.shared());
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir.join("blobs")).expect("the fixture folder");
    let opened = open(dir).await;
    for name in QUEUES {
        opened
            .queue
            .declare(name, &WorkerConfig::new(name).queue_options())
            .await
            .expect("declare");
    }
    // Written and published: their work waits in the queues.
    let members = opened.members(true).await;
    let badges = opened.badges(true).await;
    members.create().await.expect("open");
    badges.create().await.expect("open");
    for (team, ids) in [("t0", [0, 1, 2, 4].as_slice()), ("t1", &[0, 1, 2])] {
        for &id in ids {
            members.insert(&member(team, id, 1)).await.expect("insert");
        }
    }
    for (id, holder) in [(0, 0), (1, 1), (2, 1)] {
        badges
            .insert(&badge("t0", id, holder, 1))
            .await
            .expect("insert");
    }
    members.upsert(&member("t0", 1, 2)).await.expect("upsert");
    members
        .delete("t0", "m_04", IfMatch::Any)
        .await
        .expect("delete");
    // Written without a sink: their work stays in the outbox for the relay.
    let members = opened.members(false).await;
    let badges = opened.badges(false).await;
    members.insert(&member("t1", 3, 1)).await.expect("insert");
    members.insert(&member("t0", 3, 1)).await.expect("insert");
    badges.upsert(&badge("t0", 1, 3, 2)).await.expect("upsert");
    members
        .delete("t1", "m_02", IfMatch::Any)
        .await
        .expect("delete");
    // An archive request not yet handled.
    let request = Envelope::new(&ArchiveOperation {
        source_table: "Members".into(),
        target_table: ARCHIVE.into(),
        partition_key: "t0".into(),
        row_key: "m_02".into(),
    })
    .expect("envelope");
    opened
        .queue
        .send(
            "archive",
            &request.id.to_string(),
            &request.to_bytes().expect("bytes"),
        )
        .await
        .expect("send");
}
