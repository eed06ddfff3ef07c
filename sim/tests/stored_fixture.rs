//! Stored data outlives the code that wrote it: a store written before the write path
//! became one planner of declaration modules (`fixtures/stored/`, made by
//! `tablekit_sim::fixture::write`, see its docs) reads with today's code, drains, and
//! audits clean — and so does the same fixture written by today's code.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tablekit_core::TableStore;
use tablekit_core::clock::ManualClock;
use tablekit_patterns::consistency::{OutboxSink, Relay, outbox};
use tablekit_patterns::index::AuditOptions;
use tablekit_patterns::index::record::is_tombstone;
use tablekit_sim::fixture::{
    ARCHIVE, QUEUES, badges_after, fixture_dir, members_after, open, written_at,
};
use tablekit_workers::index::QueueSink;
use tablekit_workers::queue::Queue;

#[tokio::test]
async fn a_store_written_before_reads_audits_clean_and_drains() {
    let dir = tempfile::tempdir().expect("a folder");
    copy_dir(&fixture_dir(), dir.path());
    reads_audits_clean_and_drains(dir.path()).await;
}

#[tokio::test]
async fn a_store_written_by_todays_code_reads_audits_clean_and_drains() {
    let dir = tempfile::tempdir().expect("a folder");
    let fresh = dir.path().join("stored");
    tablekit_sim::fixture::write(&fresh).await;
    reads_audits_clean_and_drains(&fresh).await;
}

async fn reads_audits_clean_and_drains(dir: &Path) {
    let clock = ManualClock::new(written_at() + chrono::Duration::minutes(1));
    let _clock = tablekit_core::clock::simulate(clock.shared());
    let opened = open(dir).await;
    let members = opened.members(true).await;
    let badges = opened.badges(true).await;

    // Every entity reads as it was written, before anything drained.
    for m in members_after() {
        let read = members.get(&m.team, &format!("m_{:02}", m.id)).await;
        assert_eq!(read.expect("read").map(|s| s.value), Some(m));
    }
    for deleted in [("t0", "m_04"), ("t1", "m_02")] {
        assert!(
            members
                .get(deleted.0, deleted.1)
                .await
                .expect("read")
                .is_none()
        );
    }
    let hit = members
        .lookup_named("nick")
        .keys(&[&"t0"])
        .keys(&[&"n1"])
        .get()
        .await
        .expect("find");
    assert_eq!(hit.map(|s| s.value.rev), Some(2));

    // The relay and the workers drain what was pending; past the grace period the
    // tombstones are buried.
    let relay = |sink: Arc<dyn OutboxSink>| {
        Relay::options()
            .grace(Duration::ZERO)
            .late(Duration::ZERO)
            .build(opened.store.clone(), sink)
    };
    let sink: Arc<dyn OutboxSink> = Arc::new(
        QueueSink::open(opened.queue.clone(), "index")
            .await
            .expect("sink"),
    );
    let mut handled = 0;
    for round in 0..6 {
        if round == 3 {
            clock.advance(chrono::Duration::minutes(10));
        }
        relay(sink.clone()).run_once().await.expect("relay");
        handled += opened.drain_queues().await;
    }
    assert!(handled > 10, "the queued work was handled: {handled}");

    // Everything as expected, nothing left.
    for m in members_after() {
        let read = members.get(&m.team, &format!("m_{:02}", m.id)).await;
        assert_eq!(read.expect("read").map(|s| s.value), Some(m));
    }
    for b in badges_after() {
        let read = badges.get(&b.team, &format!("b_{:02}", b.id)).await;
        assert_eq!(read.expect("read").map(|s| s.value), Some(b));
    }
    assert!(members.get("t0", "m_02").await.expect("read").is_none());
    assert!(
        opened
            .store
            .get(ARCHIVE, "t0", "m_02", None)
            .await
            .expect("read")
            .is_some(),
        "archived"
    );
    let options = AuditOptions {
        blobs: Some(opened.blobs.clone()),
        ..AuditOptions::default()
    };
    for report in [
        members.audit(&options).await.expect("audit"),
        badges.audit(&options).await.expect("audit"),
    ] {
        assert!(report.is_clean(), "{:?}", report.findings);
        assert!(report.primaries > 0);
    }
    for table in ["Members", "Badges"] {
        assert!(
            outbox::scan(&opened.store, table)
                .await
                .expect("scan")
                .is_empty()
        );
        let rows = opened
            .store
            .query_all(table, tablekit_core::Query::new())
            .await
            .expect("rows");
        assert!(
            !rows.iter().any(is_tombstone),
            "tombstones buried in {table}"
        );
    }
    let backlog = tablekit_patterns::consistency::backlog(&opened.store)
        .await
        .expect("backlog");
    assert_eq!(
        (backlog.entries, backlog.delayed, backlog.markers),
        (0, 0, 0)
    );
    for name in QUEUES {
        let stats = opened.queue.stats(name).await.expect("stats");
        assert_eq!((stats.waiting, stats.poisoned), (0, 0), "{name}");
    }
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("the fixture") {
        let entry = entry.expect("an entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a type").is_dir() {
            std::fs::create_dir_all(&target).expect("a folder");
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("a copy");
        }
    }
}
