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
//! - `blob`: properties kept in the blob store (`#[entity(blob)]`);
//! - [`count`]: the number of entities per value of a key, kept without a scan
//!   (`#[count]`);
//! - [`wide`]: entities stored in chunks (`#[wide]`);
//! - [`series`]: data series (`#[series]`), ordinary writes of a wide or narrow entity.

pub(crate) mod blob;
pub(crate) mod changes;
pub mod count;
pub mod denormalized;
pub mod expiry;
pub mod index;
pub mod index_entity;
pub mod series;
pub mod unique;
pub mod wide;
