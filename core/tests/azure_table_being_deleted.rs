//! Creating a table the service is still deleting: the Azure store waits and retries
//! within its bound, then reports `TableBeingDeleted`, never a success for a table that
//! does not exist. Run against a fake table service on loopback that keeps a deleted
//! table "being deleted" for a number of create attempts.

use std::time::{Duration, Instant};

use tablekit_core::azure::RetryPolicy;
use tablekit_core::{AzureTableStore, Error, ErrorKind, TableStore};

#[path = "support/fake_table_service.rs"]
mod fake_table_service;

use fake_table_service::FakeTableService;

fn store(service: &FakeTableService, wait: Duration) -> AzureTableStore {
    AzureTableStore::options()
        .retry_policy(RetryPolicy {
            base: Duration::from_millis(10),
            ..RetryPolicy::azure()
        })
        .being_deleted_wait(wait)
        .connect(&service.connection_string())
        .expect("a connection string")
}

#[tokio::test]
async fn creating_a_table_being_deleted_waits_until_the_service_lets_go() {
    let service = FakeTableService::start(0).await;
    service.being_deleted("Logs", 3);
    let store = store(&service, Duration::from_secs(30));
    let created = store
        .create_table_if_not_exists("Logs")
        .await
        .expect("created once the delete finished");
    assert!(created, "this call created the table");
    assert_eq!(service.creates(), 4, "three refusals, then the create");
    assert_eq!(service.tables(), vec!["Logs".to_owned()]);
    // Now it exists: the usual answer.
    assert!(
        !store
            .create_table_if_not_exists("Logs")
            .await
            .expect("exists")
    );
}

#[tokio::test]
async fn a_table_still_being_deleted_after_the_bound_is_reported_not_created() {
    let service = FakeTableService::start(0).await;
    service.being_deleted("Logs", usize::MAX);
    let bound = Duration::from_millis(300);
    let store = store(&service, bound);
    let started = Instant::now();
    let error = store
        .create_table_if_not_exists("Logs")
        .await
        .expect_err("the table does not exist");
    let waited = started.elapsed();
    assert!(
        matches!(&error, Error::TableBeingDeleted { table } if table == "Logs"),
        "{error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::TableBeingDeleted);
    assert!(error.is_retryable());
    assert!(waited >= bound, "waited the bound: {waited:?}");
    assert!(waited < Duration::from_secs(5), "then gave up: {waited:?}");
    assert!(service.creates() >= 3, "retried: {}", service.creates());
    assert!(service.tables().is_empty());

    let error = store
        .create_table("Logs")
        .await
        .expect_err("still deleting");
    assert_eq!(error.kind(), ErrorKind::TableBeingDeleted);
}

#[tokio::test]
async fn a_zero_wait_reports_the_first_refusal() {
    let service = FakeTableService::start(0).await;
    service.being_deleted("Logs", 1);
    let store = store(&service, Duration::ZERO);
    let error = store.create_table("Logs").await.expect_err("being deleted");
    assert_eq!(error.kind(), ErrorKind::TableBeingDeleted);
    assert_eq!(service.creates(), 1);
}

#[tokio::test]
async fn a_table_deleted_and_created_again_at_once_is_created_after_the_wait() {
    let service = FakeTableService::start(2).await;
    let store = store(&service, Duration::from_secs(30));
    store.create_table("Orders").await.expect("create");
    store.delete_table("Orders").await.expect("delete");
    store.create_table("Orders").await.expect("created again");
    assert_eq!(
        service.creates(),
        4,
        "one create, two refusals, the create again"
    );
    assert_eq!(service.tables(), vec!["Orders".to_owned()]);
}
