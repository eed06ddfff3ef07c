//! The change feed: each write's change recorded in its own transaction, sequenced by the
//! relay into its share's log, read by groups from a position, checkpointed under ETags,
//! divided by leases, trimmed by retention (never skipped silently).

use std::sync::Arc;
use std::time::Duration;

use tablekit_core::fault::{FaultyStore, Timing};
use tablekit_core::{IfMatch, MemoryStore, Query, TableStore, filter};
use tablekit_derive::Entity;
use tablekit_patterns::changes::ChangeKind;
use tablekit_patterns::feed::{self, FeedChange, Group, Position};
use tablekit_patterns::index::{IndexedTable, InlineSink, Relay, handlers};

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Orders",
    kind = "Order",
    partition_key = "{customer}",
    row_key = "{id:04}",
    crate = "tablekit_core"
)]
#[feed(retention = "1h", shares = 4)]
struct Order {
    customer: String,
    id: u32,
    total: i64,
}

fn order(customer: &str, id: u32, total: i64) -> Order {
    Order {
        customer: customer.into(),
        id,
        total,
    }
}

async fn orders<S: TableStore + Clone + 'static>(store: &S) -> IndexedTable<Order, S> {
    let orders = IndexedTable::options()
        .follow_up_elsewhere()
        .build(store.clone())
        .expect("options");
    orders.create().await.expect("create");
    orders
}

/// A relay alone (markers cleared as soon as their lease lapses).
fn relay<S: TableStore + Clone + 'static>(store: &S) -> Relay<S> {
    Relay::options().alone().late(Duration::ZERO).build(
        store.clone(),
        Arc::new(InlineSink::new(handlers(store.clone(), None))),
    )
}

/// The changes still waiting in the primaries' table (not yet sequenced).
async fn waiting<S: TableStore>(store: &S) -> usize {
    let query = Query::with_filter(feed::log::waiting_range());
    store.query_all("Orders", query).await.expect("scan").len()
}

fn summary(changes: &[FeedChange]) -> Vec<(String, String, ChangeKind, i64)> {
    changes
        .iter()
        .map(|c| {
            let total = c
                .event
                .entity
                .get("total")
                .and_then(|v| v.as_i64())
                .unwrap_or(-1);
            (
                c.event.partition_key.clone(),
                c.event.row_key.clone(),
                c.event.change,
                total,
            )
        })
        .collect()
}

/// The totals of changes, in the order given.
fn totals(changes: &[FeedChange]) -> Vec<i64> {
    summary(changes).into_iter().map(|c| c.3).collect()
}

/// Polls a group until it returns nothing, checkpointing each batch.
async fn drain<S: TableStore>(group: &Group<S>) -> Vec<FeedChange> {
    let mut all = Vec::new();
    loop {
        let changes = group.poll().await.expect("poll");
        if changes.is_empty() {
            return all;
        }
        group.checkpoint(&changes).await.expect("checkpoint");
        all.extend(changes);
    }
}

#[tokio::test]
async fn every_committed_change_reaches_a_group_once_in_version_order() {
    let store = MemoryStore::new();
    let orders = orders(&store).await;
    orders.insert(&order("ada", 1, 10)).await.expect("insert");
    orders
        .replace(&order("ada", 1, 11), IfMatch::Any)
        .await
        .expect("replace");
    orders.insert(&order("bob", 2, 20)).await.expect("insert");
    orders
        .delete("ada", "0001", IfMatch::Any)
        .await
        .expect("delete");
    assert_eq!(
        waiting(&store).await,
        4,
        "each write recorded its change beside it"
    );
    let report = relay(&store).run_once().await.expect("relay");
    assert_eq!(report.sequenced, 4);
    assert_eq!(
        waiting(&store).await,
        0,
        "sequenced changes leave their partition"
    );

    let group = Group::new(store.clone(), "Orders", "billing", 4).expect("group");
    let changes = drain(&group).await;
    let mut ada: Vec<_> = summary(&changes)
        .into_iter()
        .filter(|c| c.0 == "ada")
        .collect();
    assert_eq!(
        ada.drain(..).map(|c| (c.2, c.3)).collect::<Vec<_>>(),
        vec![
            (ChangeKind::Insert, 10),
            (ChangeKind::Update, 11),
            (ChangeKind::Delete, 11)
        ]
    );
    assert_eq!(changes.len(), 4);
    // Per share, numbers from 1 with no gap; per entity, versions grow.
    let mut per_share: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
    for c in &changes {
        per_share.entry(c.share).or_default().push(c.seq);
    }
    for seqs in per_share.values() {
        assert_eq!(*seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    }
    let versions: Vec<i64> = changes
        .iter()
        .filter(|c| c.event.partition_key == "ada")
        .map(|c| c.event.version)
        .collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    // Read again: nothing new. Another group reads it all again, independently.
    assert!(group.poll().await.expect("poll").is_empty());
    let audit = Group::new(store.clone(), "Orders", "audit", 4).expect("group");
    assert_eq!(drain(&audit).await.len(), 4);
}

#[tokio::test]
async fn a_refused_write_records_nothing_and_a_lost_answer_records_exactly_one() {
    let store = FaultyStore::new(MemoryStore::new());
    let orders = orders(&store).await;
    orders.insert(&order("ada", 1, 10)).await.expect("insert");
    // Refused: the key is taken.
    orders
        .insert(&order("ada", 1, 99))
        .await
        .expect_err("taken");
    assert_eq!(
        waiting(&store).await,
        1,
        "the refused insert recorded nothing"
    );
    // Landed, its answer lost: recognised, and one change.
    store.fail_write(0, Timing::AfterWrite);
    orders.insert(&order("ada", 2, 20)).await.expect("landed");
    assert_eq!(waiting(&store).await, 2);
    // Never reached the store: nothing.
    store.fail_write(0, Timing::BeforeWrite);
    orders
        .insert(&order("ada", 3, 30))
        .await
        .expect_err("not landed");
    assert_eq!(waiting(&store).await, 2);
    relay(&store).run_once().await.expect("relay");
    let group = Group::new(store.clone(), "Orders", "billing", 4).expect("group");
    let changes = drain(&group).await;
    assert_eq!(totals(&changes), vec![10, 20]);
}

#[tokio::test]
async fn a_group_restarted_goes_on_after_its_checkpoint_and_redelivers_only_what_came_after() {
    let store = MemoryStore::new();
    let orders = orders(&store).await;
    for id in 0..6 {
        orders
            .insert(&order("ada", id, i64::from(id)))
            .await
            .expect("insert");
    }
    relay(&store).run_once().await.expect("relay");
    let first = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .member("one")
        .expect("member")
        .lease(Duration::from_millis(200));
    let changes = first.poll().await.expect("poll");
    assert_eq!(changes.len(), 6);
    // Handled the first four and checkpointed them; then the process dies.
    first.checkpoint(&changes[..4]).await.expect("checkpoint");
    drop(first);
    // Another member of the group takes the share once the lease lapses, from the
    // checkpoint: the two unhandled changes again, nothing before.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let second = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .member("two")
        .expect("member");
    let again = drain(&second).await;
    assert_eq!(
        again.iter().map(|c| c.seq).collect::<Vec<_>>(),
        vec![5, 6],
        "only what came after the checkpoint"
    );
}

#[tokio::test]
async fn members_divide_the_shares_and_take_over_when_one_leaves() {
    let store = MemoryStore::new();
    let one = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .member("one")
        .expect("member");
    one.balance().await.expect("balance");
    assert_eq!(one.held().len(), 4, "alone, it holds every share");
    let two = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .member("two")
        .expect("member");
    two.balance().await.expect("balance");
    assert!(two.held().is_empty(), "every share is held");
    // The first sees the second and gives up half; the second takes them.
    one.balance().await.expect("balance");
    two.balance().await.expect("balance");
    assert_eq!(one.held().len(), 2);
    assert_eq!(two.held().len(), 2);
    let mut all: Vec<u32> = one.held().into_iter().chain(two.held()).collect();
    all.sort_unstable();
    assert_eq!(all, vec![0, 1, 2, 3]);
    // One leaves: the other takes everything on its next balance.
    one.leave().await.expect("leave");
    two.balance().await.expect("balance");
    assert_eq!(two.held().len(), 4);
}

#[tokio::test]
async fn a_checkpoint_after_the_share_was_taken_is_refused() {
    let store = MemoryStore::new();
    let orders = orders(&store).await;
    orders.insert(&order("ada", 1, 1)).await.expect("insert");
    relay(&store).run_once().await.expect("relay");
    let one = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .member("one")
        .expect("member")
        .lease(Duration::from_millis(100));
    let changes = one.poll().await.expect("poll");
    assert_eq!(changes.len(), 1);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let two = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .member("two")
        .expect("member");
    assert_eq!(
        drain(&two).await.len(),
        1,
        "the lapsed lease was taken over"
    );
    let done = one.checkpoint(&changes).await.expect("checkpoint");
    assert_eq!(done.lost, vec![changes[0].share], "{done:?}");
    assert!(done.moved.is_empty());
}

#[tokio::test]
async fn a_position_retention_trimmed_is_an_error_naming_the_oldest_kept() {
    let store = MemoryStore::new();
    let orders = orders(&store).await;
    orders.insert(&order("ada", 1, 1)).await.expect("insert");
    orders.insert(&order("ada", 2, 2)).await.expect("insert");
    relay(&store).run_once().await.expect("relay");
    let share = feed::share_of("Orders", "ada", 4);
    // A group that read one change, then everything older than nothing is trimmed.
    let slow = Group::new(store.clone(), "Orders", "slow", 4).expect("group");
    let first = slow.poll().await.expect("poll");
    slow.checkpoint(&first[..1]).await.expect("checkpoint");
    let trimmed = feed::trim(&store, "Orders", 4, Duration::ZERO)
        .await
        .expect("trim");
    assert_eq!(trimmed.deleted, 2);
    let head = feed::head(&store, "Orders", share).await.expect("head");
    assert_eq!((head.oldest, head.next), (3, 3));
    // The slow group, restarted from its checkpoint (1): position 2 is gone.
    slow.leave().await.expect("leave");
    let slow = Group::new(store.clone(), "Orders", "slow", 4).expect("group");
    let err = drain_err(&slow).await;
    assert!(
        matches!(
            err,
            tablekit_core::Error::PositionExpired {
                position: 2,
                oldest: 3,
                ..
            }
        ),
        "{err}"
    );
    // A new group from the beginning: the beginning is gone too, so it reads a snapshot
    // of the table (never a silent start at the oldest kept).
    let late = Group::new(store.clone(), "Orders", "late", 4).expect("group");
    let read = drain(&late).await;
    assert_eq!(
        summary(&read)
            .into_iter()
            .map(|c| (c.2, c.3))
            .collect::<Vec<_>>(),
        vec![(ChangeKind::Snapshot, 1), (ChangeKind::Snapshot, 2)]
    );
    // From a checkpoint older than what is kept: an error naming the oldest.
    let mut old = feed::Checkpoint::default();
    old.shares.insert(share, 1);
    let stale = Group::new(store.clone(), "Orders", "stale", 4)
        .expect("group")
        .from(Position::Checkpoint(old));
    let err = drain_err(&stale).await;
    assert!(
        matches!(
            err,
            tablekit_core::Error::PositionExpired {
                position: 2,
                oldest: 3,
                ..
            }
        ),
        "{err}"
    );
    // From now on is fine, and gets what comes next.
    let now = Group::new(store.clone(), "Orders", "now", 4)
        .expect("group")
        .from(Position::Now);
    assert!(now.poll().await.expect("poll").is_empty());
    orders.insert(&order("ada", 3, 3)).await.expect("insert");
    relay(&store).run_once().await.expect("relay");
    assert_eq!(totals(&drain(&now).await), vec![3]);
}

async fn drain_err<S: TableStore>(group: &Group<S>) -> tablekit_core::Error {
    loop {
        match group.poll().await {
            Ok(changes) if changes.is_empty() => panic!("no error"),
            Ok(changes) => {
                group.checkpoint(&changes).await.expect("checkpoint");
            }
            Err(e) => return e,
        }
    }
}

#[tokio::test]
async fn a_checkpoint_of_changes_the_member_was_never_handed_is_refused_and_records_nothing() {
    let store = MemoryStore::new();
    let orders = orders(&store).await;
    for id in 0..3 {
        orders
            .insert(&order("ada", id, i64::from(id)))
            .await
            .expect("insert");
    }
    relay(&store).run_once().await.expect("relay");
    let group = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .member("one")
        .expect("member")
        .read_size(2);
    let changes = group.poll().await.expect("poll");
    assert_eq!(changes.len(), 2, "the read size");
    // One past what was handed (the third change exists but was not read), and one past
    // the log's end.
    for seq in [3, 40] {
        let mut made_up = changes[1].clone();
        made_up.seq = seq;
        let err = group
            .checkpoint(&[changes[0].clone(), made_up])
            .await
            .expect_err("never handed");
        assert!(
            matches!(&err, tablekit_core::Error::NotHanded { seq: s, handed: 2, .. } if *s == seq),
            "{err}"
        );
        assert_eq!(err.kind(), tablekit_core::ErrorKind::InvalidInput);
    }
    // Nothing was recorded: a new member after this one leaves reads all three.
    group.leave().await.expect("leave");
    let next = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .member("two")
        .expect("member");
    let all = drain(&next).await;
    assert_eq!(all.iter().map(|c| c.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
    // What was handed checkpoints as before.
    let third = Group::new(store.clone(), "Orders", "other", 4).expect("group");
    let read = third.poll().await.expect("poll");
    third.checkpoint(&read).await.expect("handed");
}

/// Runs `member` with a handler taking `per_change` until `seen` holds `total` changes,
/// counting every delivery in `deliveries`.
async fn consume_until(
    member: &Group<MemoryStore>,
    per_change: Duration,
    total: usize,
    seen: &std::sync::Mutex<std::collections::BTreeSet<(u32, u64)>>,
    deliveries: &std::sync::atomic::AtomicUsize,
) {
    while seen.lock().expect("seen").len() < total {
        let consumed = member
            .consume_once(|change| async move {
                tokio::time::sleep(per_change).await;
                seen.lock()
                    .expect("seen")
                    .insert((change.share, change.seq));
                deliveries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            })
            .await
            .expect("consume");
        if consumed.handled == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

#[tokio::test]
async fn two_members_with_a_handler_slower_than_the_lease_drain_the_backlog() {
    let store = MemoryStore::new();
    let orders = orders(&store).await;
    let total = 400;
    for id in 0..total {
        orders
            .insert(&order(&format!("c{}", id % 8), id, 1))
            .await
            .expect("insert");
    }
    while relay(&store).run_once().await.expect("relay").sequenced > 0 {}
    // A read hands out up to 1,000 changes per share: at 3 ms a change, handling one
    // read takes about four leases of 300 ms. Without renewing while it handles, each
    // member is taken for dead mid-read and every checkpoint is refused in turn.
    let lease = Duration::from_millis(300);
    let member = |id: &str| {
        Group::new(store.clone(), "Orders", "billing", 4)
            .expect("group")
            .member(id)
            .expect("member")
            .lease(lease)
    };
    let (one, two) = (member("one"), member("two"));
    let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
    let deliveries = std::sync::atomic::AtomicUsize::new(0);
    let per_change = Duration::from_millis(3);
    let both = async {
        tokio::join!(
            consume_until(&one, per_change, total as usize, &seen, &deliveries),
            consume_until(&two, per_change, total as usize, &seen, &deliveries),
        )
    };
    tokio::time::timeout(Duration::from_secs(60), both)
        .await
        .expect("the two members drain the backlog");
    let delivered = deliveries.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(seen.lock().expect("seen").len(), total as usize);
    // Duplicates come only from a share changing hands between two renewals.
    assert!(
        delivered <= total as usize * 5 / 4,
        "{delivered} deliveries of {total} changes"
    );
}

#[tokio::test]
async fn a_member_started_again_with_its_id_takes_its_shares_at_once_and_fences_the_older() {
    let store = MemoryStore::new();
    let orders = orders(&store).await;
    for id in 0..8 {
        orders
            .insert(&order(&format!("c{id}"), id, 1))
            .await
            .expect("insert");
    }
    relay(&store).run_once().await.expect("relay");
    let lease = Duration::from_millis(300);
    let older = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .member("one")
        .expect("member")
        .lease(lease);
    let handed = older.poll().await.expect("poll");
    assert_eq!(handed.len(), 8);
    assert_eq!(older.held().len(), 4);
    // The same id started again (a restart, or a second process given the same id):
    // it reads at once, from the group's checkpoints, without waiting for the leases.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let newer = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .member("one")
        .expect("member")
        .lease(lease);
    let again = newer.poll().await.expect("poll");
    assert_eq!(again.len(), 8, "its shares at once");
    // The older one's checkpoint is refused (the shares changed hands), and at its next
    // balance it learns it was replaced: it reads nothing more.
    let done = older.checkpoint(&handed).await.expect("checkpoint");
    assert_eq!(done.lost.len(), 4, "{done:?}");
    tokio::time::sleep(lease / 2).await;
    let err = older.poll().await.expect_err("fenced");
    assert!(
        matches!(&err, tablekit_core::Error::MemberReplaced { member, .. } if member == "one"),
        "{err}"
    );
    assert!(older.held().is_empty());
    // Its leave takes nothing from the newer instance.
    older.leave().await.expect("leave");
    newer.checkpoint(&again).await.expect("checkpoint");
    assert_eq!(newer.held().len(), 4);
    tokio::time::sleep(lease / 2).await;
    assert!(newer.poll().await.expect("poll").is_empty());
    assert_eq!(newer.held().len(), 4, "still the id's");
}

#[tokio::test]
async fn a_quiet_member_is_told_why_changes_unsequenced_and_shares_leased_elsewhere() {
    let store = MemoryStore::new();
    // Follow-up work applied inline, and no relay: the changes wait in their partitions.
    let orders = IndexedTable::<Order, _>::options()
        .inline_apply()
        .build(store.clone())
        .expect("options");
    orders.create().await.expect("create");
    for id in 0..3 {
        orders
            .insert(&order(&format!("c{id}"), id, 1))
            .await
            .expect("insert");
    }
    let one = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .member("one")
        .expect("member");
    assert!(one.poll().await.expect("poll").is_empty());
    let quiet = one.quiet().await.expect("quiet");
    assert_eq!((quiet.waiting, quiet.relays), (3, 0), "{quiet:?}");
    let reasons = quiet.reasons();
    assert!(
        reasons[0].starts_with("3 changes wait in their partitions with no relay running"),
        "{reasons:?}"
    );
    let backlog = tablekit_patterns::consistency::backlog(&store)
        .await
        .expect("backlog");
    assert_eq!(backlog.feed_changes, 3, "{backlog:?}");
    // Sequenced, and every share held by `one`: a second member is told who holds them
    // and until when.
    while relay(&store).run_once().await.expect("relay").sequenced > 0 {}
    assert_eq!(one.poll().await.expect("poll").len(), 3);
    let two = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .member("two")
        .expect("member");
    let _ = two.poll().await.expect("poll");
    let quiet = two.quiet().await.expect("quiet");
    assert_eq!(quiet.waiting, 0);
    assert!(!quiet.leased_elsewhere.is_empty(), "{quiet:?}");
    assert!(
        quiet
            .reasons()
            .iter()
            .all(|r| r.contains("is leased by member `one` until")),
        "{:?}",
        quiet.reasons()
    );
}

#[tokio::test]
async fn a_checkpoint_naming_a_share_beyond_the_count_is_an_error_and_moves_nothing() {
    let store = MemoryStore::new();
    let orders = orders(&store).await;
    orders.insert(&order("ada", 1, 1)).await.expect("insert");
    relay(&store).run_once().await.expect("relay");
    // Saved from the feed when it had 16 shares; it has 4 now.
    let saved = feed::Checkpoint {
        shares: [(0, 0), (9, 3)].into_iter().collect(),
    };
    let group = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .from(Position::Checkpoint(saved.clone()));
    let err = group.poll().await.expect_err("share 9 of 4");
    assert!(
        matches!(&err, tablekit_core::Error::Config(m) if m.contains("share 9") && m.contains("4 shares")),
        "{err}"
    );
    assert!(group.held().is_empty(), "no share taken");
    let mut tail = feed::Tail::new(store.clone(), "Orders", 4, Position::Checkpoint(saved));
    let err = tail.next().await.expect_err("share 9 of 4");
    assert_eq!(err.kind(), tablekit_core::ErrorKind::InvalidInput, "{err}");
    // No share row was written: the group's shares are still free for a right start.
    let rows = store
        .query_all(
            feed::FEED_TABLE,
            Query::with_filter(filter::row_key().ge("share~") & filter::row_key().lt("share~~")),
        )
        .await
        .expect("rows");
    assert!(rows.is_empty(), "{rows:?}");
}

#[tokio::test]
async fn a_group_from_a_time_gets_every_change_since_then() {
    let store = MemoryStore::new();
    let orders = orders(&store).await;
    orders.insert(&order("ada", 1, 1)).await.expect("insert");
    relay(&store).run_once().await.expect("relay");
    let since = tablekit_core::clock::now();
    orders.insert(&order("ada", 2, 2)).await.expect("insert");
    relay(&store).run_once().await.expect("relay");
    // Within the clock-skew bound, the earlier change comes too; everything after the
    // time does.
    let group = Group::new(store.clone(), "Orders", "since", 4)
        .expect("group")
        .from(Position::At(since));
    let got = totals(&drain(&group).await);
    assert!(got.ends_with(&[2]), "{got:?}");
    // From a time later than every change: nothing.
    let later = Group::new(store.clone(), "Orders", "later", 4)
        .expect("group")
        .from(Position::At(since + chrono::Duration::hours(1)));
    assert!(drain(&later).await.is_empty());
}

#[tokio::test]
async fn consume_once_checkpoints_what_was_handled_and_reads_again_from_a_failed_change() {
    let store = MemoryStore::new();
    let orders = orders(&store).await;
    for id in 0..4 {
        orders
            .insert(&order("ada", id, i64::from(id)))
            .await
            .expect("insert");
    }
    relay(&store).run_once().await.expect("relay");
    let group = Group::new(store.clone(), "Orders", "billing", 4).expect("group");
    // The handler fails on the third change: the first two are checkpointed.
    let mut seen = Vec::new();
    let err = group
        .consume_once(|change| {
            seen.push(change.seq);
            let fail = change.seq == 3;
            async move {
                if fail {
                    Err(tablekit_core::Error::Transient {
                        message: "the handler failed".into(),
                    })
                } else {
                    Ok(())
                }
            }
        })
        .await
        .expect_err("the handler's error");
    assert!(
        matches!(err, tablekit_core::Error::Transient { .. }),
        "{err}"
    );
    assert_eq!(seen, vec![1, 2, 3]);
    // The next round reads again from the change it failed on.
    let mut again = Vec::new();
    let done = group
        .consume_once(|change| {
            again.push(change.seq);
            async { Ok(()) }
        })
        .await
        .expect("consume");
    assert_eq!(again, vec![3, 4]);
    assert_eq!(done.handled, 2);
    assert_eq!(
        done.checkpointed
            .moved
            .values()
            .copied()
            .collect::<Vec<_>>(),
        vec![4]
    );
    // Another member goes on after the checkpoint: nothing is left.
    group.leave().await.expect("leave");
    let other = Group::new(store.clone(), "Orders", "billing", 4).expect("group");
    assert!(drain(&other).await.is_empty());
}

/// A store whose `n`-th query of the feed's table from now on fails (once), whose
/// deletes of waiting changes fail while `removals` is set, whose next write of a
/// group's share row fails once [`fail_checkpoint`](Self::fail_checkpoint) is called, and
/// whose point reads of the feed's table wait at a gate once
/// [`stall_feed_reads`](Self::stall_feed_reads) set one.
#[derive(Clone, Default)]
struct FailingQuery {
    inner: MemoryStore,
    left: Arc<std::sync::atomic::AtomicI64>,
    removals: Arc<std::sync::atomic::AtomicBool>,
    checkpoint: Arc<std::sync::atomic::AtomicBool>,
    gate: Arc<std::sync::Mutex<Option<Arc<tokio::sync::Semaphore>>>>,
    stalled: Arc<tokio::sync::Notify>,
}

impl FailingQuery {
    /// From now on a point read of the feed's table waits for a permit of the gate
    /// returned (closed at first).
    fn stall_feed_reads(&self) -> Arc<tokio::sync::Semaphore> {
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        *self.gate.lock().expect("gate") = Some(gate.clone());
        gate
    }

    /// Returns once a read waits at the gate.
    async fn stalled(&self) {
        self.stalled.notified().await;
    }

    fn fail_query(&self, n: i64) {
        self.left.store(n, std::sync::atomic::Ordering::SeqCst);
    }

    fn fail_removals(&self, fail: bool) {
        self.removals
            .store(fail, std::sync::atomic::Ordering::SeqCst);
    }

    fn fail_checkpoint(&self) {
        self.checkpoint
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether `op` is a group's share row written while a checkpoint failure is armed
    /// (disarming it: it fails once).
    fn refuses_checkpoint(&self, op: &tablekit_core::WriteOp) -> bool {
        matches!(op, tablekit_core::WriteOp::Replace(entity, _)
            if entity.row_key.starts_with("share~"))
            && self
                .checkpoint
                .swap(false, std::sync::atomic::Ordering::SeqCst)
    }

    fn refuses(&self, op: &tablekit_core::WriteOp) -> bool {
        self.removals.load(std::sync::atomic::Ordering::SeqCst)
            && matches!(op, tablekit_core::WriteOp::Delete { row_key, .. }
                if row_key.starts_with(feed::log::WAITING_PREFIX))
    }
}

fn removal_failed() -> tablekit_core::Error {
    tablekit_core::Error::Transient {
        message: "delete failed".into(),
    }
}

impl TableStore for FailingQuery {
    async fn create_table(&self, table: &str) -> tablekit_core::Result<()> {
        self.inner.create_table(table).await
    }
    async fn delete_table(&self, table: &str) -> tablekit_core::Result<()> {
        self.inner.delete_table(table).await
    }
    async fn list_tables(&self, prefix: &str) -> tablekit_core::Result<Vec<String>> {
        self.inner.list_tables(prefix).await
    }
    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> tablekit_core::Result<Option<tablekit_core::Entity>> {
        let gate = self.gate.lock().expect("gate").clone();
        if table == feed::FEED_TABLE
            && let Some(gate) = gate
        {
            self.stalled.notify_one();
            let _permit = gate.acquire().await;
        }
        self.inner.get(table, partition_key, row_key, select).await
    }
    async fn query(
        &self,
        table: &str,
        query: &Query,
    ) -> tablekit_core::Result<tablekit_core::Page> {
        if table == feed::FEED_TABLE
            && self.left.fetch_sub(1, std::sync::atomic::Ordering::SeqCst) == 1
        {
            return Err(tablekit_core::Error::Transient {
                message: "read failed".into(),
            });
        }
        self.inner.query(table, query).await
    }
    async fn execute(
        &self,
        table: &str,
        op: tablekit_core::WriteOp,
    ) -> tablekit_core::Result<Option<tablekit_core::ETag>> {
        if self.refuses(&op) {
            return Err(removal_failed());
        }
        if table == feed::FEED_TABLE && self.refuses_checkpoint(&op) {
            return Err(tablekit_core::Error::Transient {
                message: "checkpoint failed".into(),
            });
        }
        self.inner.execute(table, op).await
    }
    async fn submit_batch(
        &self,
        table: &str,
        batch: tablekit_core::Batch,
    ) -> tablekit_core::Result<Vec<Option<tablekit_core::ETag>>> {
        if batch.operations().iter().any(|op| self.refuses(op)) {
            return Err(removal_failed());
        }
        self.inner.submit_batch(table, batch).await
    }
}

#[tokio::test]
async fn a_checkpoint_failing_mid_read_stops_the_round_and_the_next_reads_the_rest() {
    let store = FailingQuery::default();
    let orders = orders(&store).await;
    for id in 1..=4 {
        orders
            .insert(&order("ada", id, i64::from(id)))
            .await
            .expect("insert");
    }
    relay(&store).run_once().await.expect("relay");
    // A handler slower than a quarter of the lease: the renewal checkpoint comes due
    // after the first change, and that checkpoint fails.
    let group = Group::new(store.clone(), "Orders", "billing", 4)
        .expect("group")
        .lease(Duration::from_millis(200));
    let mut seen = Vec::new();
    let failing = store.clone();
    let err = group
        .consume_once(|change| {
            seen.push(change.seq);
            failing.fail_checkpoint();
            async {
                tokio::time::sleep(Duration::from_millis(120)).await;
                Ok(())
            }
        })
        .await
        .expect_err("the checkpoint's error");
    assert!(
        matches!(&err, tablekit_core::Error::Transient { message } if message == "checkpoint failed"),
        "{err}"
    );
    assert_eq!(seen, vec![1], "the round stops at the failed checkpoint");
    // The member's next round reads every change after the one it handled — none
    // skipped, none twice.
    let mut rest = Vec::new();
    group
        .consume_once(|change| {
            rest.push(change.seq);
            async { Ok(()) }
        })
        .await
        .expect("consume");
    assert_eq!(rest, vec![2, 3, 4]);
    group.leave().await.expect("leave");
    let other = Group::new(store.clone(), "Orders", "billing", 4).expect("group");
    assert!(drain(&other).await.is_empty(), "all of it checkpointed");
}

#[tokio::test]
async fn a_sequenced_change_whose_removal_fails_keeps_its_partition_marked_for_the_next_pass() {
    let clock = tablekit_core::clock::ManualClock::new(chrono::Utc::now());
    let _clock = tablekit_core::clock::simulate(clock.shared());
    let store = FailingQuery::default();
    let orders = orders(&store).await;
    orders.insert(&order("ada", 1, 10)).await.expect("insert");
    // The marker's lease lapsed: a pass that found nothing left would clear it.
    clock.advance(chrono::Duration::minutes(5));
    store.fail_removals(true);
    let report = relay(&store).run_once().await.expect("relay");
    assert_eq!(report.sequenced, 1, "appended: {report:?}");
    assert_eq!(waiting(&store).await, 1, "its removal failed");
    store.fail_removals(false);
    relay(&store).run_once().await.expect("relay");
    assert_eq!(
        waiting(&store).await,
        0,
        "the partition stayed marked: the next pass found the change appended and removed it"
    );
    let group = Group::new(store.clone(), "Orders", "billing", 4).expect("group");
    let changes = drain(&group).await;
    assert_eq!(totals(&changes), vec![10], "once");
}

#[tokio::test]
async fn a_snapshot_counts_a_change_appended_before_it_whose_removal_is_not_done_as_its_row() {
    let clock = tablekit_core::clock::ManualClock::new(chrono::Utc::now());
    let _clock = tablekit_core::clock::simulate(clock.shared());
    let store = FailingQuery::default();
    let orders = orders(&store).await;
    // A first change, sequenced and then trimmed: a group from the beginning snapshots.
    orders.insert(&order("ada", 1, 1)).await.expect("insert");
    relay(&store).run_once().await.expect("relay");
    clock.advance(chrono::Duration::hours(2));
    feed::trim(&store, "Orders", 4, Duration::from_secs(3_600))
        .await
        .expect("trim");
    // A second, appended to the log, its removal from the partition failed.
    orders.insert(&order("ada", 2, 20)).await.expect("insert");
    store.fail_removals(true);
    assert_eq!(relay(&store).run_once().await.expect("relay").sequenced, 1);
    assert_eq!(waiting(&store).await, 1);
    // The snapshot starts after it in the log: its row is what delivers it.
    let group = Group::new(store.clone(), "Orders", "rebuild", 4).expect("group");
    let mut got = totals(&drain(&group).await);
    got.sort_unstable();
    assert_eq!(got, vec![1, 20], "both rows of the table");
    // The next pass removes it without appending it again.
    store.fail_removals(false);
    relay(&store).run_once().await.expect("relay");
    assert_eq!(waiting(&store).await, 0);
    assert!(drain(&group).await.is_empty());
}

/// Two relays of two stores in one process, each store with an `Orders` table and a
/// change in the same share: while one relay's sequencing waits on its store, the other's
/// goes on. Each relay keeps its own locks of the share logs; a lock of the process, keyed
/// by the table's name, made the second wait for the first (and tied together the
/// simulations a test process runs side by side, so a seed did not replay exactly).
#[tokio::test(start_paused = true)]
async fn a_relay_sequencing_waits_for_no_relay_of_another_store() {
    let stalled = FailingQuery::default();
    let other = MemoryStore::new();
    for store in [&stalled.inner, &other] {
        orders(store)
            .await
            .insert(&order("ada", 1, 10))
            .await
            .expect("insert");
    }
    let gate = stalled.stall_feed_reads();
    let first = tokio::spawn({
        let stalled = stalled.clone();
        async move { relay(&stalled).run_once().await }
    });
    stalled.stalled().await;
    // Nothing else runs: were the second relay to wait for the first, the paused clock
    // would jump to the end of this wait.
    let second = tokio::time::timeout(Duration::from_secs(600), relay(&other).run_once())
        .await
        .expect("the other store's relay waited for the stalled one")
        .expect("relay");
    assert_eq!(second.sequenced, 1);
    gate.add_permits(1_000);
    let first = first.await.expect("task").expect("relay");
    assert_eq!(first.sequenced, 1);
    assert_eq!(waiting(&stalled).await, 0);
    assert_eq!(waiting(&other).await, 0);
}

#[tokio::test]
async fn a_poll_whose_read_of_one_share_fails_hands_out_nothing_and_skips_nothing() {
    let store = FailingQuery::default();
    let orders = orders(&store).await;
    // Two customers in two shares.
    let customers: Vec<String> = (0..100).map(|n| format!("c{n}")).collect();
    let first = &customers[0];
    let share = |c: &str| feed::share_of("Orders", c, 4);
    let Some(second) = customers.iter().find(|c| share(c) != share(first)) else {
        panic!("two shares");
    };
    for (customer, id) in [(first, 1), (second, 2), (first, 3), (second, 4)] {
        orders
            .insert(&order(customer, id, i64::from(id)))
            .await
            .expect("insert");
    }
    relay(&store).run_once().await.expect("relay");
    let group = Group::new(store.clone(), "Orders", "billing", 4).expect("group");
    group.balance().await.expect("balance");
    assert_eq!(group.held().len(), 4);
    // The poll reads the shares in order: the read of the later of the two fails.
    let later = share(first).max(share(second));
    store.fail_query(i64::from(later) + 1);
    group.poll().await.expect_err("a read failed");
    let changes = drain(&group).await;
    let mut ids = totals(&changes);
    ids.sort_unstable();
    assert_eq!(ids, vec![1, 2, 3, 4], "every change, none skipped");
}

#[tokio::test]
async fn a_group_from_the_beginning_after_a_trim_reads_a_snapshot_then_the_log_and_ends_equal_to_the_table()
 {
    let store = MemoryStore::new();
    let orders = orders(&store).await;
    for id in 0..40 {
        let customer = format!("c{}", id % 7);
        orders
            .insert(&order(&customer, id, i64::from(id)))
            .await
            .expect("insert");
    }
    orders
        .delete("c1", "0001", IfMatch::Any)
        .await
        .expect("delete");
    orders
        .replace(&order("c2", 2, 200), IfMatch::Any)
        .await
        .expect("replace");
    relay(&store).run_once().await.expect("relay");
    feed::trim(&store, "Orders", 4, Duration::ZERO)
        .await
        .expect("trim");
    // Changes after the trim: in the log.
    orders
        .replace(&order("c3", 3, 300), IfMatch::Any)
        .await
        .expect("replace");
    orders.insert(&order("c9", 99, 9)).await.expect("insert");
    relay(&store).run_once().await.expect("relay");

    // A newcomer from the beginning: no error, a snapshot, and a state equal to the table.
    let group = Group::new(store.clone(), "Orders", "newcomer", 4).expect("group");
    // Once it has taken its shares, the snapshot it has still to read counts as behind:
    // every row of the table (40 inserted, one deleted, one inserted after the trim).
    group.balance().await.expect("balance");
    let lag = feed::lag(&store, "Orders", 4).await.expect("lag");
    let newcomer = lag
        .groups
        .iter()
        .find(|g| g.group == "newcomer")
        .expect("the group");
    let rows: u64 = newcomer.shares.iter().map(|s| s.snapshot_rows).sum();
    assert_eq!(rows, 40, "{newcomer:?}");
    assert!(newcomer.behind() >= rows, "{newcomer:?}");
    let mut state: std::collections::BTreeMap<(String, String), (i64, i64)> = Default::default();
    let mut snapshot_rows = 0;
    loop {
        let changes = group.poll().await.expect("poll");
        if changes.is_empty() {
            break;
        }
        for c in &changes {
            let key = (c.event.partition_key.clone(), c.event.row_key.clone());
            if let Some((version, _)) = state.get(&key) {
                assert!(
                    c.event.version >= *version,
                    "no older change after a newer: {c:?}"
                );
            }
            if c.event.change == ChangeKind::Snapshot {
                snapshot_rows += 1;
            }
            if c.event.change == ChangeKind::Delete {
                state.remove(&key);
            } else {
                let total = c
                    .event
                    .entity
                    .get("total")
                    .and_then(|v| v.as_i64())
                    .unwrap_or(-1);
                state.insert(key, (c.event.version, total));
            }
        }
        group.checkpoint(&changes).await.expect("checkpoint");
    }
    assert!(snapshot_rows >= 39, "{snapshot_rows}");
    let mut table: std::collections::BTreeMap<(String, String), i64> = Default::default();
    for id in (0..40).chain([99]) {
        let customer = if id == 99 {
            "c9".to_owned()
        } else {
            format!("c{}", id % 7)
        };
        let row_key = format!("{id:04}");
        if let Some(stored) = orders.get(&customer, &row_key).await.expect("get") {
            table.insert((customer, row_key), stored.value.total);
        }
    }
    assert_eq!(table.len(), 40);
    let folded: std::collections::BTreeMap<(String, String), i64> = state
        .into_iter()
        .map(|(k, (_, total))| (k, total))
        .collect();
    assert_eq!(folded, table);
    assert_eq!(
        folded.get(&("c3".to_owned(), "0003".to_owned())),
        Some(&300)
    );
    // Done: the shares read on from the log alone.
    orders.insert(&order("c9", 100, 1)).await.expect("insert");
    relay(&store).run_once().await.expect("relay");
    let next = drain(&group).await;
    assert_eq!(totals(&next), vec![1]);
}

#[tokio::test]
async fn a_snapshot_killed_midway_goes_on_from_its_last_checkpointed_chunk() {
    let store = MemoryStore::new();
    let orders = orders(&store).await;
    let rows: Vec<Order> = (0..1_500)
        .map(|id| order("one", id, i64::from(id)))
        .collect();
    for chunk in rows.chunks(50) {
        let report = orders
            .write_all(
                chunk
                    .iter()
                    .cloned()
                    .map(tablekit_core::typed::TypedWrite::Upsert),
            )
            .await
            .expect("write");
        assert!(report.refused.is_empty());
    }
    relay(&store).run_once().await.expect("relay");
    feed::trim(&store, "Orders", 4, Duration::ZERO)
        .await
        .expect("trim");
    let first = Group::new(store.clone(), "Orders", "rebuild", 4)
        .expect("group")
        .member("first")
        .expect("member")
        .lease(Duration::from_millis(100));
    // One step of the snapshot handled and checkpointed, the next handed out, then the
    // member dies.
    let one = first.poll().await.expect("poll");
    assert!(!one.is_empty() && one.len() < 1_500, "{}", one.len());
    first.checkpoint(&one).await.expect("checkpoint");
    let lost = first.poll().await.expect("poll");
    assert!(!lost.is_empty());
    drop(first);
    tokio::time::sleep(Duration::from_millis(150)).await;
    let second = Group::new(store.clone(), "Orders", "rebuild", 4)
        .expect("group")
        .member("second")
        .expect("member");
    let rest = drain(&second).await;
    let mut ids: Vec<i64> = summary(&one)
        .into_iter()
        .chain(summary(&rest))
        .map(|c| c.3)
        .collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        (0..1_500).collect::<Vec<i64>>(),
        "every entity once, none from the dead member's step twice"
    );
}

#[tokio::test]
async fn changes_whose_pending_marker_was_lost_are_found_again_by_adopt() {
    let store = MemoryStore::new();
    let orders = orders(&store).await;
    orders.insert(&order("ada", 1, 1)).await.expect("insert");
    // The markers are gone (an operator cleared the table): the relay sees nothing.
    store
        .delete_table(tablekit_patterns::consistency::PENDING_TABLE)
        .await
        .expect("drop");
    assert_eq!(relay(&store).run_once().await.expect("relay").sequenced, 0);
    assert_eq!(waiting(&store).await, 1);
    let marked = tablekit_patterns::consistency::pending::adopt(&store, "Orders")
        .await
        .expect("adopt");
    assert_eq!(marked, 1);
    assert_eq!(relay(&store).run_once().await.expect("relay").sequenced, 1);
}
