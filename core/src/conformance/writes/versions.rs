//! Cases about the versions a store stamps on every write: a fresh ETag, a Timestamp that
//! advances, and neither taken from the entity written.

use chrono::{DateTime, Duration, Utc};

use super::put;
use crate::conformance::{drop_table, fetch_existing, new_table, write_until_later};
use crate::model::{ETag, Entity, IfMatch};
use crate::query::Query;
use crate::store::{Batch, TableStore};

/// Checks that `etag`, just returned by `step`, is new and is what `get` returns now.
async fn assert_fresh_etag<S: TableStore>(
    store: &S,
    table: &str,
    step: &str,
    etag: ETag,
    seen: &mut Vec<ETag>,
) {
    assert!(
        !seen.contains(&etag),
        "{step} returned the ETag {etag} that an earlier write returned"
    );
    let read = fetch_existing(store, table, "p", "r").await;
    assert_eq!(
        read.etag.as_ref(),
        Some(&etag),
        "get must return the ETag the {step} returned"
    );
    seen.push(etag);
}

/// Every write returns a fresh ETag, different from all earlier ones, and `get` returns
/// the latest.
pub async fn every_write_returns_a_fresh_etag_that_get_returns<S: TableStore>(store: &S) {
    let table = new_table(store, "FreshETags").await;
    let same = || Entity::new("p", "r").with("N", 1);
    let mut seen = Vec::new();

    let etag = put(store, &table, same()).await;
    assert_fresh_etag(store, &table, "insert", etag, &mut seen).await;
    let etag = store
        .replace(&table, same(), IfMatch::Any)
        .await
        .expect("replace");
    assert_fresh_etag(
        store,
        &table,
        "replace with identical content",
        etag,
        &mut seen,
    )
    .await;
    let etag = store
        .merge(&table, same(), IfMatch::Any)
        .await
        .expect("merge");
    assert_fresh_etag(
        store,
        &table,
        "merge with identical content",
        etag,
        &mut seen,
    )
    .await;
    let etag = store
        .insert_or_replace(&table, same())
        .await
        .expect("insert_or_replace");
    assert_fresh_etag(store, &table, "insert_or_replace", etag, &mut seen).await;
    let etag = store
        .insert_or_merge(&table, same())
        .await
        .expect("insert_or_merge");
    assert_fresh_etag(store, &table, "insert_or_merge", etag, &mut seen).await;
    let mut batch = Batch::new();
    batch.replace(same(), IfMatch::Any);
    let etag = store
        .submit_batch(&table, batch)
        .await
        .expect("batch replace")
        .into_iter()
        .next()
        .flatten()
        .expect("a batch replace returns an ETag");
    assert_fresh_etag(store, &table, "batch replace", etag, &mut seen).await;
    store
        .delete(&table, "p", "r", IfMatch::Any)
        .await
        .expect("delete");
    let etag = put(store, &table, same()).await;
    assert_fresh_etag(store, &table, "insert after a delete", etag, &mut seen).await;
    drop_table(store, &table).await;
}

/// The store sets the Timestamp on every write, close to the current time, and it never
/// goes backwards.
pub async fn timestamp_is_set_by_the_store_and_advances_on_every_write<S: TableStore>(store: &S) {
    let table = new_table(store, "Timestamps").await;
    let before = Utc::now();
    put(store, &table, Entity::new("p", "r")).await;
    let first = fetch_existing(store, &table, "p", "r")
        .await
        .timestamp
        .expect("an inserted entity has a Timestamp");
    // Generous bounds: a remote store's clock may be a little off.
    let slack = Duration::minutes(5);
    assert!(
        first >= before - slack && first <= Utc::now() + slack,
        "the Timestamp {first} is not the time of the write ({before})"
    );
    let mut last = first;
    for step in 0..3 {
        last = write_until_later(store, &table, "p", "r", last, step).await;
    }
    let page = store
        .query(&table, &Query::partition("p"))
        .await
        .expect("query");
    assert_eq!(
        page.entities.first().and_then(|e| e.timestamp),
        Some(last),
        "query returns the Timestamp get returns"
    );
    drop_table(store, &table).await;
}

/// A Timestamp and ETag set on the entity given to a write are ignored: the store sets its
/// own.
pub async fn store_ignores_the_etag_and_timestamp_carried_by_the_entity<S: TableStore>(store: &S) {
    let table = new_table(store, "CarriedVersion").await;
    let bogus_time = DateTime::from_timestamp(1_000_000_000, 0).expect("a valid instant");
    let bogus_etag = ETag::new("W/\"bogus\"");
    let mut entity = Entity::new("p", "r").with("N", 1);
    entity.timestamp = Some(bogus_time);
    entity.etag = Some(bogus_etag.clone());
    let etag = store.insert(&table, entity.clone()).await.expect("insert");
    assert_ne!(
        etag, bogus_etag,
        "insert must not keep the ETag the entity carried"
    );
    let read = fetch_existing(store, &table, "p", "r").await;
    assert_eq!(
        read.etag.as_ref(),
        Some(&etag),
        "get returns the store's ETag"
    );
    assert_ne!(
        read.timestamp,
        Some(bogus_time),
        "the store sets the Timestamp"
    );
    // The condition of a replace is its `if_match`, not the ETag on the entity.
    let etag = store
        .replace(&table, entity.clone(), etag.into())
        .await
        .expect("replace with the current ETag, the entity carrying a bogus one");
    store
        .merge(&table, entity, etag.into())
        .await
        .expect("merge with the current ETag, the entity carrying a bogus one");
    drop_table(store, &table).await;
}
