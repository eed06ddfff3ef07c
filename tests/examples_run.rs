//! Every pattern example in `examples/` runs to success (cargo builds the examples
//! before it runs the tests).

#![allow(missing_docs)]

use std::path::PathBuf;
use std::process::Command;

const EXAMPLES: &[&str] = &[
    "secondary_indexes",
    "log_tail",
    "hash_buckets",
    "compound_keys",
    "data_series",
    "wide_entities",
    "large_entities",
    "high_volume_delete",
    "hot_cold",
    "log_blobs",
    "bulk_import",
    "custom_operation",
    "declarations",
    "change_feed",
];

fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary");
    // target/<profile>/deps/<test> → target/<profile>/examples/<name>
    let profile = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    profile.join("examples").join(name)
}

#[test]
fn every_pattern_example_runs() {
    for name in EXAMPLES {
        let path = example(name);
        assert!(path.exists(), "{} was not built", path.display());
        let output = Command::new(&path).output().expect("runs");
        assert!(
            output.status.success(),
            "{name}: {:?}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(!output.stdout.is_empty(), "{name} printed nothing");
    }
}
