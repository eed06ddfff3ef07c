//! `#[derive(Entity)]` for tablekit: entity types, key templates and index declarations.
//!
//! The derive is delivered with its own issue; this crate holds its place in the workspace
//! so that the dependency direction (derive → core ← patterns ← workers ← facade) is fixed
//! from the start.
