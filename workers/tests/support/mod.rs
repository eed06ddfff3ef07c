//! What the workers' tests share: reaching RabbitMQ and Azurite, reporting a skip, unique
//! names.

#![allow(dead_code)]

use std::net::TcpStream;
use std::sync::OnceLock;
use std::time::Duration;

/// The broker to test against, in order: `AMQP_URL`; the local RabbitMQ if its port
/// answers (`scripts/services.sh` starts it when installed); a RabbitMQ container through
/// testcontainers when a Docker engine is reachable. Without any the test is skipped with
/// a message — except under `CI=true`, where a missing broker fails the test.
pub(crate) fn amqp_url() -> Option<String> {
    if let Ok(url) = std::env::var("AMQP_URL") {
        return Some(url);
    }
    let local = "127.0.0.1:5672";
    let reachable = local
        .parse()
        .ok()
        .and_then(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok())
        .is_some();
    if reachable {
        return Some("amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    }
    if let Some(url) = container_url() {
        return Some(url);
    }
    service_missing(
        "no RabbitMQ: set AMQP_URL, start the local broker (scripts/services.sh), or run a Docker engine for testcontainers",
    );
    None
}

fn docker_reachable() -> bool {
    std::env::var_os("DOCKER_HOST").is_some()
        || std::os::unix::net::UnixStream::connect("/var/run/docker.sock").is_ok()
}

/// One RabbitMQ container per test process, started on first use and kept for the
/// process's life (labelled `tablekit-test`, so `scripts/test.sh` removes it afterwards).
fn container_url() -> Option<String> {
    static URL: OnceLock<Option<String>> = OnceLock::new();
    URL.get_or_init(|| {
        if !docker_reachable() {
            return None;
        }
        // The sync runner owns a runtime, so it starts outside the test's runtime.
        std::thread::spawn(|| {
            use testcontainers_modules::rabbitmq::RabbitMq;
            use testcontainers_modules::testcontainers::ImageExt;
            use testcontainers_modules::testcontainers::runners::SyncRunner;
            // The module's default image is 3.8, older than the 3.10 quorum-queue features
            // the queue relies on.
            let container = RabbitMq::default()
                .with_tag("3.13-management")
                .with_label("tablekit-test", "rabbitmq")
                .with_startup_timeout(Duration::from_secs(120))
                .start()
                .map_err(|e| eprintln!("testcontainers could not start RabbitMQ: {e}"))
                .ok()?;
            let host = container.get_host().ok()?;
            let port = container.get_host_port_ipv4(5672).ok()?;
            let url = format!("amqp://guest:guest@{host}:{port}/%2f");
            // Kept running until the process ends.
            Box::leak(Box::new(container));
            Some(url)
        })
        .join()
        .ok()
        .flatten()
    })
    .clone()
}

pub(crate) mod browser;
#[cfg(feature = "console")]
pub(crate) mod console;
#[path = "../../../tests/support/skips.rs"]
mod skips;
// Not every test binary calls both.
#[allow(unused_imports)]
pub(crate) use skips::{service_missing, skip};

/// A name no other test (or earlier run) uses.
pub(crate) fn unique(prefix: &str) -> String {
    format!("tk-test-{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// Azurite's queue service (or `TABLEKIT_AZURE_CONNECTION`'s): the storage connection
/// string, when the queue port answers; a reported skip otherwise, and a failure under
/// `CI=true`.
pub(crate) fn azure_queues() -> Option<String> {
    if let Ok(connection) = std::env::var("TABLEKIT_AZURE_CONNECTION") {
        return Some(connection);
    }
    let up = ["127.0.0.1:10001", "127.0.0.1:10000"]
        .iter()
        .all(|address| {
            address
                .parse()
                .ok()
                .and_then(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)).ok())
                .is_some()
        });
    if up {
        return Some("UseDevelopmentStorage=true".to_owned());
    }
    service_missing(
        "no Azurite queue and blob services: set TABLEKIT_AZURE_CONNECTION or run scripts/services.sh",
    );
    None
}

/// A unique queue name valid on Azure (lowercase, hyphens, at most 56 characters).
pub(crate) fn azure_name(prefix: &str) -> String {
    let prefix: String = prefix
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(30)
        .collect();
    let prefix = prefix.trim_matches('-').replace("--", "-");
    format!(
        "tk-{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// An Azurite queue service of a test's own: on a free port, keeping its messages on disk
/// so that [`PrivateAzurite::restart`] stops it gracefully and starts it again with every
/// stored message. `None` (a reported skip, a failure under `CI=true`) when the Azurite
/// that `scripts/services.sh` installs into `.azurite/` is missing.
pub(crate) fn private_azurite_queue() -> Option<PrivateAzurite> {
    let binary = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../.azurite/node_modules/.bin/azurite-queue");
    if !binary.exists() {
        service_missing("no Azurite in .azurite/ (scripts/services.sh installs it)");
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let mut azurite = PrivateAzurite {
        binary,
        dir: tempfile::tempdir().expect("a temp dir"),
        port,
        child: None,
    };
    azurite.start();
    Some(azurite)
}

/// See [`private_azurite_queue`].
pub(crate) struct PrivateAzurite {
    binary: std::path::PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    child: Option<std::process::Child>,
}

impl PrivateAzurite {
    /// The storage connection string of this queue service.
    pub(crate) fn connection(&self) -> String {
        format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;QueueEndpoint=http://127.0.0.1:{}/devstoreaccount1",
            self.port
        )
    }

    fn start(&mut self) {
        let child = std::process::Command::new(&self.binary)
            .args([
                "--silent",
                "--skipApiVersionCheck",
                "--loose",
                "--disableTelemetry",
            ])
            .args([
                "--queueHost",
                "127.0.0.1",
                "--queuePort",
                &self.port.to_string(),
            ])
            .arg("--location")
            .arg(self.dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("Azurite starts");
        self.child = Some(child);
        let address = format!("127.0.0.1:{}", self.port);
        for _ in 0..100 {
            if address
                .parse()
                .ok()
                .and_then(|a| TcpStream::connect_timeout(&a, Duration::from_millis(200)).ok())
                .is_some()
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("the test's Azurite did not listen on {address} within 10 s");
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM: Azurite closes its servers and saves what it holds.
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            for _ in 0..100 {
                if child.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops the service gracefully and starts it again on the same port and files.
    pub(crate) fn restart(&mut self) {
        self.stop();
        self.start();
    }
}

impl Drop for PrivateAzurite {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A free local TCP port.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("a free port")
        .local_addr()
        .expect("its address")
        .port()
}

/// A plain HTTP GET on the local port: the whole response, or `None` when nothing
/// answers.
pub(crate) fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

/// Every log line of this test binary at INFO and above, from a global subscriber
/// installed on first use. (A subscriber set for one test alone misses events while other
/// tests run in parallel: `tracing` caches across threads which call sites are enabled.)
/// A test reads the lines that name its own queue.
pub(crate) fn logs() -> &'static Captured {
    static LOGS: OnceLock<Captured> = OnceLock::new();
    LOGS.get_or_init(|| {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other global subscriber in this test binary");
        captured
    })
}

impl Captured {
    /// What was written so far.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Log output written by a test's `tracing` subscriber, kept to be read.
#[derive(Clone, Default)]
pub(crate) struct Captured(pub(crate) std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
