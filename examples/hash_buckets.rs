//! Hash-prefixed keys: sequential order ids spread over 256 partitions; a point read
//! by typed key computes the bucket from the id; a range of ids, its bounds rendered by
//! the RowKey template, queries every bucket in parallel.
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
    // The id is the key's field twice: the PartitionKey's `{id:hash2}`, the RowKey's `{id:08}`.
    let hit = orders.primary().key(42).key(42).get().await?;
    if let Some(order) = hit {
        println!(
            "order 42 in bucket {}: amount {}",
            order.partition_key, order.amount
        );
    }
    // Ids 500 to 509: RowKey bounds from the template, in every bucket.
    let ids = Order::schema().row_key.range(&[], &500u32, &509u32)?;
    let range = buckets
        .fan_out(
            &orders,
            |b| Query::with_filter(filter::partition_key().eq(b) & ids.row_key_filter()),
            16,
        )
        .await?;
    println!(
        "orders 500..510: {:?}",
        range.iter().map(|o| o.id).collect::<Vec<_>>()
    );
    Ok(())
}
