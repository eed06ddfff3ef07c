//! What the workers' tests share: reaching RabbitMQ, unique names.

#![allow(dead_code)]

use std::net::TcpStream;
use std::time::Duration;

/// The broker to test against: `AMQP_URL`, else the local RabbitMQ if its port answers.
/// Without one the test is skipped with a message — except under `CI=true`, where a
/// missing broker fails the test.
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
    let message =
        "no RabbitMQ: set AMQP_URL or start the local broker (scripts/services.sh starts it)";
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{message}; under CI=true a missing broker is a failure");
    }
    eprintln!("skipped: {message}");
    None
}

/// A name no other test (or earlier run) uses.
pub(crate) fn unique(prefix: &str) -> String {
    format!("tk-test-{prefix}-{}", uuid::Uuid::new_v4().simple())
}
