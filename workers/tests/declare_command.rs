//! `tablekit-worker declare`: queues declared before any worker runs, as a worker declares
//! them, so that the console and `stats` see them.

#![cfg(all(feature = "cli", feature = "sqlite"))]
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;

use clap::Parser;
use tablekit_workers::Error;
use tablekit_workers::cli;
use tablekit_workers::queue::sqlite::SqliteQueue;
use tablekit_workers::queue::{AnyQueue, Queue};

async fn run(args: &[&str]) -> (tablekit_workers::Result<()>, String) {
    let cli = cli::Cli::parse_from(std::iter::once("tablekit-worker").chain(args.iter().copied()));
    let mut out = Vec::new();
    let result = cli::run(cli, &mut out).await;
    (result, String::from_utf8(out).unwrap())
}

#[tokio::test]
async fn the_binary_declares_queues_that_stats_and_the_registry_then_know() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.db");
    let broker = format!("sqlite:{}", path.display());
    let output = Command::new(env!("CARGO_BIN_EXE_tablekit-worker"))
        .env("RUST_LOG", "warn")
        .args([
            "declare", "--broker", &broker, "--queue", "jobs", "--queue", "mail",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        "declared jobs\ndeclared mail\n"
    );
    let queue = SqliteQueue::open(&path).await.unwrap();
    assert_eq!(
        queue.declared_queues().await.unwrap(),
        Some(vec!["jobs".to_owned(), "mail".to_owned()])
    );
    assert_eq!(queue.stats("jobs").await.unwrap().waiting, 0);
    assert!(matches!(
        queue.stats("jbos").await,
        Err(Error::NotDeclared { .. })
    ));
    let (_, stats) = run(&["stats", "--broker", &broker, "--queue", "mail"]).await;
    assert_eq!(stats, "waiting 0\tleased 0\tpoisoned 0\n");
}

#[tokio::test]
async fn a_poison_queue_or_an_invalid_name_is_refused_and_nothing_is_declared() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.db");
    let broker = format!("sqlite:{}", path.display());
    let (result, _) = run(&["declare", "--broker", &broker, "--queue", "jobs-poison"]).await;
    let error = result.expect_err("a poison queue");
    assert!(matches!(error, Error::Config(_)), "{error}");
    assert!(error.to_string().contains("poison queue"), "{error}");
    let (result, _) = run(&["declare", "--broker", &broker, "--queue", "amq.x"]).await;
    assert!(matches!(result, Err(Error::InvalidQueueName { .. })));
    let queue = AnyQueue::connect(&broker).await.unwrap();
    assert_eq!(queue.declared_queues().await.unwrap(), Some(Vec::new()));
}

#[cfg(feature = "rabbitmq")]
#[tokio::test]
async fn a_queue_declared_on_rabbitmq_exists_for_the_console() {
    let Some(url) = support::amqp_url() else {
        return;
    };
    let name = support::unique("declared-by-command");
    let (result, out) = run(&["declare", "--broker", &url, "--queue", &name]).await;
    result.unwrap();
    assert_eq!(out, format!("declared {name}\n"));
    let queue = tablekit_workers::queue::rabbit::RabbitQueue::connect(&url)
        .await
        .unwrap();
    assert!(queue.exists(&name).await.unwrap());
    assert!(!queue.exists(&format!("{name}-poison")).await.unwrap());
    queue
        .delete_queue(
            &name,
            &tablekit_workers::WorkerConfig::new(name.as_str()).queue_options(),
        )
        .await
        .unwrap();
    assert!(!queue.exists(&name).await.unwrap());
}
