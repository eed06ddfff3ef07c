//! The declarations an entity type can make, one folder per attribute and named after
//! it, as the derive's modules are (`core/derive/src/decl/`): each holds the
//! declaration's stored types (`record`), its steps on the write path (`write`), the
//! worker's application of its operations (`apply`) and its audit (`audit`), and
//! describes itself to the registry (`index/registry`) — its stored types by tag and
//! its roles. The mechanisms they share — the write path, the audit scan, the registry,
//! the table — are the sibling folders of `decl`, and a declaration reaches another
//! only through them.
//!
//! - [`index`]: secondary indexes (`#[index]`): copies of the primary, in its partition
//!   or elsewhere;
//! - [`index_entity`]: id lists of the primaries with a value (`#[index_entity]`);
//! - [`denormalized`]: a property copied from another entity (`denormalized(..)`);
//! - [`unique`]: values no two entities share (`#[unique]`);
//! - [`expiry`]: entities that expire (`ttl`, `expires`), and the sweeper;
//! - `changes`: an event per committed write to a queue (`changes = "queue"`);
//! - `feed`: the change feed, each write's change recorded in its transaction (`#[feed]`);
//! - `blob`: properties kept in the blob store (`#[entity(blob)]`);
//! - [`count`]: the number of entities per value of a key, kept without a scan
//!   (`#[count]`);
//! - [`wide`]: entities stored in chunks (`#[wide]`);
//! - [`series`]: data series (`#[series]`), ordinary writes of a wide or narrow entity.

use tablekit_core::TableStore;

use super::registry::roles::Declaration;

/// Declares each declaration's folder and lists its roles in the write path's order:
/// one line per declaration, `<visibility> <folder>::<path to its roles>`.
macro_rules! declarations {
    ($($vis:vis $folder:ident $(:: $path:ident)+),* $(,)?) => {
        $($vis mod $folder;)*

        /// How many declarations there are.
        const DECLARATIONS: usize = [$(stringify!($folder)),*].len();

        /// Every declaration, in the write path's order (see [`declarations!`]'s list).
        pub(crate) fn declarations<S: TableStore + Clone + 'static>()
        -> [&'static dyn Declaration<S>; DECLARATIONS] {
            [$(&$folder $(:: $path)+),*]
        }
    };
}

// The write path's order: the expiry time first (it adds a target), the blobs before the
// links (a blob field is offloaded before the links are put), unique values reserved
// before a denormalised source is read, copies and id lists before the dependents (which
// take the room the transaction has left), the change event, the feed's change and the blob deletions, then
// a wide primary cut into chunks (every other step sees it whole); data series take no
// step of their own. The read path takes
// them in the reverse order: a wide primary put back together before the blobs restore
// what any chunk offloaded.
declarations! {
    pub expiry::write::Expiry,
    pub(crate) blob::Blobs,
    pub unique::write::Unique,
    pub(crate) index::write::Copies,
    pub index_entity::write::Lists,
    pub denormalized::write::Denormalized,
    pub count::write::Counts,
    pub(crate) changes::Changes,
    pub(crate) feed::Feed,
    pub wide::write::Wide,
    pub(crate) series::Spans,
}
