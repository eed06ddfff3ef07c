//! [`TableStore`] over the Table service: each call checked against the core's limits
//! (by [`Observed`], as every backend's) and the access signature's scope, then sent.

use reqwest::Method;

use super::table::AzureTableStore;
use super::writes::{GUARD_RETRIES, is_race};
use crate::error::{Error, Result};
use crate::model::{ETag, Entity};
use crate::observe;
use crate::query::{Page, Query};
use crate::store::{Batch, Observed, TableStore, WriteOp};

/// This store's calls, observed and checked (the access signature's scope is checked
/// after them, in each call's own work).
const OBSERVED: Observed = Observed::new(observe::system::AZURE_TABLE);

impl TableStore for AzureTableStore {
    fn key_order(&self) -> crate::store::KeyOrder {
        crate::store::KeyOrder::Utf16
    }

    fn preserves_negative_zero(&self) -> bool {
        !self.emulator
    }

    /// Creates a table; while the service is still deleting a table of that name, waits
    /// and retries for up to the store's
    /// [being-deleted wait](super::AzureTableStoreOptions::being_deleted_wait).
    async fn create_table(&self, table: &str) -> Result<()> {
        OBSERVED
            .create_table(table, || async move {
                let name = self.service_table(table)?;
                if let Some(scope) = &self.scope {
                    scope.check_table_operation(table, "creating a table")?;
                }
                if self.emulator && self.respell(table).await?.is_some() {
                    return Err(Error::TableAlreadyExists {
                        table: table.to_owned(),
                    });
                }
                let body = serde_json::json!({ "TableName": name }).to_string();
                self.client
                    .wait_while_being_deleted(
                        self.being_deleted_wait,
                        || async {
                            let response = self
                                .send(
                                    Method::POST,
                                    &format!("{}/Tables", self.config.endpoint),
                                    &[],
                                    &[("Prefer", "return-no-content".into())],
                                    Some(("application/json".into(), body.clone())),
                                )
                                .await?;
                            if response.status().is_success() {
                                Ok(())
                            } else {
                                Err(Self::error(response, table, None).await)
                            }
                        },
                        |error| matches!(error, Error::TableBeingDeleted { .. }),
                    )
                    .await
            })
            .await
    }

    async fn delete_table(&self, table: &str) -> Result<()> {
        OBSERVED
            .delete_table(table, || async move {
                if let Some(scope) = &self.scope {
                    self.service_table(table)?;
                    scope.check_table_operation(table, "deleting a table")?;
                }
                self.on_table(table, |name| async move {
                    let response = self
                        .send(
                            Method::DELETE,
                            &format!("{}/Tables('{name}')", self.config.endpoint),
                            &[],
                            &[],
                            None,
                        )
                        .await?;
                    if response.status().is_success() {
                        if let Ok(mut spellings) = self.spellings.lock() {
                            spellings.remove(&name.to_ascii_lowercase());
                        }
                        Ok(())
                    } else {
                        match Self::error(response, table, None).await {
                            Error::NotFound { .. } => Err(Error::table_not_found(table)),
                            other => Err(other),
                        }
                    }
                })
                .await
            })
            .await
    }

    async fn list_tables(&self, prefix: &str) -> Result<Vec<String>> {
        OBSERVED
            .list_tables(prefix, || async move {
                if let Some(scope) = &self.scope {
                    scope.check_table_operation("", "listing tables")?;
                }
                let mut names: Vec<String> = self
                    .service_tables()
                    .await?
                    .into_iter()
                    .filter_map(|name| {
                        let stripped = name.get(self.table_prefix.len()..)?.to_owned();
                        stripped.starts_with(prefix).then_some(stripped)
                    })
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
                if let Some(scope) = &self.scope {
                    scope.check_entity(
                        table,
                        &self.prefixed(table),
                        "r",
                        "reading",
                        (partition_key, row_key),
                    )?;
                }
                self.on_table(table, |name| async move {
                    self.get_raw(&name, table, partition_key, row_key, select)
                        .await
                })
                .await
            })
            .await
    }

    async fn query(&self, table: &str, query: &Query) -> Result<Page> {
        OBSERVED
            .query(table, query, || async move {
                let narrowed = match &self.scope {
                    Some(scope) => scope.check_query(table, &self.prefixed(table), query)?,
                    None => None,
                };
                let narrowed = narrowed.as_ref();
                self.on_table(table, |name| async move {
                    self.query_raw(&name, table, query, narrowed).await
                })
                .await
            })
            .await
    }

    async fn execute(&self, table: &str, op: WriteOp) -> Result<Option<ETag>> {
        OBSERVED
            .execute(table, op, |op| async move {
                if let Some(scope) = &self.scope {
                    scope.check_write(table, &self.prefixed(table), &op)?;
                }
                self.on_table(table, |name| {
                    let op = op.clone();
                    async move {
                        let mut tries = 0;
                        loop {
                            let (send, guarded) = self.guard(&name, table, op.clone()).await?;
                            match self.execute_raw(&name, table, &send).await {
                                Err(e) if guarded && is_race(&e) && tries < GUARD_RETRIES => {
                                    tries += 1
                                }
                                other => return other,
                            }
                        }
                    }
                })
                .await
            })
            .await
    }

    async fn submit_batch(&self, table: &str, batch: Batch) -> Result<Vec<Option<ETag>>> {
        OBSERVED
            .submit_batch(table, batch, |batch| async move {
                if let Some(scope) = &self.scope {
                    for (index, op) in batch.operations().iter().enumerate() {
                        scope
                            .check_write(table, &self.prefixed(table), op)
                            .map_err(|e| e.in_batch(index))?;
                    }
                }
                let ops = batch.into_operations();
                self.on_table(table, |name| {
                    let ops = ops.clone();
                    async move {
                        let mut tries = 0;
                        loop {
                            let mut sent = Vec::with_capacity(ops.len());
                            let mut guarded = Vec::with_capacity(ops.len());
                            for (index, op) in ops.iter().enumerate() {
                                let (op, g) = self.guard(&name, table, op.clone()).await.map_err(
                                    |e| match e {
                                        Error::TableNotFound { .. } => e,
                                        other => other.in_batch(index),
                                    },
                                )?;
                                sent.push(op);
                                guarded.push(g);
                            }
                            match self.batch_raw(&name, table, &sent).await {
                                Err(e)
                                    if tries < GUARD_RETRIES
                                        && e.batch_index()
                                            .is_some_and(|i| guarded.get(i) == Some(&true))
                                        && matches!(&e, Error::Batch { source, .. } if is_race(source)) =>
                                {
                                    tries += 1;
                                }
                                other => return other,
                            }
                        }
                    }
                })
                .await
            })
            .await
    }
}
