//! `AnyStore::connect` accepts the forms it documents and refuses every other string
//! before it opens or creates anything: each refusal is an `InvalidConnection` with a hint
//! and the forms accepted, and leaves no file behind. Every test of this binary runs in
//! one empty temporary directory (the process's working directory), which must stay empty.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use tablekit_core::{AnyStore, Error, ErrorKind};

const FORMS: &str = "the forms accepted are `sqlite:PATH`, `memory:` and `azure:CONNECTION-STRING`";

#[path = "support/empty_working_dir.rs"]
mod empty_working_dir;

use empty_working_dir::{assert_nothing_created, working_dir};

/// The message of `connection`'s refusal, after checking that it is an
/// `InvalidConnection` listing the forms and that nothing was created.
async fn refused(connection: &str) -> String {
    // The call runs in the empty directory.
    working_dir();
    let error = AnyStore::connect(connection)
        .await
        .map(|_| ())
        .expect_err(connection);
    assert!(
        matches!(error, Error::InvalidConnection { .. }),
        "{connection}: {error:?}"
    );
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    let message = error.to_string();
    assert!(message.contains(FORMS), "{message}");
    assert_nothing_created(connection);
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

    let message = refused(&format!("sqlite:///tmp/{name}")).await;
    assert!(
        message.contains(&format!("write `sqlite:/tmp/{name}` (an absolute path)")),
        "{message}"
    );
    assert!(!Path::new("/tmp").join(&name).exists());
}

#[tokio::test]
async fn memory_without_its_colon_is_refused_and_creates_no_file() {
    let message = refused("memory").await;
    assert!(message.contains("write `memory:`"), "{message}");
    assert!(!working_dir().join("memory").exists());
    let message = refused("memory:orders").await;
    assert!(message.contains("write `memory:`"), "{message}");
}

#[tokio::test]
async fn a_bare_path_is_refused_with_its_sqlite_form_and_creates_no_file() {
    let message = refused("orders.db").await;
    assert!(
        message.contains("a bare path is not a connection string: write `sqlite:orders.db`"),
        "{message}"
    );
    assert!(!working_dir().join("orders.db").exists());
    let message = refused("data/orders.db").await;
    assert!(
        message.contains("write `sqlite:data/orders.db`"),
        "{message}"
    );
}

#[tokio::test]
async fn a_scheme_without_its_argument_is_refused_with_its_form() {
    let message = refused("sqlite").await;
    assert!(message.contains("write `sqlite:PATH`"), "{message}");
    let message = refused("sqlite:").await;
    assert!(message.contains("`sqlite:` needs a path"), "{message}");
    let message = refused("azure").await;
    assert!(
        message.contains("write `azure:CONNECTION-STRING`"),
        "{message}"
    );
    let message = refused("SQLite:orders.db").await;
    assert!(message.contains("schemes are lower case"), "{message}");
}

#[tokio::test]
async fn an_unknown_scheme_is_refused_by_name() {
    let message = refused("postgres://db/orders").await;
    assert!(message.contains("unknown scheme `postgres`"), "{message}");
    assert!(message.contains("`postgres://db/orders`"), "{message}");
    refused("").await;
}

#[tokio::test]
async fn a_storage_connection_string_without_its_scheme_is_refused_unshown() {
    let key = "c2VjcmV0LWtleQ==";
    for connection in [
        format!("AccountName=a;AccountKey={key}"),
        format!(
            "DefaultEndpointsProtocol=https;AccountName=a;AccountKey={key};TableEndpoint=https://a.table.core.windows.net"
        ),
        format!("Azure:AccountName=a;AccountKey={key}"),
    ] {
        let message = refused(&connection).await;
        assert!(!message.contains(key), "{message}");
        assert!(!message.contains("AccountKey"), "{message}");
    }
    let message = refused(&format!("AccountName=a;AccountKey={key}")).await;
    assert!(message.contains("goes after `azure:`"), "{message}");
}
