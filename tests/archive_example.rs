//! The archive-employees example's flow at a small size, as a user runs it: on the
//! embedded SQLite queue and on RabbitMQ, with and without `--chaos` (worker processes
//! killed and restarted at random) and `--early-kills` (worker processes, the index worker
//! too, killed within their first second), with its tables on Azurite, and on Azure
//! Storage alone (Azurite's tables, queues and blobs); the final report must be clean.

#![allow(missing_docs)]

mod support;

use std::path::PathBuf;
use std::process::Command;

fn example() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>")
        .join("examples")
        .join("archive_employees")
}

/// RabbitMQ: `AMQP_URL`, else the local broker; without one the RabbitMQ runs are
/// skipped, except under `CI=true`.
fn amqp_url() -> Option<String> {
    if let Ok(url) = std::env::var("AMQP_URL") {
        return Some(url);
    }
    let up = "127.0.0.1:5672"
        .parse()
        .ok()
        .and_then(|a| {
            std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(2)).ok()
        })
        .is_some();
    if up {
        return Some("amqp://guest:guest@127.0.0.1:5672/%2f".to_owned());
    }
    support::service_missing("no RabbitMQ: set AMQP_URL or run scripts/services.sh");
    None
}

fn run(extra: &[&str]) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let output = Command::new(example())
        .args(["--data", &dir.path().display().to_string()])
        .args([
            "--departments",
            "3",
            "--employees",
            "40",
            "--leavers",
            "25",
            "--workers",
            "2",
        ])
        .args(extra)
        .output()
        .expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{extra:?}: {:?}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("current employees: 90 (expected 90)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("archived employees: 30 (expected 30)"),
        "{stdout}"
    );
    assert!(stdout.contains("audit of every index: clean"), "{stdout}");
    assert!(
        stdout.contains("archived photos read back from the blob store: 30 (expected 30)"),
        "{stdout}"
    );
    assert!(stdout.contains("poisoned operations: none"), "{stdout}");
    assert!(stdout.contains("report: OK"), "{stdout}");
    // `chaos: N worker processes killed and restarted, M of them in their first second`
    let chaos: Vec<usize> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("chaos: "))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|word| word.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    if extra.contains(&"--chaos") {
        assert!(
            chaos.first() >= Some(&1),
            "chaos killed no worker: {stdout}"
        );
    }
    if let Some(at) = extra.iter().position(|a| *a == "--early-kills") {
        let asked: usize = extra[at + 1].parse().expect("a number of kills");
        assert_eq!(
            chaos.get(1),
            Some(&asked),
            "not every early kill was made: {stdout}"
        );
    }
}

#[test]
fn the_example_archives_on_the_sqlite_queue() {
    run(&[]);
}

#[test]
fn the_example_archives_on_the_sqlite_queue_with_chaos() {
    run(&["--chaos"]);
}

#[test]
fn the_example_archives_on_the_sqlite_queue_with_workers_killed_as_they_start() {
    run(&["--early-kills", "8"]);
}

/// A table prefix of this run's own, when Azurite's tables, blobs and queues answer;
/// without them the Azure runs are skipped, except under `CI=true`.
#[cfg(feature = "azure")]
fn azurite_prefix() -> Option<String> {
    let up = ["127.0.0.1:10002", "127.0.0.1:10001", "127.0.0.1:10000"]
        .iter()
        .all(|address| {
            address
                .parse()
                .ok()
                .and_then(|a| {
                    std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(2)).ok()
                })
                .is_some()
        });
    if !up {
        support::service_missing(
            "no Azurite tables, queues and blobs: set TABLEKIT_AZURE_CONNECTION or run scripts/services.sh",
        );
        return None;
    }
    Some(format!(
        "tex{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ))
}

#[cfg(feature = "azure")]
#[test]
fn the_example_archives_on_azurite() {
    let Some(prefix) = azurite_prefix() else {
        return;
    };
    run(&[
        "--store",
        &format!("azure:UseDevelopmentStorage=true;TablePrefix={prefix}"),
    ]);
}

/// The README's Azure Storage command as a newcomer runs it (no table prefix of their
/// own), twice on one account: each run has its own tables, so the second counts only
/// its own employees.
#[cfg(feature = "azure")]
#[test]
fn the_readme_azure_run_is_repeatable_on_one_account() {
    if azurite_prefix().is_none() {
        return;
    }
    for _ in 0..2 {
        run(&[
            "--store",
            "azure:UseDevelopmentStorage=true",
            "--broker",
            "azure:UseDevelopmentStorage=true",
        ]);
    }
}

#[cfg(feature = "azure")]
#[test]
fn the_example_archives_on_azure_storage_alone_with_chaos() {
    let Some(prefix) = azurite_prefix() else {
        return;
    };
    run(&[
        "--store",
        &format!("azure:UseDevelopmentStorage=true;TablePrefix={prefix}"),
        "--broker",
        "azure:UseDevelopmentStorage=true",
        "--chaos",
    ]);
}

#[cfg(feature = "azure")]
#[test]
fn the_example_archives_on_azure_storage_alone_with_workers_killed_as_they_start() {
    let Some(prefix) = azurite_prefix() else {
        return;
    };
    run(&[
        "--store",
        &format!("azure:UseDevelopmentStorage=true;TablePrefix={prefix}"),
        "--broker",
        "azure:UseDevelopmentStorage=true",
        "--early-kills",
        "8",
    ]);
}

#[test]
fn the_example_archives_on_rabbitmq() {
    if let Some(url) = amqp_url() {
        run(&["--broker", &url]);
    }
}

#[test]
fn the_example_archives_on_rabbitmq_with_chaos() {
    if let Some(url) = amqp_url() {
        run(&["--broker", &url, "--chaos"]);
    }
}

#[test]
fn the_example_archives_on_rabbitmq_with_workers_killed_as_they_start() {
    if let Some(url) = amqp_url() {
        run(&["--broker", &url, "--early-kills", "8"]);
    }
}
