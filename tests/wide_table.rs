//! The untyped wide entities and data series (`patterns::wide::WideTable`) on every
//! backend: chunks written in one transaction and read back whole, one property's update
//! touching one chunk, conditional writes, counters under contention, and entities stored
//! before chunks carried versions read unchanged.

#![allow(missing_docs)]

mod support;

use tablekit::core::fault::FaultyStore;
use tablekit::core::{AnyStore, ErrorKind, Query};
use tablekit::patterns::wide::WideTable;
use tablekit::prelude::*;

async fn a_wide_entity_is_replaced_under_the_callers_etag(store: AnyStore) {
    store
        .create_table_if_not_exists("WideIf")
        .await
        .expect("create");
    let wide = WideTable::new(store.clone(), "WideIf");
    let props = |v: i64| {
        let mut p = tablekit::core::Properties::new();
        for n in 0..300 {
            p.insert(format!("p{n:03}"), Value::Int64(v));
        }
        p
    };
    let stale = ETag::new("W/\"stale\"");
    let missing = wide
        .write_if("s", "w1", props(1), IfMatch::ETag(stale.clone()))
        .await
        .expect_err("nothing stored");
    assert_eq!(missing.kind(), ErrorKind::NotFound);
    wide.write("s", "w1", props(1)).await.expect("write");
    let (read, etag) = wide
        .read_with_etag("s", "w1")
        .await
        .expect("read")
        .expect("there");
    assert_eq!(read.get("p299"), Some(&Value::Int64(1)));
    let new_etag = wide
        .write_if("s", "w1", props(2), IfMatch::ETag(etag.clone()))
        .await
        .expect("conditional write");
    // The old ETag is stale now: refused, nothing changed.
    let refused = wide
        .write_if("s", "w1", props(3), IfMatch::ETag(etag))
        .await
        .expect_err("stale");
    assert_eq!(refused.kind(), ErrorKind::PreconditionFailed);
    let (read, current) = wide
        .read_with_etag("s", "w1")
        .await
        .expect("read")
        .expect("there");
    assert_eq!(read.get("p000"), Some(&Value::Int64(2)));
    assert_eq!(current, new_etag);
}

async fn wide_entities_span_chunks_written_in_one_transaction(store: AnyStore) {
    store
        .create_table_if_not_exists("Wide")
        .await
        .expect("create");
    let wide = WideTable::new(store.clone(), "Wide");
    let mut year = tablekit::core::Properties::new();
    for day in 1..=365 {
        year.insert(format!("d{day:03}"), Value::Int64(i64::from(day)));
    }
    let faulty = FaultyStore::new(store.clone());
    let counted = WideTable::new(faulty.clone(), "Wide");
    counted
        .write("s", "2026", year.clone())
        .await
        .expect("write");
    assert_eq!(faulty.writes(), 1, "one transaction");
    let chunks = store
        .query_all("Wide", Query::partition("s"))
        .await
        .expect("chunks");
    assert_eq!(chunks.len(), 2, "365 properties, two physical entities");
    let back = wide.read("s", "2026").await.expect("read").expect("there");
    assert_eq!(back.len(), 365);
    assert_eq!(back.get("d300"), Some(&Value::Int64(300)));
    // One property touches one chunk.
    let before: Vec<_> = chunks.iter().map(|c| c.etag.clone()).collect();
    wide.set("s", "2026", "d001", Value::Int64(-1))
        .await
        .expect("set");
    let after: Vec<_> = store
        .query_all("Wide", Query::partition("s"))
        .await
        .expect("chunks")
        .iter()
        .map(|c| c.etag.clone())
        .collect();
    assert_eq!(
        before.iter().zip(&after).filter(|(a, b)| a != b).count(),
        1,
        "exactly one physical entity changed"
    );
    // A smaller rewrite drops the chunk it no longer needs, in the same transaction.
    let small: tablekit::core::Properties = year.into_iter().take(100).collect();
    wide.write("s", "2026", small).await.expect("rewrite");
    assert_eq!(
        store
            .query_all("Wide", Query::partition("s"))
            .await
            .expect("chunks")
            .len(),
        1
    );
    assert_eq!(
        wide.read("s", "2026")
            .await
            .expect("read")
            .expect("there")
            .len(),
        100
    );
    // Too wide for one transaction: refused before any I/O.
    let huge: tablekit::core::Properties = (0..30_000)
        .map(|n| (format!("p{n:05}"), Value::Int32(n)))
        .collect();
    let before = faulty.calls();
    let err = counted
        .write("s", "huge", huge)
        .await
        .expect_err("too wide");
    assert!(err.to_string().contains("chunks"), "{err}");
    assert_eq!(faulty.calls(), before);
    assert!(wide.delete("s", "2026").await.expect("delete"));
    assert!(wide.read("s", "2026").await.expect("read").is_none());
}

async fn wide_entities_stored_before_chunks_carried_versions_still_read(store: AnyStore) {
    store
        .create_table_if_not_exists("WideBefore")
        .await
        .expect("create");
    // As `WideTable` stored them before chunks were marked: 250 properties a chunk in
    // name order, chunk 0 holding the count and nothing else of the layout.
    let mut chunk0 = Entity::new("s", "2025").with("TablekitChunks", Value::Int32(2));
    let mut chunk1 = Entity::new("s", "2025~001");
    for day in 1..=500 {
        let chunk = if day <= 250 { &mut chunk0 } else { &mut chunk1 };
        chunk
            .properties
            .insert(format!("d{day:03}"), Value::Int64(i64::from(day)));
    }
    let single = Entity::new("s", "small")
        .with("TablekitChunks", Value::Int32(1))
        .with("a", Value::Int64(1));
    let etag = store.insert("WideBefore", chunk0).await.expect("chunk 0");
    store.insert("WideBefore", chunk1).await.expect("chunk 1");
    store.insert("WideBefore", single).await.expect("single");
    let wide = WideTable::new(store.clone(), "WideBefore");
    let (year, read_etag) = wide
        .read_with_etag("s", "2025")
        .await
        .expect("read")
        .expect("there");
    assert_eq!(year.len(), 500);
    assert_eq!(year.get("d001"), Some(&Value::Int64(1)));
    assert_eq!(year.get("d500"), Some(&Value::Int64(500)));
    assert!(!year.contains_key("TablekitChunks"));
    assert_eq!(read_etag, etag);
    let small = wide.read("s", "small").await.expect("read").expect("there");
    assert_eq!(
        small.into_iter().collect::<Vec<_>>(),
        [("a".to_owned(), Value::Int64(1))]
    );
    // Updates keep such an entity readable: one in a chunk, one spilling into a third.
    wide.add("s", "2025", "d300", 1).await.expect("add");
    wide.set("s", "2025", "e001", Value::Int64(7))
        .await
        .expect("spill");
    let rows = || store.query_all("WideBefore", Query::partition("s"));
    let keys: Vec<String> = rows()
        .await
        .expect("rows")
        .into_iter()
        .map(|e| e.row_key)
        .collect();
    assert_eq!(keys, ["2025", "2025~001", "2025~002", "small"]);
    let year = wide.read("s", "2025").await.expect("read").expect("there");
    assert_eq!(year.len(), 501);
    assert_eq!(year.get("d300"), Some(&Value::Int64(301)));
    assert_eq!(year.get("e001"), Some(&Value::Int64(7)));
    // A whole write stores the marked layout and drops the chunk it no longer needs.
    let fewer: tablekit::core::Properties = year.into_iter().take(300).collect();
    wide.write("s", "2025", fewer.clone())
        .await
        .expect("rewrite");
    let stored = rows().await.expect("rows");
    let keys: Vec<&str> = stored.iter().map(|e| e.row_key.as_str()).collect();
    assert_eq!(keys, ["2025", "2025~001", "small"]);
    assert!(stored[0].properties.contains_key("TablekitChunkVersions"));
    assert!(stored[1].properties.contains_key("TablekitChunkOf"));
    let back = wide.read("s", "2025").await.expect("read").expect("there");
    assert_eq!(back, fewer);
    // The layout's markers are not properties a caller may write.
    let marker = wide
        .set("s", "2025", "TablekitChunkOf", Value::Int64(1))
        .await
        .expect_err("a marker");
    assert!(marker.to_string().contains("TablekitChunkOf"), "{marker}");
    assert!(wide.delete("s", "2025").await.expect("delete"));
    assert_eq!(rows().await.expect("rows").len(), 1);
}

async fn data_series_count_under_contention_and_spill(store: AnyStore) {
    store
        .create_table_if_not_exists("Series")
        .await
        .expect("create");
    let series = WideTable::new(store.clone(), "Series");
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let series = series.clone();
            tokio::spawn(async move {
                for _ in 0..25 {
                    series
                        .add("web", "2026-11-22", "h10", 1)
                        .await
                        .expect("add");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    for hour in 0..24 {
        series
            .add("web", "2026-11-22", &format!("h{hour:02}"), 1)
            .await
            .expect("add");
    }
    let faulty = FaultyStore::new(store.clone());
    let counted = WideTable::new(faulty.clone(), "Series");
    let day = counted
        .read("web", "2026-11-22")
        .await
        .expect("read")
        .expect("there");
    assert_eq!(faulty.calls(), 1, "one point get");
    assert_eq!(day.len(), 24);
    assert_eq!(
        day.get("h10"),
        Some(&Value::Int64(201)),
        "no increment lost"
    );
    // A series past 250 periods spills into another chunk.
    for minute in 0..300 {
        series
            .add("web", "minutes", &format!("m{minute:04}"), 2)
            .await
            .expect("add");
    }
    let minutes = series
        .read("web", "minutes")
        .await
        .expect("read")
        .expect("there");
    assert_eq!(minutes.len(), 300);
    assert!(minutes.values().all(|v| *v == Value::Int64(2)));
    series
        .set("web", "minutes", "label", Value::from("x"))
        .await
        .expect("set");
    assert!(
        series.add("web", "minutes", "label", 1).await.is_err(),
        "not a counter"
    );
}

on_backends!(
    a_wide_entity_is_replaced_under_the_callers_etag,
    wide_entities_span_chunks_written_in_one_transaction,
    wide_entities_stored_before_chunks_carried_versions_still_read,
    data_series_count_under_contention_and_spill,
);
