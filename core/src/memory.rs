//! An in-memory store with the table service's semantics, for unit tests and examples.
//! Nothing survives the process; applications run on [`SqliteStore`](crate::SqliteStore)
//! or a service backend.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::apply::{self, Change};
use crate::error::{Error, Result};
use crate::model::{ETag, Entity};
use crate::observe;
use crate::query::{Page, PageCollector, Query};
use crate::store::{Batch, Observed, TableStore, WriteOp};

type Rows = BTreeMap<(String, String), Entity>;

#[derive(Debug, Default)]
struct MemoryTable {
    name: String,
    rows: Rows,
}

/// The in-memory store. Cloning it shares the same tables.
#[derive(Clone, Debug, Default)]
pub struct MemoryStore {
    tables: Arc<RwLock<BTreeMap<String, MemoryTable>>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    fn read(&self) -> RwLockReadGuard<'_, BTreeMap<String, MemoryTable>> {
        // A panic while holding the lock cannot leave a half-applied write: every write
        // computes its changes first and applies them without failing.
        self.tables.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, BTreeMap<String, MemoryTable>> {
        self.tables.write().unwrap_or_else(|e| e.into_inner())
    }

    fn apply_all(
        &self,
        table: &str,
        ops: Vec<WriteOp>,
        in_batch: bool,
    ) -> Result<Vec<Option<ETag>>> {
        let mut tables = self.write();
        let rows = &mut tables
            .get_mut(&table.to_ascii_lowercase())
            .ok_or_else(|| Error::table_not_found(table))?
            .rows;
        let mut staged: Vec<((String, String), Option<Entity>)> = Vec::with_capacity(ops.len());
        for (index, op) in ops.into_iter().enumerate() {
            let key = (op.key().0.to_owned(), op.key().1.to_owned());
            let change = apply::plan(table, op, rows.get(&key))
                .map_err(|e| if in_batch { e.in_batch(index) } else { e })?;
            staged.push((
                key,
                match change {
                    Change::Put(mut e) => {
                        apply::stamp(&mut e);
                        Some(e)
                    }
                    Change::Remove => None,
                },
            ));
        }
        let mut etags = Vec::with_capacity(staged.len());
        for (key, entity) in staged {
            match entity {
                Some(e) => {
                    etags.push(e.etag.clone());
                    rows.insert(key, e);
                }
                None => {
                    etags.push(None);
                    rows.remove(&key);
                }
            }
        }
        Ok(etags)
    }
}

/// This store's calls, observed and checked.
const OBSERVED: Observed = Observed::new(observe::system::MEMORY);

impl TableStore for MemoryStore {
    async fn create_table(&self, table: &str) -> Result<()> {
        OBSERVED
            .create_table(table, || async move {
                let mut tables = self.write();
                let key = table.to_ascii_lowercase();
                if tables.contains_key(&key) {
                    return Err(Error::TableAlreadyExists {
                        table: table.to_owned(),
                    });
                }
                tables.insert(
                    key,
                    MemoryTable {
                        name: table.to_owned(),
                        rows: Rows::new(),
                    },
                );
                Ok(())
            })
            .await
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        OBSERVED
            .delete_table(table, || async move {
                match self.write().remove(&table.to_ascii_lowercase()) {
                    Some(_) => Ok(()),
                    None => Err(Error::table_not_found(table)),
                }
            })
            .await
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
        OBSERVED
            .list_tables(prefix, || async move {
                let mut names: Vec<String> = self
                    .read()
                    .values()
                    .filter(|t| t.name.starts_with(prefix))
                    .map(|t| t.name.clone())
                    .collect();
                names.sort();
                Ok(names)
            })
            .await
    }

    async fn get(
        &self,
        table: &str,
        partition_key: &str,
        row_key: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        OBSERVED
            .get(table, partition_key, row_key, select, || async move {
                let tables = self.read();
                let rows = &tables
                    .get(&table.to_ascii_lowercase())
                    .ok_or_else(|| Error::table_not_found(table))?
                    .rows;
                Ok(rows
                    .get(&(partition_key.to_owned(), row_key.to_owned()))
                    .map(|e| {
                        let mut e = e.clone();
                        if let Some(select) = select {
                            e.project(select);
                        }
                        e
                    }))
            })
            .await
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        OBSERVED
            .query(table, query, || async move {
                let range = query.key_range();
                let mut start = match range.partition() {
                    Some(pk) => match &range.rk_start {
                        Bound::Included(rk) => Bound::Included((pk.to_owned(), rk.clone())),
                        Bound::Excluded(rk) => Bound::Excluded((pk.to_owned(), rk.clone())),
                        Bound::Unbounded => Bound::Included((pk.to_owned(), String::new())),
                    },
                    None => match &range.pk_start {
                        Bound::Included(pk) | Bound::Excluded(pk) => {
                            Bound::Included((pk.clone(), String::new()))
                        }
                        Bound::Unbounded => Bound::Unbounded,
                    },
                };
                if let Some(token) = &query.continuation {
                    let resume = (
                        token.next_partition_key().to_owned(),
                        token.next_row_key().to_owned(),
                    );
                    let later = match &start {
                        Bound::Unbounded => true,
                        Bound::Included(s) => resume >= *s,
                        Bound::Excluded(s) => resume > *s,
                    };
                    if later {
                        start = Bound::Included(resume);
                    }
                }
                let tables = self.read();
                let rows = &tables
                    .get(&table.to_ascii_lowercase())
                    .ok_or_else(|| Error::table_not_found(table))?
                    .rows;
                let mut collector = PageCollector::new(query);
                for ((pk, rk), entity) in rows.range((start, Bound::Unbounded)) {
                    if range.is_past_end(pk, rk) {
                        break;
                    }
                    if !range.contains(pk, rk) {
                        continue;
                    }
                    if collector.offer(entity.clone()).is_break() {
                        break;
                    }
                }
                Ok(collector.finish())
            })
            .await
    }

    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        OBSERVED
            .execute(table, op, |op| async move {
                let mut etags = self.apply_all(table, vec![op], false)?;
                Ok(etags.pop().flatten())
            })
            .await
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        OBSERVED
            .submit_batch(table, batch, |batch| async move {
                self.apply_all(table, batch.into_operations(), true)
            })
            .await
    }
}
