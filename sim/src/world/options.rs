//! How a simulation runs: where the world keeps its tables, how many writers it has and
//! how much each writes.

/// Where the simulated world keeps its tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// The memory store: the run replays exactly.
    Memory,
    /// A SQLite file at this path (a soak: its threads make the run not replay exactly).
    Sqlite(std::path::PathBuf),
}

/// How a simulation runs.
#[derive(Clone, Debug)]
pub struct Options {
    pub seed: u64,
    pub store: StoreKind,
    /// Writer processes.
    pub writers: usize,
    /// Operations each writer issues.
    pub ops_per_writer: usize,
}

impl Options {
    /// The standard world for `seed`.
    pub fn new(seed: u64) -> Self {
        Options {
            seed,
            store: StoreKind::Memory,
            writers: 4,
            ops_per_writer: 30,
        }
    }
}
