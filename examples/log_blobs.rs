//! Log data in blobs: records filed by minute, read back by time range.
//!
//! `cargo run --example log_blobs`

#![allow(clippy::print_stdout)]

use chrono::{Duration, Utc};
use tablekit::core::blob::BlobStore;
use tablekit::patterns::log_blobs::{LogWriter, read_range};

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let dir = tempfile::tempdir()?;
    let blobs = BlobStore::local(dir.path())?;
    let writer = LogWriter::new(
        blobs.clone(),
        "app",
        4096,
        std::time::Duration::from_secs(60),
    );
    let start = Utc::now();
    for n in 0..300 {
        writer
            .append(start + Duration::seconds(n), &format!("GET /item/{n} 200"))
            .await?;
    }
    // close() writes what is buffered and stops the background flush by age.
    writer.close().await?;
    let names: Vec<String> = blobs
        .list("app/")
        .await?
        .into_iter()
        .map(|b| b.name)
        .collect();
    println!("{} blobs, the first {:?}", names.len(), names.first());
    let window = read_range(
        &blobs,
        "app",
        start + Duration::seconds(10),
        start + Duration::seconds(14),
    )
    .await?;
    for (at, text) in window {
        println!("{at} {text}");
    }
    Ok(())
}
