//! The archive-employees example's flow at a small size, as a user runs it: on the
//! embedded SQLite queue and on RabbitMQ, with and without `--chaos` (worker processes
//! killed and restarted at random), and with its tables on Azurite; the final report must
//! be clean.

#![allow(missing_docs)]

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
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "no RabbitMQ under CI=true (scripts/services.sh starts it)"
    );
    eprintln!("skipped on RabbitMQ: no broker");
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
    assert!(stdout.contains("report: OK"), "{stdout}");
    if extra.contains(&"--chaos") {
        let killed = stdout
            .lines()
            .find_map(|l| l.strip_prefix("chaos: "))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.parse::<usize>().ok())
            .unwrap_or(0);
        assert!(killed >= 1, "chaos killed no worker: {stdout}");
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

#[cfg(feature = "azure")]
#[test]
fn the_example_archives_on_azurite() {
    let up = "127.0.0.1:10002"
        .parse()
        .ok()
        .and_then(|a| {
            std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(2)).ok()
        })
        .is_some();
    if !up {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "no Azurite under CI=true (scripts/services.sh starts it)"
        );
        eprintln!("skipped on Azurite: not running");
        return;
    }
    let prefix = format!(
        "tex{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    run(&[
        "--store",
        &format!("azure:UseDevelopmentStorage=true;TablePrefix={prefix}"),
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
