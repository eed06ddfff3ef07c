//! `AnyQueue::connect` accepts the forms it documents and refuses every other string
//! before it opens or creates anything: each refusal is an `InvalidBroker` with a hint and
//! the forms accepted, and leaves no file behind. Every test of this binary runs in one
//! empty temporary directory (the process's working directory), which must stay empty.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use tablekit_core::ErrorKind;
use tablekit_workers::Error;
use tablekit_workers::queue::AnyQueue;

const FORMS: &str = "the forms accepted are `amqp://user:password@host:port/vhost`, `amqps://user:password@host:port/vhost`, `sqlite:PATH` and `azure:CONNECTION-STRING`";

#[path = "../../core/tests/support/empty_working_dir.rs"]
mod empty_working_dir;

use empty_working_dir::{assert_nothing_created, working_dir};

/// The message of `broker`'s refusal, after checking that it is an `InvalidBroker`
/// listing the forms and that nothing was created.
async fn refused(broker: &str) -> String {
    // The call runs in the empty directory.
    working_dir();
    let error = AnyQueue::connect(broker)
        .await
        .map(|_| ())
        .expect_err(broker);
    assert!(
        matches!(error, Error::InvalidBroker { .. }),
        "{broker}: {error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    let message = error.to_string();
    assert!(message.contains(FORMS), "{message}");
    assert_nothing_created(broker);
    message
}

#[tokio::test]
async fn a_sqlite_url_is_refused_with_the_path_forms_and_creates_no_file() {
    let name = format!("tablekit-refused-{}.db", std::process::id());
    let message = refused(&format!("sqlite://{name}")).await;
    assert!(
        message.contains(&format!(
            "write `sqlite:{name}` (a relative path) or `sqlite:/abs/path`"
        )),
        "{message}"
    );
    assert!(!Path::new("/").join(&name).exists(), "created at the root");
    let message = refused("sqlite:").await;
    assert!(message.contains("`sqlite:` needs a path"), "{message}");
}

#[tokio::test]
async fn a_bare_path_is_refused_with_its_sqlite_form_and_creates_no_file() {
    let message = refused("queue.db").await;
    assert!(
        message.contains("a bare path is not a connection string: write `sqlite:queue.db`"),
        "{message}"
    );
    assert!(!working_dir().join("queue.db").exists());
    let message = refused("sqlite").await;
    assert!(message.contains("write `sqlite:PATH`"), "{message}");
}

#[tokio::test]
async fn an_amqp_scheme_without_its_url_is_refused_with_its_form() {
    let message = refused("amqp:localhost").await;
    assert!(
        message.contains("write `amqp://user:password@host:port/vhost`"),
        "{message}"
    );
    let message = refused("amqp").await;
    assert!(message.contains("write `amqp://"), "{message}");
}

#[tokio::test]
async fn an_unknown_scheme_is_refused_by_name() {
    let message = refused("kafka://somewhere").await;
    assert!(
        message.contains("invalid broker `kafka://somewhere`: unknown scheme `kafka`"),
        "{message}"
    );
    // No queue lives in memory: the store's form is not the broker's.
    let message = refused("memory:").await;
    assert!(message.contains("unknown scheme `memory`"), "{message}");
}

#[tokio::test]
async fn secrets_of_refused_brokers_are_never_shown() {
    let key = "c2VjcmV0LWtleQ==";
    for broker in [
        format!("AccountName=a;AccountKey={key}"),
        format!(
            "DefaultEndpointsProtocol=https;AccountKey={key};QueueEndpoint=https://a.queue.core.windows.net"
        ),
        format!("Azure:AccountName=a;AccountKey={key}"),
        format!("rabbitmq://guest:{key}@localhost:5672/%2f"),
    ] {
        let message = refused(&broker).await;
        assert!(!message.contains(key), "{message}");
    }
    let message = refused(&format!("AccountName=a;AccountKey={key}")).await;
    assert!(message.contains("goes after `azure:`"), "{message}");
}
