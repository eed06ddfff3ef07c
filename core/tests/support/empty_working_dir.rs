//! One empty temporary directory, made the process's working directory for every test of
//! a binary that includes this file, and the check that a refused call left it empty.

use std::path::Path;
use std::sync::OnceLock;

/// The empty directory every test of the binary runs in.
pub(crate) fn working_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        std::env::set_current_dir(dir.path()).unwrap();
        dir
    })
    .path()
}

/// Panics when anything was created in the working directory (`what` names the call).
pub(crate) fn assert_nothing_created(what: &str) {
    let created: Vec<_> = std::fs::read_dir(working_dir()).unwrap().collect();
    assert!(created.is_empty(), "{what} created {created:?}");
}
