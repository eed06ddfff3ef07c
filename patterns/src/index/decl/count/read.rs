//! Reading a count: `orders.count(Order::BY_STATUS).key("placed").get()` sums the
//! counters of the value's shards (one point read each, all at once) and says whether
//! the count is exact: every committed write's work for it applied, none waiting in an
//! outbox or a queue.

use std::marker::PhantomData;

use tablekit_core::typed::handle::{End, Row};
use tablekit_core::typed::{Declared, EntityType, KeyArg, KeyPart};
use tablekit_core::{Query, TableStore, filter};

use super::apply::count_of;
use super::record::SyncCount;
use super::{ATTRIBUTE, COUNTER_ROW_KEY, count_table, shard_partition, shards};
use crate::consistency::outbox::{partition_query, read_entry};
use crate::consistency::{OutboxSink, Unapplied};
use crate::consistency::pending::{PENDING_TABLE, next_or_end};
use crate::error::{Error, Result};
use crate::index::IndexedTable;
use crate::index::operation::IndexOperations;
use crate::index::record::{DeclaredLayout, EntityRef};
use crate::index::stored::get_or_none;

/// A count read: the number of entities with the value, and whether it is exact.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Count {
    /// The number of entities the count holds for the value.
    pub value: i64,
    /// Whether the count is exact: every committed write's work for it is applied. No
    /// outbox entry holds work for it (the writers' and the relay's backlog), and the
    /// sink the table hands its work to holds nothing unapplied (an inline sink never
    /// does; a queue's messages are counted, any of which may hold work for it). `false`
    /// says the value may be behind, and [`pending`](Self::pending) by how much and
    /// where; a sink that cannot tell (a table whose relay runs in another process: give
    /// its sink with [`Counting::handed_to`]) never reads exact.
    pub exact: bool,
    /// What is not applied yet, and where.
    pub pending: Pending,
}

/// The work a count read found not yet applied ([`Count::pending`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pending {
    /// Outbox entries holding work for this count, not yet handed on.
    pub outbox_entries: u64,
    /// What the sink was handed and has not applied.
    pub handed: Unapplied,
}

impl std::fmt::Display for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} outbox entr{} with work for it; {}",
            self.outbox_entries,
            if self.outbox_entries == 1 { "y" } else { "ies" },
            self.handed
        )
    }
}

/// A count read being built: the values of its key fields, in order.
pub struct Counting<'a, E, S, K> {
    table: &'a IndexedTable<E, S>,
    count: &'static str,
    given: Vec<Box<dyn KeyPart + Send + 'a>>,
    handed_to: Option<&'a dyn OutboxSink>,
    state: PhantomData<fn() -> K>,
}

impl<E, S, K> std::fmt::Debug for Counting<'_, E, S, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counting")
            .field("count", &self.count)
            .field("given", &self.given.len())
            .finish()
    }
}

impl<E, S> IndexedTable<E, S> {
    /// A read of the count `count` (`#[count]`): give its key fields with
    /// [`key`](Counting::key), then [`get`](Counting::get).
    pub fn count<K>(&self, count: Declared<E, K>) -> Counting<'_, E, S, K> {
        Counting {
            table: self,
            count: count.name(),
            given: Vec::new(),
            handed_to: None,
            state: PhantomData,
        }
    }
}

impl<'a, E, S, T: KeyPart + Send + 'a, Rest> Counting<'a, E, S, Row<T, Rest>> {
    /// The value of the next field of the count's key template.
    pub fn key(mut self, value: impl KeyArg<T>) -> Counting<'a, E, S, Rest> {
        self.given.push(Box::new(value.into_key()));
        Counting {
            table: self.table,
            count: self.count,
            given: self.given,
            handed_to: self.handed_to,
            state: PhantomData,
        }
    }
}

impl<'a, E, S, K> Counting<'a, E, S, K> {
    /// The sink the table's work is handed to, when it is not the table's own (a table
    /// whose outbox a relay of another process drains, into this queue): the read asks
    /// it what it holds unapplied.
    pub fn handed_to(mut self, sink: &'a dyn OutboxSink) -> Self {
        self.handed_to = Some(sink);
        self
    }
}

impl<E: EntityType, S: TableStore + Clone + 'static> Counting<'_, E, S, End> {
    /// The count of the value given, summed over its shards, and whether it is exact
    /// (and if not, what is pending): the outbox entries of the partitions with pending
    /// work (what is pending, never the table), one question to the sink, then the
    /// counters' point reads at once.
    ///
    /// # Errors
    /// [`Error::Undeclared`] for a count the type does not declare; the key's errors;
    /// the store's errors.
    pub async fn get(self) -> Result<Count> {
        let layout = self.table.layout();
        let declared = layout
            .declared
            .iter()
            .find(|d| d.attribute == ATTRIBUTE && d.name == self.count)
            .ok_or_else(|| Error::Undeclared {
                type_name: E::schema().type_name,
                what: "count",
                name: self.count.to_owned(),
            })?;
        let key = declared.key.as_ref().ok_or_else(|| {
            Error::malformed(format!("count `{}`", self.count), "no key template")
        })?;
        let parts: Vec<&dyn KeyPart> = self.given.iter().map(|p| p.as_ref() as _).collect();
        let value = key
            .render_args(&parts)
            .map_err(tablekit_core::Error::from)?;
        tablekit_core::limits::check_key(tablekit_core::limits::KeyKind::PartitionKey, &value)
            .map_err(tablekit_core::Error::from)?;
        let store = self.table.store();
        let table = count_table(declared, &layout.table);
        let partitions: Vec<String> = (0..shards(declared)?)
            .map(|shard| shard_partition(&declared.name, &value, shard))
            .collect();
        // What is pending first, the outbox before the sink (a write's work is handed to
        // the sink before its entry goes, so none slips between the two reads), then the
        // counters: when nothing was pending, every write committed before these reads
        // has its work applied, and the counters read after them hold it. (Read the other
        // way round, work applied between the counters' read and the sink's would leave
        // the count behind while it read exact.)
        let outbox_entries =
            outbox_entries(store, &layout.table, declared, &table, &partitions).await?;
        let handed = match self
            .handed_to
            .or_else(|| self.table.engine().sink().map(|sink| sink.as_ref()))
        {
            Some(sink) => sink.unapplied().await?,
            None => Unapplied::Unknown,
        };
        let reads = partitions.iter().map(|partition| {
            let at = EntityRef::new(&table, partition, COUNTER_ROW_KEY);
            async move { get_or_none(store, &at).await }
        });
        let counters = futures::future::try_join_all(reads).await?;
        let value = counters.iter().flatten().map(count_of).sum();
        let exact = outbox_entries == 0 && handed.is_nothing();
        Ok(Count {
            value,
            exact,
            pending: Pending {
                outbox_entries,
                handed,
            },
        })
    }
}

/// How many outbox entries of the primaries' table hold count work for one of
/// `partitions`: the pending markers name the partitions with outbox entries (what is
/// pending, never the table), and each of those partitions' outbox is read with one
/// range query. Both are streamed page by page, so memory stays bounded however much
/// work is pending.
async fn outbox_entries<S: TableStore>(
    store: &S,
    primaries: &str,
    declared: &DeclaredLayout,
    table: &str,
    partitions: &[String],
) -> Result<u64> {
    let mut found = 0;
    let markers = Query::with_filter(filter::partition_key().eq(primaries));
    let mut markers = std::pin::pin!(store.query_stream(PENDING_TABLE, markers));
    while let Some(marker) = next_or_end(&mut markers).await? {
        let entries = store.query_stream(primaries, partition_query(&marker.row_key));
        let mut entries = std::pin::pin!(entries);
        while let Some(entry) = next_or_end(&mut entries).await? {
            if holds_count_work(&entry, declared, table, partitions) {
                found += 1;
            }
        }
    }
    Ok(found)
}

/// Whether the outbox entry `entry` holds count work of `declared` for one of
/// `partitions` of `table`.
fn holds_count_work(
    entry: &tablekit_core::Entity,
    declared: &DeclaredLayout,
    table: &str,
    partitions: &[String],
) -> bool {
    let Ok(envelope) = read_entry(entry) else {
        return false;
    };
    let Ok(work) = serde_json::from_value::<IndexOperations>(envelope.payload) else {
        return false;
    };
    work.operations.iter().any(|op| {
        op.get::<SyncCount>().is_some_and(|sync| {
            sync.count == declared.name
                && sync.at.table == table
                && partitions.contains(&sync.at.partition_key)
        })
    })
}

impl From<Count> for i64 {
    fn from(count: Count) -> Self {
        count.value
    }
}
