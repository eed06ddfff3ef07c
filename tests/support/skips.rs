//! How a test that cannot run reports it: one file, included by the support module of
//! every test crate (`#[path]`), so every crate's skips reach `scripts/test.sh` alike.

/// Reports that the running test cannot reach a service it needs (`reason` says which and
/// how to provide it): under `CI=true` a failure, elsewhere a [`skip`].
pub(crate) fn service_missing(reason: &str) {
    assert!(
        std::env::var("CI").map_or(true, |v| v != "true"),
        "{reason}; under CI=true a missing service is a failure"
    );
    skip(reason);
}

/// Reports that the running test returns without testing: printed, and recorded as
/// `<test binary>\t<test name>\t<reason>` in the file `TABLEKIT_SKIP_LOG` names, so that
/// `scripts/test.sh` counts the test as skipped, not passed. The test name is the thread's
/// (libtest runs each test on a thread of its name), so call it from the test's own thread.
pub(crate) fn skip(reason: &str) {
    use std::io::Write;
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("main");
    eprintln!("skipped: {test}: {reason}");
    let Some(log) = std::env::var_os("TABLEKIT_SKIP_LOG") else {
        return;
    };
    let binary = std::env::current_exe()
        .ok()
        .and_then(|path| path.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    // One append of one short line: the lines of tests running at once do not mix.
    let line = format!("{binary}\t{test}\t{}\n", reason.replace(['\t', '\n'], " "));
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .and_then(|mut file| file.write_all(line.as_bytes()));
    if let Err(e) = written {
        panic!("cannot record the skip in {}: {e}", log.to_string_lossy());
    }
}
