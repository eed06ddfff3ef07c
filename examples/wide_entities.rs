//! Wide entities: a sensor with a reading per metric — 600 readings, more than the 252
//! properties one entity holds — declared `#[wide]`, stored as chunks of one partition
//! written in one transaction, read back typed. Changing one reading writes chunk 0 (its
//! version) and the chunk holding it; an index on the type keeps working.
//!
//! `cargo run --example wide_entities`

#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;

use tablekit::prelude::*;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(table = "Sensors", partition_key = "{site}", row_key = "{sensor}")]
#[index(
    name = "by_model",
    table = "SensorsByModel",
    partition_key = "{model}",
    row_key = "{site},{sensor}",
    properties = ["model"]
)]
#[wide(chunks = 8)]
struct Sensor {
    site: String,
    sensor: String,
    model: String,
    /// One property per reading: `readings_temp_0001` …
    #[wide]
    readings: BTreeMap<String, f64>,
}

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let dir = tempfile::tempdir()?;
    let store =
        AnyStore::create(&format!("sqlite:{}", dir.path().join("app.db").display())).await?;
    // Look-ups read the primary (the copies carry `model` alone).
    let sensors = IndexedTable::<Sensor, _>::options()
        .inline_apply()
        .verified_lookups(true)
        .open(store.clone())
        .await?;

    let mut sensor = Sensor {
        site: "north".into(),
        sensor: "s1".into(),
        model: "m7".into(),
        readings: (0..600)
            .map(|i| (format!("temp_{i:04}"), 20.0 + f64::from(i) / 100.0))
            .collect(),
    };
    sensors.insert(&sensor).await?;
    // The rows as stored, read untyped: chunk 0 at the RowKey, the others beside it.
    let rows = store
        .query_all("Sensors", Query::partition("north"))
        .await?;
    println!(
        "600 readings stored in {} rows: {:?}",
        rows.iter().filter(|r| r.row_key.starts_with("s1")).count(),
        rows.iter()
            .map(|r| r.row_key.as_str())
            .filter(|k| k.starts_with("s1"))
            .collect::<Vec<_>>()
    );

    // One reading changes: chunk 0 and the chunk that holds it are written.
    sensor.readings.insert("temp_0590".into(), -4.5);
    let stored = sensors
        .primary()
        .key("north")
        .key("s1")
        .get()
        .await?
        .expect("just written");
    sensors
        .replace(
            &sensor,
            IfMatch::ETag(stored.etag.expect("a read entity has an ETag")),
        )
        .await?;
    let back = sensors
        .primary()
        .key("north")
        .key("s1")
        .get()
        .await?
        .expect("just written");
    println!(
        "read back: {} readings, temp_0590 = {:?}, same value: {}",
        back.value.readings.len(),
        back.value.readings.get("temp_0590"),
        back.value == sensor
    );
    let found = sensors
        .lookup(Sensor::BY_MODEL)
        .key("m7")
        .key("north")
        .key("s1")
        .get()
        .await?;
    println!(
        "by model m7: {:?} with {} readings",
        found.as_ref().map(|f| &f.value.sensor),
        found.as_ref().map_or(0, |f| f.value.readings.len())
    );
    Ok(())
}
