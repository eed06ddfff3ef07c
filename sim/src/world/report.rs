//! What a run found: its trace, its counts, and the invariants it broke.

/// What a run found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub seed: u64,
    /// Every step worth replaying: operations and answers, faults, crashes.
    pub trace: Vec<String>,
    /// Faults injected (store and queue; delays not counted).
    pub faults: u64,
    /// Writes issued.
    pub writes: usize,
    /// What the invariants found wrong.
    pub violations: Vec<String>,
    /// The relays' publishes of outbox entries.
    pub relay_publishes: u64,
    /// Of those, publishes of an entry a relay had published before (after a crash, a
    /// stall past the fence, or a removal that failed).
    pub republished: u64,
}

impl Report {
    /// The last `n` lines of the trace and the violations, for a failing run.
    pub fn summary(&self, n: usize) -> String {
        let skip = self.trace.len().saturating_sub(n);
        let mut text = format!(
            "seed {} ({} writes, {} faults): {} violation(s)\n",
            self.seed,
            self.writes,
            self.faults,
            self.violations.len()
        );
        for v in &self.violations {
            text.push_str(&format!("  VIOLATION {v}\n"));
        }
        text.push_str(&format!("last {} trace lines:\n", self.trace.len() - skip));
        for line in &self.trace[skip..] {
            text.push_str(&format!("  {line}\n"));
        }
        text.push_str(&format!("replay: TABLEKIT_SIM_SEED={} cargo test -p tablekit-sim --test simulation replay -- --nocapture\n", self.seed));
        text
    }
}
