//! Cases about concurrent writers: optimistic concurrency with ETags loses no update, and
//! of concurrent inserts of one entity exactly one wins.

use super::{drop_table, expect_kind, fetch_existing, insert_all, new_table};
use crate::error::ErrorKind;
use crate::model::{Entity, Value};
use crate::store::TableStore;

/// Increments the Int64 `Count` of `(c, counter)` `times` times by read-modify-write,
/// retrying on `PreconditionFailed`; returns how many retries it needed.
async fn increment<S: TableStore>(store: &S, table: &str, times: usize) -> usize {
    let mut retries = 0;
    for _ in 0..times {
        loop {
            let current = fetch_existing(store, table, "c", "counter").await;
            let count = current
                .get("Count")
                .and_then(Value::as_i64)
                .expect("the counter holds an Int64 Count");
            let etag = current.etag.expect("a stored entity has an ETag");
            // Let the other writer run between the read and the write.
            tokio::task::yield_now().await;
            let next = Entity::new("c", "counter").with("Count", count + 1);
            match store.replace(table, next, etag.into()).await {
                Ok(_) => break,
                Err(e) if e.kind() == ErrorKind::PreconditionFailed => retries += 1,
                Err(e) => panic!("incrementing the counter failed: {e}"),
            }
        }
    }
    retries
}

/// Two writers doing read-modify-write with ETags on one counter, retrying on
/// `PreconditionFailed`, end at the exact total: no update is lost.
pub async fn concurrent_read_modify_write_with_etags_loses_no_update<S: TableStore>(store: &S) {
    let table = new_table(store, "Counter").await;
    insert_all(
        store,
        &table,
        vec![Entity::new("c", "counter").with("Count", 0i64)],
    )
    .await;
    let (retries_a, retries_b) =
        futures::join!(increment(store, &table, 50), increment(store, &table, 50));
    let read = fetch_existing(store, &table, "c", "counter").await;
    assert_eq!(
        read.get("Count"),
        Some(&Value::Int64(100)),
        "2 × 50 increments (after {retries_a} + {retries_b} retries) must end at 100"
    );
    drop_table(store, &table).await;
}

/// Of several concurrent inserts of the same keys, exactly one succeeds and the others
/// fail with `AlreadyExists`; the stored entity is the winner's.
pub async fn concurrent_inserts_of_one_entity_have_exactly_one_winner<S: TableStore>(store: &S) {
    let table = new_table(store, "InsertRace").await;
    let attempts = (0..8).map(|i| {
        let table = table.as_str();
        async move {
            let result = store
                .insert(table, Entity::new("p", "r").with("Writer", i))
                .await;
            (i, result)
        }
    });
    let results = futures::future::join_all(attempts).await;
    let mut winners = Vec::new();
    for (i, result) in results {
        match result {
            Ok(etag) => winners.push((i, etag)),
            Err(e) => {
                expect_kind::<()>(Err(e), ErrorKind::AlreadyExists, "a losing insert");
            }
        }
    }
    assert_eq!(winners.len(), 1, "exactly one insert wins: {winners:?}");
    let (winner, etag) = &winners[0];
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_eq!(
        read.get("Writer"),
        Some(&Value::Int32(*winner)),
        "the winner's entity"
    );
    assert_eq!(read.etag.as_ref(), Some(etag), "the winner's ETag");
    drop_table(store, &table).await;
}
