//! The store under the simulated world's faults. Over SQLite every call runs on a
//! blocking task, so tokio's paused clock stands still while the call waits for the
//! store's thread (a blocking task holds off the clock's automatic advance): the clock
//! moves with the simulation only, as over the memory store. Awaited directly, a call
//! let the paused clock jump to the next timer — minutes at a time — so a write, a
//! delivery or a relay's pass outlived its leases at random, which no real store does.

use tablekit_core::clock::SharedClock;
use tablekit_core::{
    AnyStore, Batch, ETag, Entity, Error, KeyOrder, Page, Query, Result, TableStore, WriteOp,
};
use tablekit_patterns::feed::FEED_TABLE;

/// The world's store: the memory store as it is, SQLite through blocking tasks (under
/// the world's clock: the store stamps each write's Timestamp with it).
/// What the store applied to the feed's table is noted in the third field.
#[derive(Clone)]
pub(crate) struct Backing(
    pub(crate) AnyStore,
    pub(crate) SharedClock,
    pub(crate) std::sync::Arc<std::sync::Mutex<super::feed::Observed>>,
);

impl std::fmt::Debug for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Backing").field(&self.0).finish()
    }
}

/// Runs a call of the store on a blocking task under `clock` (see the module docs).
async fn blocking<T: Send + 'static>(
    clock: SharedClock,
    call: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(move || {
        let _clock = tablekit_core::clock::simulate(clock);
        call()
    })
    .await
    .unwrap_or_else(|e| {
        Err(Error::Transient {
            message: format!("the store's call stopped: {e}"),
        })
    })
}

impl Backing {
    fn direct(&self) -> bool {
        !matches!(self.0, AnyStore::Sqlite(_))
    }
}

impl TableStore for Backing {
    async fn create_table(&self, table: &str) -> Result<()> {
        if self.direct() {
            return self.0.create_table(table).await;
        }
        let (store, table) = (self.0.clone(), table.to_owned());
        blocking(self.1.clone(), move || {
            futures::executor::block_on(store.create_table(&table))
        })
        .await
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        if self.direct() {
            return self.0.delete_table(table).await;
        }
        let (store, table) = (self.0.clone(), table.to_owned());
        blocking(self.1.clone(), move || {
            futures::executor::block_on(store.delete_table(&table))
        })
        .await
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
        if self.direct() {
            return self.0.list_tables(prefix).await;
        }
        let (store, prefix) = (self.0.clone(), prefix.to_owned());
        blocking(self.1.clone(), move || {
            futures::executor::block_on(store.list_tables(&prefix))
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
        if self.direct() {
            return self.0.get(table, partition_key, row_key, select).await;
        }
        let store = self.0.clone();
        let (table, partition_key, row_key) = (
            table.to_owned(),
            partition_key.to_owned(),
            row_key.to_owned(),
        );
        let select: Option<Vec<String>> =
            select.map(|s| s.iter().map(|p| (*p).to_owned()).collect());
        blocking(self.1.clone(), move || {
            let select: Option<Vec<&str>> = select
                .as_ref()
                .map(|s| s.iter().map(String::as_str).collect());
            futures::executor::block_on(store.get(
                &table,
                &partition_key,
                &row_key,
                select.as_deref(),
            ))
        })
        .await
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        if self.direct() {
            return self.0.query(table, query).await;
        }
        let (store, table, query) = (self.0.clone(), table.to_owned(), query.clone());
        blocking(self.1.clone(), move || {
            futures::executor::block_on(store.query(&table, &query))
        })
        .await
    }

    // The feed's writes are noted where they are applied (on the blocking thread for a
    // SQLite file): a crash that drops the caller's future after the store applied one
    // must not hide it from the record.
    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        let seen = (table == FEED_TABLE).then(|| vec![op.clone()]);
        self.execute_here(table, op, seen).await
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        let seen = (table == FEED_TABLE).then(|| batch.operations().to_vec());
        self.submit_batch_here(table, batch, seen).await
    }

    fn key_order(&self) -> KeyOrder {
        self.0.key_order()
    }

    fn preserves_negative_zero(&self) -> bool {
        self.0.preserves_negative_zero()
    }
}

type Observer = std::sync::Arc<std::sync::Mutex<super::feed::Observed>>;

/// Notes `seen` (the feed's writes of a call) once the store applied them, and hands the
/// answer on.
fn noted<T>(observer: &Observer, seen: Option<Vec<WriteOp>>, answer: Result<T>) -> Result<T> {
    if let (Ok(_), Some(ops)) = (&answer, seen) {
        let mut observed = observer.lock().unwrap_or_else(|e| e.into_inner());
        for op in &ops {
            observed.applied(op);
        }
    }
    answer
}

impl Backing {
    async fn execute_here(
        &self,
        table: &str,
        op: WriteOp,
        seen: Option<Vec<WriteOp>>,
    ) -> Result<Option<ETag>> {
        let observer = self.2.clone();
        if self.direct() {
            return noted(&observer, seen, self.0.execute(table, op).await);
        }
        let (store, table) = (self.0.clone(), table.to_owned());
        blocking(self.1.clone(), move || {
            noted(
                &observer,
                seen,
                futures::executor::block_on(store.execute(&table, op)),
            )
        })
        .await
    }

    async fn submit_batch_here(
        &self,
        table: &str,
        batch: Batch,
        seen: Option<Vec<WriteOp>>,
    ) -> Result<Vec<Option<ETag>>> {
        let observer = self.2.clone();
        if self.direct() {
            return noted(&observer, seen, self.0.submit_batch(table, batch).await);
        }
        let (store, table) = (self.0.clone(), table.to_owned());
        blocking(self.1.clone(), move || {
            noted(
                &observer,
                seen,
                futures::executor::block_on(store.submit_batch(&table, batch)),
            )
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    /// A blocking task reads the paused clock of its runtime, and holds it still.
    #[test]
    fn a_blocking_task_sees_the_paused_clock_and_holds_it() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("runtime");
        runtime.block_on(async {
            tokio::time::advance(std::time::Duration::from_secs(3600)).await;
            let outside = tokio::time::Instant::now();
            let inside = tokio::task::spawn_blocking(move || {
                std::thread::sleep(std::time::Duration::from_millis(50));
                tokio::time::Instant::now()
            });
            // A timer due meanwhile: the paused clock would jump to it if nothing held
            // it.
            let timer = tokio::time::sleep(std::time::Duration::from_secs(600));
            tokio::pin!(timer);
            let inside = tokio::select! {
                biased;
                inside = inside => inside.expect("blocking task"),
                () = &mut timer => panic!("the clock jumped while the blocking task ran"),
            };
            assert!(inside.duration_since(outside) < std::time::Duration::from_secs(1));
        });
    }
}
