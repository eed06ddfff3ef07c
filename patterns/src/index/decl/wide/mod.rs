//! Typed wide entities (`#[wide]`, and data series that spill to chunks) on the one
//! write path: a primary with more properties than one entity holds is stored as chunks
//! of its partition — chunk 0 at its RowKey (the primary as the write path knows it, with
//! its index record, version and the list of its chunks), chunk `n` at `<RowKey>~<n:03>`
//! — all written in the write's entity group transaction.
//!
//! - **Write** (`write::Wide`): the last step of a write splits the primary it planned
//!   into chunks, writes only the chunks whose properties changed (a chunk keeps the
//!   version it was last written at, listed in chunk 0), and deletes the chunks the new
//!   value no longer needs; a delete removes every chunk with the tombstone. Chunk 0 is
//!   written by every write under the ETag it was read at, so concurrent writers are
//!   ordered by it; a lost answer is recognised by chunk 0's version as for any primary.
//! - **Read**: chunk rows are hidden from readers; a primary read back gets its chunks
//!   (one range query) and is checked against chunk 0's list, read again when a writer
//!   moved on in between.
//! - **Audit** (`audit`): a chunk row that its chunk 0 does not list at its version is
//!   an orphan (repaired by deleting it).
//!
//! Limits: a primary's chunks fit one transaction (the type's `chunks`, at most 90), and
//! an index on a wide type that copies whole entities is refused for a primary that needs
//! more than one chunk (name the copy's `properties`).
//!
//! The untyped [`WideTable`](crate::wide::WideTable) stores its entities in the same
//! layout, cut (`split`), marked and read back (`read`) by the same functions.

pub(crate) mod audit;
pub(crate) mod read;
pub(crate) mod split;
pub(crate) mod write;

pub use split::{CHUNK_OF_PROPERTY, CHUNK_VERSIONS_PROPERTY, CHUNKS_PROPERTY, chunk_key};

use crate::error::Result;
use crate::index::record::{DeclaredLayout, Elsewhere, LaysOut};

/// How `#[wide]` lays out: chunks of the primary itself, in its own partition, so no
/// target, table or follow-up work of its own. The schema registry does not record it:
/// the untyped paths only delete, and a wide primary's chunk 0 names its chunks.
struct Chunks;

impl LaysOut for Chunks {
    fn check(&self, declared: &DeclaredLayout) -> Result<()> {
        declared.needs::<usize>("chunks").map(drop)
    }

    fn follow_up(&self, _declared: &DeclaredLayout, _at: &Elsewhere<'_>) -> Option<String> {
        None
    }

    fn recorded(&self) -> bool {
        false
    }
}

crate::index::registry::roles::declaration! {
    write::Wide {
        attribute: write::ATTRIBUTE,
        steps: [write, read, upkeep],
        targets: [],
        operations: [],
        lays_out: Chunks,
    }
}
