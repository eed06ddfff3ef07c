//! Writes the stored fixture (see `tablekit_sim::fixture`) into a folder, by default
//! `sim/tests/fixtures/stored`. It was run once, before the write path changed; running
//! it again makes the fixture follow the code, which defeats it.
//!
//! ```sh
//! cargo run -p tablekit-sim --bin tablekit-stored-fixture -- [DIR]
//! ```

use std::io::Write;

fn main() {
    let dir = std::env::args_os()
        .nth(1)
        .map_or_else(tablekit_sim::fixture::fixture_dir, std::path::PathBuf::from);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(tablekit_sim::fixture::write(&dir));
    let _ = writeln!(std::io::stdout(), "wrote {}", dir.display());
}
