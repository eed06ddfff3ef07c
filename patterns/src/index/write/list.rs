//! The registered declarations, in the order the write path calls them. Adding a
//! declaration: its module implements [`Declaration`], and one line here names it.

use tablekit_core::TableStore;

use super::super::{blobs, changes, copies, expiry, links, members, unique};
use super::declaration::Declaration;

/// Every declaration, in order: the expiry time first (it adds a target), the blobs
/// before the links (a blob field is offloaded before the links are put), unique values
/// reserved before a denormalised source is read, copies and id lists before the
/// dependents (which take the room the transaction has left), the change event and the
/// blob deletions last.
pub(crate) fn declarations<S: TableStore + Clone + 'static>() -> [&'static dyn Declaration<S>; 7] {
    [
        &expiry::write::Expiry,
        &blobs::Blobs,
        &unique::write::Unique,
        &copies::write::Copies,
        &members::write::Lists,
        &links::write::Denormalized,
        &changes::Changes,
    ]
}
