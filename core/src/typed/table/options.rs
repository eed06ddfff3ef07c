//! [`TableOptions`]: the settings of a [`Table`], given in any order.

use std::marker::PhantomData;

use crate::clock::SharedClock;
use crate::store::TableStore;

use super::super::Record;
use super::Table;

/// The settings of a [`Table`], given in any order, then built on a store with
/// [`build`](Self::build) (no I/O: [`Table::create`] makes the table). Each setter given
/// twice keeps the last value.
///
/// ```
/// use tablekit_core::MemoryStore;
/// use tablekit_core::typed::{Record, Table};
///
/// /// The archive of `R`: its values in the table `Archive`.
/// fn archive<R: Record>(store: MemoryStore) -> Table<R, MemoryStore> {
///     Table::options().name("Archive").build(store)
/// }
/// ```
pub struct TableOptions<R, S> {
    name: Option<String>,
    clock: Option<SharedClock>,
    kind_filter: bool,
    write_back: bool,
    table: PhantomData<fn() -> (R, S)>,
}

impl<R, S> std::fmt::Debug for TableOptions<R, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableOptions")
            .field("name", &self.name)
            .field("clock", &self.clock.is_some())
            .field("kind_filter", &self.kind_filter)
            .field("write_back", &self.write_back)
            .finish()
    }
}

impl<R, S> Default for TableOptions<R, S> {
    fn default() -> Self {
        TableOptions {
            name: None,
            clock: None,
            kind_filter: true,
            write_back: false,
            table: PhantomData,
        }
    }
}

impl<R: Record, S: TableStore> TableOptions<R, S> {
    /// The defaults: the table `R` declares, the wall clock, queries filtered to `R`'s
    /// kind, no write-back of upgraded entities.
    pub fn new() -> Self {
        Self::default()
    }

    /// Another table than `R` declares (one table per tenant or per period).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Reads decide with `clock` whether an entity has expired (the wall clock by
    /// default).
    pub fn clock(mut self, clock: SharedClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Queries return every entity, not only those recording `R`'s kind.
    pub fn without_kind_filter(mut self) -> Self {
        self.kind_filter = false;
        self
    }

    /// Point reads write an entity upgraded from an older version back, under its ETag
    /// (lazy migration); a concurrent change wins and the write-back is dropped.
    pub fn write_back_upgrades(mut self, enabled: bool) -> Self {
        self.write_back = enabled;
        self
    }

    /// The table on `store`, without I/O ([`Table::create`] creates it).
    pub fn build(self, store: S) -> Table<R, S> {
        Table {
            store,
            name: self.name.unwrap_or_else(|| R::TABLE.to_owned()),
            clock: self.clock.unwrap_or_else(crate::clock::system),
            kind_filter: self.kind_filter,
            write_back: self.write_back,
            record: PhantomData,
        }
    }
}
