//! One contract for the blob store, on memory, the local file system and (with the
//! `azure` feature) Azure Blob Storage through Azurite.

use tablekit_core::blob::BlobStore;

#[cfg(feature = "azure")]
mod support;

async fn writes_read_back_and_deletes_are_idempotent(blobs: BlobStore) {
    blobs.put("a/one.bin", vec![1, 2, 3]).await.expect("put");
    assert_eq!(
        blobs.get("a/one.bin").await.expect("get"),
        Some(vec![1, 2, 3])
    );
    blobs.put("a/one.bin", vec![9]).await.expect("replace");
    assert_eq!(blobs.get("a/one.bin").await.expect("get"), Some(vec![9]));
    assert_eq!(blobs.get("a/missing").await.expect("get"), None);
    assert!(blobs.delete("a/one.bin").await.expect("delete"));
    assert!(!blobs.delete("a/one.bin").await.expect("delete again"));
    assert_eq!(blobs.get("a/one.bin").await.expect("get"), None);
}

async fn put_if_absent_writes_once(blobs: BlobStore) {
    assert!(
        blobs
            .put_if_absent("once", b"first".to_vec())
            .await
            .expect("put")
    );
    assert!(
        !blobs
            .put_if_absent("once", b"second".to_vec())
            .await
            .expect("put")
    );
    assert_eq!(
        blobs.get("once").await.expect("get"),
        Some(b"first".to_vec())
    );
}

async fn content_addressed_names_follow_the_bytes(blobs: BlobStore) {
    let a = blobs
        .put_content_addressed("photos/", b"same".to_vec())
        .await
        .expect("put");
    let b = blobs
        .put_content_addressed("photos/", b"same".to_vec())
        .await
        .expect("put");
    let c = blobs
        .put_content_addressed("photos/", b"other".to_vec())
        .await
        .expect("put");
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(a.len(), "photos/".len() + 64);
    let listed: Vec<String> = blobs
        .list("photos/")
        .await
        .expect("list")
        .into_iter()
        .map(|b| b.name)
        .collect();
    let mut expected = vec![a, c];
    expected.sort();
    assert_eq!(listed, expected);
}

async fn listing_is_by_prefix_and_sorted(blobs: BlobStore) {
    for name in [
        "logs/2024/01/b.log",
        "logs/2024/01/a.log",
        "logs/2024/02/a.log",
        "other/x",
    ] {
        blobs
            .put(name, name.as_bytes().to_vec())
            .await
            .expect("put");
    }
    let names = |prefix: &'static str| {
        let blobs = blobs.clone();
        async move {
            blobs
                .list(prefix)
                .await
                .expect("list")
                .into_iter()
                .map(|b| (b.name, b.size))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        names("logs/2024/01/").await,
        [
            ("logs/2024/01/a.log".to_owned(), 18),
            ("logs/2024/01/b.log".to_owned(), 18)
        ]
    );
    assert_eq!(names("logs/").await.len(), 3);
    assert_eq!(names("logs/2024/01/a").await.len(), 1);
}

async fn invalid_names_are_refused(blobs: BlobStore) {
    for bad in ["", "a//b", "../escape", "a/./b", "folder/"] {
        assert!(blobs.put(bad, vec![1]).await.is_err(), "{bad:?}");
        assert!(blobs.get(bad).await.is_err(), "{bad:?}");
    }
}

async fn compare_and_swap_refuses_a_stale_version(blobs: BlobStore) {
    assert!(blobs.get_versioned("cas/x").await.expect("get").is_none());
    assert!(
        blobs
            .put_if_version("cas/x", b"1".to_vec(), None)
            .await
            .expect("create")
    );
    assert!(
        !blobs
            .put_if_version("cas/x", b"again".to_vec(), None)
            .await
            .expect("create again"),
        "creating over an existing blob is refused"
    );
    let (bytes, v1) = blobs
        .get_versioned("cas/x")
        .await
        .expect("get")
        .expect("there");
    assert_eq!(bytes, b"1");
    assert!(
        blobs
            .put_if_version("cas/x", b"2".to_vec(), Some(&v1))
            .await
            .expect("swap")
    );
    assert!(
        !blobs
            .put_if_version("cas/x", b"3".to_vec(), Some(&v1))
            .await
            .expect("stale swap"),
        "a swap from a version that changed is refused"
    );
    assert_eq!(blobs.get("cas/x").await.expect("get"), Some(b"2".to_vec()));
    // Concurrent read-modify-write increments through the swap lose nothing.
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let blobs = blobs.clone();
            tokio::spawn(async move {
                for _ in 0..5 {
                    loop {
                        let current = blobs.get_versioned("cas/n").await.expect("get");
                        let (n, version) = match current {
                            Some((bytes, v)) => (
                                String::from_utf8(bytes)
                                    .expect("utf8")
                                    .parse::<u32>()
                                    .expect("n"),
                                Some(v),
                            ),
                            None => (0, None),
                        };
                        let next = (n + 1).to_string().into_bytes();
                        if blobs
                            .put_if_version("cas/n", next, version.as_ref())
                            .await
                            .expect("swap")
                        {
                            break;
                        }
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(blobs.get("cas/n").await.expect("get"), Some(b"40".to_vec()));
    let listed = blobs.list("").await.expect("list");
    assert!(
        listed.iter().all(|b| b.name.starts_with("cas/")),
        "no lock or staging file is listed: {listed:?}"
    );
}

macro_rules! contract {
    ($module:ident, $make:expr) => {
        mod $module {
            use super::*;

            #[tokio::test]
            async fn writes_read_back_and_deletes_are_idempotent() {
                let Some((blobs, _guard)) = ($make) else {
                    return;
                };
                super::writes_read_back_and_deletes_are_idempotent(blobs).await;
            }

            #[tokio::test]
            async fn put_if_absent_writes_once() {
                let Some((blobs, _guard)) = ($make) else {
                    return;
                };
                super::put_if_absent_writes_once(blobs).await;
            }

            #[tokio::test]
            async fn content_addressed_names_follow_the_bytes() {
                let Some((blobs, _guard)) = ($make) else {
                    return;
                };
                super::content_addressed_names_follow_the_bytes(blobs).await;
            }

            #[tokio::test]
            async fn listing_is_by_prefix_and_sorted() {
                let Some((blobs, _guard)) = ($make) else {
                    return;
                };
                super::listing_is_by_prefix_and_sorted(blobs).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn compare_and_swap_refuses_a_stale_version() {
                let Some((blobs, _guard)) = ($make) else {
                    return;
                };
                super::compare_and_swap_refuses_a_stale_version(blobs).await;
            }

            #[tokio::test]
            async fn invalid_names_are_refused() {
                let Some((blobs, _guard)) = ($make) else {
                    return;
                };
                super::invalid_names_are_refused(blobs).await;
            }
        }
    };
}

contract!(memory, Some((BlobStore::memory(), ())));

contract!(local, {
    let dir = tempfile::tempdir().expect("a temp dir");
    Some((
        BlobStore::local(dir.path().join("blobs")).expect("a folder"),
        dir,
    ))
});

#[cfg(feature = "azure")]
async fn azurite_container() -> Option<(BlobStore, ())> {
    let connection = support::azurite(None, "127.0.0.1:10000")?;
    let container = format!("c{}", uuid::Uuid::new_v4().simple());
    let created = tablekit_core::azure::create_blob_container(&connection, &container)
        .await
        .expect("the container is created");
    assert!(created);
    let blobs = BlobStore::azure(&format!("{connection};Container={container}"))
        .expect("an Azure blob store");
    Some((blobs, ()))
}

#[cfg(feature = "azure")]
contract!(azure, azurite_container().await);
