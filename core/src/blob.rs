//! `BlobStore`: named binary objects beside the tables, for what does not fit an entity
//! (large properties, long id lists, log data). Built on the `object_store` crate: the
//! local file system (the embedded default), memory (tests), and, with the `azure`
//! feature, Azure Blob Storage (Azurite included).
//!
//! ```
//! use tablekit_core::blob::BlobStore;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let blobs = BlobStore::memory();
//! let name = blobs.put_content_addressed("photos/", b"jpeg bytes".to_vec()).await?;
//! assert!(name.starts_with("photos/"));
//! assert_eq!(blobs.get(&name).await?, Some(b"jpeg bytes".to_vec()));
//! assert!(blobs.delete(&name).await?);
//! assert!(!blobs.delete(&name).await?, "deleting again is not an error");
//! # Ok::<_, tablekit_core::Error>(())
//! # }).unwrap();
//! ```

use std::sync::Arc;

use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// A blob's name, size and last change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobInfo {
    /// The name.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// When it was last written.
    pub last_modified: chrono::DateTime<chrono::Utc>,
}

/// A blob container: the local file system, memory, or Azure Blob Storage.
#[derive(Clone)]
pub struct BlobStore {
    store: Arc<dyn ObjectStore>,
    description: String,
    /// The folder of a local store: its compare-and-swap runs under a file lock there,
    /// because the local file system has no conditional replace.
    local_root: Option<Arc<std::path::PathBuf>>,
}

/// The version of a blob as read, for [`BlobStore::put_if_version`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobVersion(String);

/// The folder of a local store holding the compare-and-swap lock files; never listed.
const LOCK_FOLDER: &str = ".tablekit-locks";

impl std::fmt::Debug for BlobStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobStore")
            .field("store", &self.description)
            .finish()
    }
}

fn blob_error(e: object_store::Error) -> Error {
    match e {
        object_store::Error::InvalidPath { source } => Error::InvalidConnection {
            connection: "blob name".to_owned(),
            reason: source.to_string(),
        },
        other => {
            let message = other.to_string();
            if message.contains("timed out") || message.contains("connect") {
                Error::Transient { message }
            } else {
                Error::Backend { message }
            }
        }
    }
}

fn path(name: &str) -> Result<Path> {
    if name.is_empty()
        || name.ends_with('/')
        || name
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
    {
        return Err(Error::InvalidConnection {
            connection: format!("blob name `{name}`"),
            reason: "a blob name is `/`-separated non-empty segments, without `.` or `..`"
                .to_owned(),
        });
    }
    Path::parse(name).map_err(|e| Error::InvalidConnection {
        connection: format!("blob name `{name}`"),
        reason: e.to_string(),
    })
}

fn content_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The local compare-and-swap: under an exclusive lock file for the name, compare the
/// current content's hash with `expected`, then write a temporary file and rename it over
/// the blob (readers see the old or the new content, never a part).
fn local_swap(
    root: &std::path::Path,
    name: &str,
    expected: Option<String>,
    bytes: &[u8],
) -> Result<bool> {
    let io = |what: &str, e: std::io::Error| Error::Backend {
        message: format!("{what} for blob `{name}`: {e}"),
    };
    let locks = root.join(LOCK_FOLDER);
    std::fs::create_dir_all(&locks).map_err(|e| io("creating the lock folder", e))?;
    let lock = std::fs::File::create(locks.join(format!("{}.lock", content_hash(name.as_bytes()))))
        .map_err(|e| io("opening the lock file", e))?;
    lock.lock().map_err(|e| io("locking", e))?;
    let target = root.join(name);
    let current = match std::fs::read(&target) {
        Ok(current) => Some(content_hash(&current)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("reading", e)),
    };
    if current != expected {
        return Ok(false);
    }
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| io("creating the folder", e))?;
    }
    let staging = locks.join(format!("{}.tmp", uuid::Uuid::new_v4().simple()));
    std::fs::write(&staging, bytes).map_err(|e| io("writing", e))?;
    std::fs::rename(&staging, &target).map_err(|e| io("renaming", e))?;
    Ok(true)
}

impl BlobStore {
    /// Blobs in memory (tests).
    pub fn memory() -> Self {
        BlobStore {
            store: Arc::new(object_store::memory::InMemory::new()),
            description: "memory".to_owned(),
            local_root: None,
        }
    }

    /// Blobs as files under `dir` (created if needed): the embedded default.
    ///
    /// # Errors
    /// [`Error::Backend`] when the folder cannot be created.
    pub fn local(dir: impl AsRef<std::path::Path>) -> Result<Self> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|e| Error::Backend {
            message: format!("creating the blob folder {}: {e}", dir.display()),
        })?;
        let store =
            object_store::local::LocalFileSystem::new_with_prefix(dir).map_err(blob_error)?;
        Ok(BlobStore {
            store: Arc::new(store),
            description: format!("file:{}", dir.display()),
            local_root: Some(Arc::new(dir.to_path_buf())),
        })
    }

    /// Blobs in a container of Azure Blob Storage, from a storage connection string with
    /// tablekit's `Container=NAME` key: `UseDevelopmentStorage=true;Container=blobs`
    /// (Azurite), or `AccountName=…;AccountKey=…[;BlobEndpoint=…];Container=…` (read by
    /// the one [account reader](crate::azure::account)). Feature `azure`.
    ///
    /// # Errors
    /// [`Error::InvalidConnection`] naming what is missing.
    #[cfg(feature = "azure")]
    pub fn azure(connection: &str) -> Result<Self> {
        let account = crate::azure::StorageAccount::from_connection_string(connection)?;
        let container = account
            .setting("container")
            .ok_or_else(|| Error::InvalidConnection {
                connection: "blob connection string".to_owned(),
                reason: "missing Container=NAME".to_owned(),
            })?
            .to_owned();
        Self::azure_container(&account, &container)
    }

    /// Blobs in `container` of an account read by the
    /// [account reader](crate::azure::account): the emulator's, or the account's blob
    /// endpoint with its key. Feature `azure`.
    ///
    /// # Errors
    /// [`Error::InvalidConnection`] when the account has no blob endpoint or no key.
    #[cfg(feature = "azure")]
    pub fn azure_container(
        account: &crate::azure::StorageAccount,
        container: &str,
    ) -> Result<Self> {
        use crate::azure::Credential;
        use base64::Engine;
        let mut builder = object_store::azure::MicrosoftAzureBuilder::new()
            .with_container_name(container)
            .with_account(account.name());
        if account.is_development() {
            builder = builder.with_use_emulator(true);
        } else {
            let endpoint = account.endpoint(crate::azure::Service::Blob)?;
            builder = builder
                .with_endpoint(endpoint.to_owned())
                .with_allow_http(endpoint.starts_with("http://"));
            let Credential::SharedKey(key) = account.credential() else {
                return Err(Error::InvalidConnection {
                    connection: "blob connection string".to_owned(),
                    reason: "missing AccountKey".to_owned(),
                });
            };
            builder =
                builder.with_access_key(base64::engine::general_purpose::STANDARD.encode(key));
        }
        let store = builder.build().map_err(blob_error)?;
        Ok(BlobStore {
            store: Arc::new(store),
            description: format!("azure container {container}"),
            local_root: None,
        })
    }

    /// Opens the blob store a connection string names: `memory:`, `file:DIR`, or
    /// `azure:CONNECTION-STRING;Container=NAME` (feature `azure`).
    ///
    /// # Errors
    /// [`Error::InvalidConnection`] for an unknown scheme; the backend's errors.
    pub fn connect(connection: &str) -> Result<Self> {
        match connection.split_once(':') {
            Some(("memory", _)) => Ok(Self::memory()),
            Some(("file", dir)) if !dir.is_empty() => Self::local(dir),
            #[cfg(feature = "azure")]
            Some(("azure", rest)) => Self::azure(rest),
            #[cfg(not(feature = "azure"))]
            Some(("azure", _)) => Err(Error::InvalidConnection {
                // A connection string holds a key: only its scheme is shown.
                connection: "azure:…".to_owned(),
                reason: "this build has no Azure Blob Storage support: build it with the `azure` feature (`cargo build --features azure`)".to_owned(),
            }),
            _ => Err(Error::InvalidConnection {
                connection: connection.to_owned(),
                reason:
                    "expected `memory:`, `file:DIR` or `azure:CONNECTION-STRING;Container=NAME`"
                        .to_owned(),
            }),
        }
    }

    /// Writes a blob, replacing any blob of that name.
    ///
    /// # Errors
    /// An invalid name; the backend's errors.
    pub async fn put(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        self.store
            .put(&path(name)?, PutPayload::from(bytes))
            .await
            .map(drop)
            .map_err(blob_error)
    }

    /// Writes a blob unless one of that name exists; `true` when this call wrote it.
    ///
    /// # Errors
    /// As [`put`](Self::put).
    pub async fn put_if_absent(&self, name: &str, bytes: Vec<u8>) -> Result<bool> {
        let options = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(&path(name)?, PutPayload::from(bytes), options)
            .await
        {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(blob_error(e)),
        }
    }

    /// Writes a blob named by its content (`prefix` + the SHA-256 of the bytes, in hex)
    /// and returns the name. Writing the same content again writes nothing: content
    /// addressing makes the write idempotent.
    ///
    /// # Errors
    /// As [`put`](Self::put).
    pub async fn put_content_addressed(&self, prefix: &str, bytes: Vec<u8>) -> Result<String> {
        let name = format!("{prefix}{}", content_hash(&bytes));
        self.put_if_absent(&name, bytes).await?;
        Ok(name)
    }

    /// Starts writing a blob in parts, for content too large to hold whole: the parts
    /// are uploaded as they fill (5 MiB each, a few at a time) and the blob appears only
    /// at [`BlobWriter::finish`], replacing any blob of that name.
    ///
    /// # Errors
    /// An invalid name; the backend's errors.
    pub async fn writer(&self, name: &str) -> Result<BlobWriter> {
        let upload = self
            .store
            .put_multipart(&path(name)?)
            .await
            .map_err(blob_error)?;
        Ok(BlobWriter {
            upload: object_store::WriteMultipart::new(upload),
        })
    }

    /// Reads a blob as a stream of chunks, for content too large to hold whole; `None`
    /// when there is none of that name.
    ///
    /// # Errors
    /// An invalid name; the backend's errors (also as items of the stream).
    pub async fn read_stream(
        &self,
        name: &str,
    ) -> Result<Option<impl futures::Stream<Item = Result<Vec<u8>>> + Send + use<>>> {
        match self.store.get(&path(name)?).await {
            Ok(result) => Ok(Some(
                result
                    .into_stream()
                    .map_ok(|chunk| chunk.to_vec())
                    .map_err(blob_error),
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(blob_error(e)),
        }
    }

    /// Reads a blob; `None` when there is none of that name.
    ///
    /// # Errors
    /// An invalid name; the backend's errors.
    pub async fn get(&self, name: &str) -> Result<Option<Vec<u8>>> {
        match self.store.get(&path(name)?).await {
            Ok(result) => result
                .bytes()
                .await
                .map(|b| Some(b.to_vec()))
                .map_err(blob_error),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(blob_error(e)),
        }
    }

    /// Deletes a blob; `false` when there was none (deleting is idempotent).
    ///
    /// # Errors
    /// An invalid name; the backend's errors.
    pub async fn delete(&self, name: &str) -> Result<bool> {
        let location = path(name)?;
        match self.store.head(&location).await {
            Ok(_) => {}
            Err(object_store::Error::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(blob_error(e)),
        }
        match self.store.delete(&location).await {
            Ok(()) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(blob_error(e)),
        }
    }

    /// Reads a blob with its version, for a later [`put_if_version`](Self::put_if_version);
    /// `None` when there is none of that name.
    ///
    /// # Errors
    /// An invalid name; the backend's errors.
    pub async fn get_versioned(&self, name: &str) -> Result<Option<(Vec<u8>, BlobVersion)>> {
        if self.local_root.is_some() {
            return Ok(self.get(name).await?.map(|bytes| {
                let version = BlobVersion(content_hash(&bytes));
                (bytes, version)
            }));
        }
        match self.store.get(&path(name)?).await {
            Ok(result) => {
                let meta = result.meta.clone();
                let bytes = result.bytes().await.map_err(blob_error)?.to_vec();
                let version = meta
                    .e_tag
                    .or(meta.version)
                    .unwrap_or_else(|| content_hash(&bytes));
                Ok(Some((bytes, BlobVersion(version))))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(blob_error(e)),
        }
    }

    /// Compare-and-swap: writes the blob only if it is still at `expected` (`None`: only if
    /// there is none); `false` when another writer changed it first. Read it again and
    /// retry. On the local file system the check and the write run under a lock file, so
    /// processes sharing the folder serialise.
    ///
    /// # Errors
    /// An invalid name; the backend's errors.
    pub async fn put_if_version(
        &self,
        name: &str,
        bytes: Vec<u8>,
        expected: Option<&BlobVersion>,
    ) -> Result<bool> {
        let location = path(name)?;
        if let Some(root) = &self.local_root {
            let root = Arc::clone(root);
            let name = location.to_string();
            let expected = expected.map(|v| v.0.clone());
            return tokio::task::spawn_blocking(move || local_swap(&root, &name, expected, &bytes))
                .await
                .map_err(|e| Error::Backend {
                    message: format!("the blob write task failed: {e}"),
                })?;
        }
        let mode = match expected {
            None => PutMode::Create,
            Some(version) => PutMode::Update(object_store::UpdateVersion {
                e_tag: Some(version.0.clone()),
                version: None,
            }),
        };
        let options = PutOptions {
            mode,
            ..PutOptions::default()
        };
        match self
            .store
            .put_opts(&location, PutPayload::from(bytes), options)
            .await
        {
            Ok(_) => Ok(true),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. }
                | object_store::Error::NotFound { .. },
            ) => Ok(false),
            Err(e) => Err(blob_error(e)),
        }
    }

    /// The blobs whose names start with `prefix` (a folder: `photos/`), sorted by name.
    ///
    /// # Errors
    /// The backend's errors.
    pub async fn list(&self, prefix: &str) -> Result<Vec<BlobInfo>> {
        let folder = prefix.rsplit_once('/').map(|(folder, _)| folder);
        let folder_path = match folder {
            Some(f) if !f.is_empty() => Some(path(f)?),
            _ => None,
        };
        let mut out: Vec<BlobInfo> = self
            .store
            .list(folder_path.as_ref())
            .map_err(blob_error)
            .try_filter_map(|meta| async move {
                let name = meta.location.to_string();
                let keep = name.starts_with(prefix) && !name.starts_with(LOCK_FOLDER);
                Ok(keep.then_some(BlobInfo {
                    name,
                    size: meta.size,
                    last_modified: meta.last_modified,
                }))
            })
            .try_collect()
            .await?;
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }
}

/// A blob being written in parts ([`BlobStore::writer`]).
pub struct BlobWriter {
    upload: object_store::WriteMultipart,
}

impl std::fmt::Debug for BlobWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobWriter").finish_non_exhaustive()
    }
}

impl BlobWriter {
    /// How many parts may upload at once before `write` waits.
    const PARTS_IN_FLIGHT: usize = 4;

    /// Appends bytes; waits while too many parts are uploading, so memory stays bounded.
    ///
    /// # Errors
    /// The backend's errors of a part upload.
    pub async fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.upload
            .wait_for_capacity(Self::PARTS_IN_FLIGHT)
            .await
            .map_err(blob_error)?;
        self.upload.write(bytes);
        Ok(())
    }

    /// Uploads what is left and makes the blob appear.
    ///
    /// # Errors
    /// The backend's errors.
    pub async fn finish(self) -> Result<()> {
        self.upload.finish().await.map(drop).map_err(blob_error)
    }

    /// Gives the upload up: no blob appears.
    ///
    /// # Errors
    /// The backend's errors.
    pub async fn abort(self) -> Result<()> {
        self.upload.abort().await.map_err(blob_error)
    }
}
