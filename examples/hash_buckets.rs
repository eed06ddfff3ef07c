//! Hash-prefixed keys: sequential order ids spread over 256 partitions; a point read
//! computes the bucket; a range of ids queries every bucket in parallel.
//!
//! `cargo run --example hash_buckets`

#![allow(clippy::print_stdout)]

use tablekit::core::filter;
use tablekit::patterns::buckets::HashBuckets;
use tablekit::prelude::*;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Orders",
    kind = "Order",
    partition_key = "{id:hash2}",
    row_key = "{id:08}"
)]
struct Order {
    id: u32,
    amount: i64,
}

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let orders = Table::<Order, _>::new(MemoryStore::new());
    orders.create().await?;
    for id in 0..1000 {
        orders
            .insert(&Order {
                id,
                amount: i64::from(id),
            })
            .await?;
    }
    let buckets = HashBuckets::new(2)?;
    let hit = orders.get(&buckets.of("42"), "00000042").await?;
    println!(
        "order 42 in bucket {}: {:?}",
        buckets.of("42"),
        hit.map(|o| o.amount)
    );
    let range = buckets
        .fan_out(
            &orders,
            |b| {
                Query::with_filter(
                    filter::partition_key().eq(b)
                        & filter::row_key().ge("00000500")
                        & filter::row_key().lt("00000510"),
                )
            },
            16,
        )
        .await?;
    println!(
        "orders 500..510: {:?}",
        range.iter().map(|o| o.id).collect::<Vec<_>>()
    );
    Ok(())
}
