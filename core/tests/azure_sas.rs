//! Scoped shared access signatures: a store opened with a table SAS reads and writes
//! inside the token's key range, refuses everything outside it before any request, maps
//! the service's 403s to the same `PermissionDenied`, and loses access when the stored
//! access policy its token is bound to is removed. Blob tokens are checked against the
//! emulator's blob service.
//!
//! Azurite enforces a table SAS's table, permissions, times and stored policies, but not
//! its key ranges (partition or row): there the checks of the store are what keeps a
//! client inside its range.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use chrono::{Duration, Utc};
use tablekit_core::azure::sas::{BlobSas, TableSas};
use tablekit_core::azure::{DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY, SignedIdentifier};
use tablekit_core::{
    AzureTableStore, Batch, Entity, Error, ErrorKind, IfMatch, Query, TableStore, Value, WriteOp,
};

mod support;

fn prefix() -> String {
    format!("s{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

/// A store on `admin`'s endpoint and prefix, authorised by `token` only.
fn client(admin: &AzureTableStore, prefix: &str, token: &str) -> AzureTableStore {
    let config = admin.config();
    AzureTableStore::connect(&format!(
        "TableEndpoint={};AccountName={};SharedAccessSignature={token};TablePrefix={prefix}",
        config.endpoint, config.account
    ))
    .expect("a SAS connection string")
}

/// The reason of a `PermissionDenied`, and the service's code when the service said it.
fn denied<T: std::fmt::Debug>(result: tablekit_core::Result<T>) -> (String, Option<String>) {
    match result {
        Err(Error::PermissionDenied {
            reason,
            service_code,
            ..
        }) => (reason, service_code),
        Err(Error::Batch { source, .. }) => denied::<T>(Err(*source)),
        other => panic!("expected PermissionDenied, got {other:?}"),
    }
}

/// A table service address that counts connections and answers none: a request sent
/// there is counted, and fails.
async fn counting_endpoint() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let port = listener.local_addr().expect("an address").port();
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (
        format!("http://127.0.0.1:{port}/{DEVELOPMENT_ACCOUNT}"),
        count,
    )
}

#[tokio::test]
async fn operations_outside_the_token_are_refused_before_any_request() {
    let (endpoint, requests) = counting_endpoint().await;
    let expiry = Utc::now() + Duration::hours(1);
    let token = TableSas::new("t1Orders")
        .permissions("rad")
        .start_key("tenant42", "a")
        .end_key("tenant42", "m")
        .expiry(expiry)
        .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)
        .expect("a token");
    let store = AzureTableStore::connect(&format!(
        "TableEndpoint={endpoint};SharedAccessSignature={token};TablePrefix=t1"
    ))
    .expect("a SAS connection string");

    let (reason, code) = denied(store.insert("Orders", Entity::new("tenant7", "b")).await);
    assert!(
        reason.contains("PartitionKey `tenant7`, RowKey `b` is outside"),
        "{reason}"
    );
    assert_eq!(code, None, "refused here, not by the service");
    let (reason, _) = denied(store.get("Orders", "tenant42", "n", None).await);
    assert!(reason.contains("RowKey `n` is outside"), "{reason}");
    let (reason, _) = denied(store.delete("Orders", "tenant42", "zz", IfMatch::Any).await);
    assert!(reason.contains("RowKey `zz` is outside"), "{reason}");
    let (reason, _) = denied(
        store
            .insert_or_replace("Orders", Entity::new("tenant42", "b"))
            .await,
    );
    assert!(reason.contains("needs permission `u` (update)"), "{reason}");
    let (reason, _) = denied(
        store
            .merge("Orders", Entity::new("tenant42", "b"), IfMatch::Any)
            .await,
    );
    assert!(reason.contains("merging needs permission `u`"), "{reason}");
    let mut batch = Batch::new();
    batch.insert(Entity::new("tenant42", "b"));
    batch.insert(Entity::new("tenant42", "y"));
    let refused = store.submit_batch("Orders", batch).await;
    assert!(
        matches!(&refused, Err(e) if e.batch_index() == Some(1)),
        "{refused:?}"
    );
    let (reason, _) = denied(refused);
    assert!(reason.contains("RowKey `y` is outside"), "{reason}");
    let (reason, _) = denied(store.query("Orders", &Query::partition("tenant7")).await);
    assert!(reason.contains("only keys outside"), "{reason}");
    let past_end = Query::parse("PartitionKey eq 'tenant42' and RowKey gt 'm'").expect("filter");
    let (reason, _) = denied(store.query("Orders", &past_end).await);
    assert!(reason.contains("only keys outside"), "{reason}");
    let (reason, _) = denied(store.get("Invoices", "tenant42", "b", None).await);
    assert!(
        reason.contains("for table `t1Orders`, not `t1Invoices`"),
        "{reason}"
    );
    let (reason, _) = denied(store.create_table("Orders").await);
    assert!(reason.contains("entity operations only"), "{reason}");
    let (reason, _) = denied(store.list_tables("").await);
    assert!(reason.contains("entity operations only"), "{reason}");
    let (reason, _) = denied(store.get_table_acl("Orders").await);
    assert!(reason.contains("account key"), "{reason}");

    let expired = TableSas::new("t1Orders")
        .permissions("r")
        .expiry(Utc::now() - Duration::hours(1))
        .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)
        .expect("a token");
    let late = AzureTableStore::connect(&format!(
        "TableEndpoint={endpoint};SharedAccessSignature={expired};TablePrefix=t1"
    ))
    .expect("a SAS connection string");
    let (reason, _) = denied(late.get("Orders", "tenant42", "b", None).await);
    assert!(reason.contains("expired at"), "{reason}");

    assert_eq!(requests.load(Ordering::SeqCst), 0, "no request was sent");
    // The counter does count: an operation inside the scope is sent (and fails there).
    let sent = store.get("Orders", "tenant42", "b", None).await;
    assert!(sent.is_err_and(|e| e.kind() != ErrorKind::PermissionDenied));
    assert!(requests.load(Ordering::SeqCst) > 0);
}

#[tokio::test]
async fn a_partition_range_token_reads_and_writes_inside_its_range() {
    let Some(connection) = support::azurite_tables() else {
        return;
    };
    let prefix = prefix();
    let admin = AzureTableStore::options()
        .table_prefix(prefix.clone())
        .connect(&connection)
        .expect("a connection string");
    admin.create_table("Orders").await.expect("create");
    for (pk, rk) in [("tenant41", "b"), ("tenant42", "0"), ("tenant42", "z")] {
        admin
            .insert("Orders", Entity::new(pk, rk).with("Owner", "other"))
            .await
            .expect("insert outside the range");
    }
    let sas = admin
        .table_sas("Orders")
        .expect("a builder")
        .permissions("raud")
        .start_key("tenant42", "a")
        .end_key("tenant42", "m")
        .expiry(Utc::now() + Duration::hours(1));
    let token = admin.sign_table_sas(&sas).expect("signed");
    let tenant = client(&admin, &prefix, &token);

    tenant
        .insert("Orders", Entity::new("tenant42", "b").with("N", 1))
        .await
        .expect("insert inside");
    let etag = tenant
        .merge(
            "Orders",
            Entity::new("tenant42", "b").with("M", 2),
            IfMatch::Any,
        )
        .await
        .expect("merge inside");
    tenant
        .replace(
            "Orders",
            Entity::new("tenant42", "b").with("N", 3),
            etag.into(),
        )
        .await
        .expect("replace inside");
    tenant
        .insert_or_merge("Orders", Entity::new("tenant42", "m").with("N", 4))
        .await
        .expect("upsert at the end key");
    let mut batch = Batch::new();
    batch.insert(Entity::new("tenant42", "c"));
    batch.insert(Entity::new("tenant42", "d"));
    if admin.config().account == DEVELOPMENT_ACCOUNT {
        // Azurite checks a batch's table SAS against a table named `$batch`, so it
        // refuses every batch under a table SAS; Azure accepts them.
        let (reason, code) = denied(tenant.submit_batch("Orders", batch.clone()).await);
        assert_eq!(code.as_deref(), Some("AuthorizationFailure"), "{reason}");
        for op in batch.into_operations() {
            tenant.execute("Orders", op).await.expect("a write inside");
        }
    } else {
        tenant
            .submit_batch("Orders", batch)
            .await
            .expect("a batch inside");
    }
    let read = tenant
        .get("Orders", "tenant42", "b", None)
        .await
        .expect("get inside")
        .expect("stored");
    assert_eq!(read.get("N"), Some(&Value::Int32(3)));
    assert_eq!(read.get("M"), None, "replaced whole");

    // Queries reaching outside are narrowed to the range: the entities the admin wrote
    // outside it never come back.
    for query in [Query::new(), Query::partition("tenant42")] {
        let keys: Vec<_> = tenant
            .query_all("Orders", query)
            .await
            .expect("query")
            .into_iter()
            .map(|e| e.row_key)
            .collect();
        assert_eq!(keys, ["b", "c", "d", "m"]);
    }
    tenant
        .delete("Orders", "tenant42", "c", IfMatch::Any)
        .await
        .expect("delete inside");

    // Outside: refused, and the entities there untouched.
    let (reason, _) = denied(tenant.insert("Orders", Entity::new("tenant41", "c")).await);
    assert!(reason.contains("tenant41"), "{reason}");
    let (reason, _) = denied(tenant.get("Orders", "tenant42", "z", None).await);
    assert!(reason.contains("RowKey `z` is outside"), "{reason}");
    let (reason, _) = denied(tenant.delete("Orders", "tenant42", "0", IfMatch::Any).await);
    assert!(reason.contains("RowKey `0` is outside"), "{reason}");
    let outside = admin
        .query_all("Orders", Query::new())
        .await
        .expect("admin query");
    assert_eq!(outside.len(), 6);
    admin.delete_table("Orders").await.expect("cleanup");
}

#[tokio::test]
async fn an_expired_token_fails_with_permission_denied() {
    let Some(connection) = support::azurite_tables() else {
        return;
    };
    let prefix = prefix();
    let admin = AzureTableStore::options()
        .table_prefix(prefix.clone())
        .connect(&connection)
        .expect("a connection string");
    admin.create_table("Orders").await.expect("create");
    let sign = |expiry| {
        admin
            .sign_table_sas(
                &admin
                    .table_sas("Orders")
                    .expect("a builder")
                    .permissions("raud")
                    .expiry(expiry),
            )
            .expect("signed")
    };
    // Long expired: refused here.
    let stale = client(&admin, &prefix, &sign(Utc::now() - Duration::hours(1)));
    let (reason, code) = denied(stale.get("Orders", "p", "r", None).await);
    assert!(reason.contains("expired at"), "{reason}");
    assert_eq!(code, None);
    // Just expired, within the clock-skew allowance: sent, and refused by the service.
    let just = client(&admin, &prefix, &sign(Utc::now() - Duration::seconds(5)));
    let (reason, code) = denied(just.get("Orders", "p", "r", None).await);
    assert_eq!(code.as_deref(), Some("AuthorizationFailure"), "{reason}");
    admin.delete_table("Orders").await.expect("cleanup");
}

#[tokio::test]
async fn a_token_bound_to_a_stored_policy_works_until_the_policy_is_removed() {
    let Some(connection) = support::azurite_tables() else {
        return;
    };
    let prefix = prefix();
    let admin = AzureTableStore::options()
        .table_prefix(prefix.clone())
        .connect(&connection)
        .expect("a connection string");
    admin.create_table("Orders").await.expect("create");
    let start = Utc::now() - Duration::minutes(5);
    let expiry = Utc::now() + Duration::hours(1);
    admin
        .set_table_acl(
            "Orders",
            &[
                SignedIdentifier::new("tenant42", "raud", start, expiry),
                SignedIdentifier::new("auditors", "r", start, expiry),
            ],
        )
        .await
        .expect("set policies");
    let policies = admin.get_table_acl("Orders").await.expect("read policies");
    assert_eq!(
        policies
            .iter()
            .map(|p| (p.id.as_str(), p.permissions.as_str()))
            .collect::<Vec<_>>(),
        [("tenant42", "raud"), ("auditors", "r")]
    );
    assert_eq!(policies[0].expiry.timestamp(), expiry.timestamp());
    assert_eq!(policies[0].start.timestamp(), start.timestamp());

    let bound = |policy: &str| {
        let sas = admin
            .table_sas("Orders")
            .expect("a builder")
            .policy(policy)
            .partitions("tenant42", "tenant42");
        client(
            &admin,
            &prefix,
            &admin.sign_table_sas(&sas).expect("signed"),
        )
    };
    let tenant = bound("tenant42");
    tenant
        .insert("Orders", Entity::new("tenant42", "1"))
        .await
        .expect("insert under the policy");
    assert!(
        tenant
            .get("Orders", "tenant42", "1", None)
            .await
            .expect("read under the policy")
            .is_some()
    );
    // The token carries no permissions: the service checks the policy's.
    let auditor = bound("auditors");
    let (reason, code) = denied(auditor.insert("Orders", Entity::new("tenant42", "2")).await);
    assert_eq!(
        code.as_deref(),
        Some("AuthorizationPermissionMismatch"),
        "{reason}"
    );

    // Revoked: the policy is removed.
    admin
        .set_table_acl(
            "Orders",
            &[SignedIdentifier::new("auditors", "r", start, expiry)],
        )
        .await
        .expect("remove the policy");
    let mut outcome = tenant.get("Orders", "tenant42", "1", None).await;
    // The service applies a policy change within 30 s; the emulator at once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
    while outcome.is_ok() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        outcome = tenant.get("Orders", "tenant42", "1", None).await;
    }
    let (reason, code) = denied(outcome);
    assert_eq!(code.as_deref(), Some("AuthorizationFailure"), "{reason}");
    let refused = tenant
        .execute("Orders", WriteOp::Insert(Entity::new("tenant42", "3")))
        .await;
    assert_eq!(
        refused.expect_err("revoked").kind(),
        ErrorKind::PermissionDenied
    );
    admin.set_table_acl("Orders", &[]).await.expect("clear");
    assert!(
        admin
            .get_table_acl("Orders")
            .await
            .expect("read")
            .is_empty()
    );
    admin.delete_table("Orders").await.expect("cleanup");
}

#[tokio::test]
async fn blob_tokens_authorise_their_container_or_blob_only() {
    let Some(connection) = support::azurite(None, "127.0.0.1:10000") else {
        return;
    };
    let endpoint = format!("http://127.0.0.1:10000/{DEVELOPMENT_ACCOUNT}");
    let container = format!("sas{}", uuid::Uuid::new_v4().simple());
    tablekit_core::azure::create_blob_container(&connection, &container)
        .await
        .expect("a container");
    let expiry = Utc::now() + Duration::hours(1);
    let http = reqwest::Client::new();

    let write = BlobSas::blob(&container, "cold/a b.txt")
        .permissions("cw")
        .expiry(expiry)
        .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)
        .expect("a token");
    let put = http
        .put(format!("{endpoint}/{container}/cold/a%20b.txt?{write}"))
        .header("x-ms-blob-type", "BlockBlob")
        .header("x-ms-version", "2019-02-02")
        .body("hello")
        .send()
        .await
        .expect("a response");
    assert_eq!(
        put.status().as_u16(),
        201,
        "{}",
        put.text().await.unwrap_or_default()
    );

    let list = BlobSas::container(&container)
        .permissions("rl")
        .expiry(expiry)
        .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)
        .expect("a token");
    let listed = http
        .get(format!(
            "{endpoint}/{container}?restype=container&comp=list&{list}"
        ))
        .header("x-ms-version", "2019-02-02")
        .send()
        .await
        .expect("a response");
    assert_eq!(listed.status().as_u16(), 200);
    assert!(
        listed
            .text()
            .await
            .unwrap_or_default()
            .contains("cold/a b.txt")
    );
    let read = http
        .get(format!("{endpoint}/{container}/cold/a%20b.txt?{list}"))
        .header("x-ms-version", "2019-02-02")
        .send()
        .await
        .expect("a response");
    assert_eq!(read.text().await.unwrap_or_default(), "hello");

    // A token for another container, or without the permission, is refused.
    let other = BlobSas::container("elsewhere")
        .permissions("rl")
        .expiry(expiry)
        .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)
        .expect("a token");
    let refused = http
        .get(format!(
            "{endpoint}/{container}?restype=container&comp=list&{other}"
        ))
        .header("x-ms-version", "2019-02-02")
        .send()
        .await
        .expect("a response");
    assert_eq!(refused.status().as_u16(), 403);
    let no_write = http
        .put(format!("{endpoint}/{container}/other.txt?{list}"))
        .header("x-ms-blob-type", "BlockBlob")
        .header("x-ms-version", "2019-02-02")
        .body("x")
        .send()
        .await
        .expect("a response");
    assert_eq!(no_write.status().as_u16(), 403);
}
