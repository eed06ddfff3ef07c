//! Writes to the Table service: single operations, entity group transactions
//! (`$batch`, the failing operation's index read back), and the emulator's merge guard.

use reqwest::Method;

use super::batch;
use super::errors::{error_parts, service_error};
use super::table::{AzureTableStore, transient};
use crate::error::{Error, Result};
use crate::model::ETag;
use crate::store::WriteOp;

impl AzureTableStore {
    pub(super) async fn execute_raw(
        &self,
        name: &str,
        table: &str,
        op: &WriteOp,
    ) -> Result<Option<ETag>> {
        let (pk, rk) = op.key();
        let request = batch::sub_request(op, &self.table_url(name), &self.entity_url(name, pk, rk));
        let method = Method::from_bytes(request.method.as_bytes()).map_err(|e| Error::Backend {
            message: e.to_string(),
        })?;
        let mut headers = Vec::new();
        if let Some(if_match) = request.if_match {
            headers.push(("If-Match", if_match));
        }
        if request.method == "POST" {
            headers.push(("Prefer", "return-no-content".to_owned()));
        }
        let response = self
            .send(
                method,
                &request.url,
                &[],
                &headers,
                request.body.map(|b| ("application/json".to_owned(), b)),
            )
            .await?;
        if response.status().is_success() {
            Ok(Self::etag(&response))
        } else {
            Err(Self::error(response, table, Some((pk, rk))).await)
        }
    }

    /// Emulator only: a merge is checked against the stored entity first (the emulator
    /// does not refuse a merged entity over the limits), then sent conditional on the
    /// version read. Returns the op to send and whether it was made conditional here.
    pub(super) async fn guard(
        &self,
        name: &str,
        table: &str,
        op: WriteOp,
    ) -> Result<(WriteOp, bool)> {
        if !self.emulator || !matches!(op, WriteOp::Merge(..) | WriteOp::InsertOrMerge(_)) {
            return Ok((op, false));
        }
        let (pk, rk) = op.key();
        let current = self.get_raw(name, table, pk, rk, None).await?;
        crate::apply::plan(table, op.clone(), current.as_ref())?;
        let etag = current.and_then(|c| c.etag);
        Ok(match (op, etag) {
            (WriteOp::Merge(e, _) | WriteOp::InsertOrMerge(e), Some(etag)) => {
                (WriteOp::Merge(e, crate::model::IfMatch::ETag(etag)), true)
            }
            (WriteOp::InsertOrMerge(e), None) => (WriteOp::Insert(e), true),
            (other, _) => (other, false),
        })
    }
}
pub(super) fn is_race(e: &Error) -> bool {
    matches!(
        e.kind(),
        crate::ErrorKind::PreconditionFailed | crate::ErrorKind::AlreadyExists
    )
}

/// How often a merge checked in emulator mode is retried when the entity changes between
/// the check and the write.
pub(super) const GUARD_RETRIES: usize = 8;
impl AzureTableStore {
    pub(super) async fn batch_raw(
        &self,
        name: &str,
        table: &str,
        ops: &[WriteOp],
    ) -> Result<Vec<Option<ETag>>> {
        let requests: Vec<_> = ops
            .iter()
            .map(|op| {
                let (pk, rk) = op.key();
                batch::sub_request(op, &self.table_url(name), &self.entity_url(name, pk, rk))
            })
            .collect();
        let (body, content_type) = batch::encode(&requests);
        let response = self
            .send(
                Method::POST,
                &format!("{}/$batch", self.config.endpoint),
                &[],
                &[],
                Some((content_type, body)),
            )
            .await?;
        if !response.status().is_success() {
            return Err(Self::error(response, table, None).await);
        }
        let text = response
            .text()
            .await
            .map_err(|e| transient(e.to_string()))?;
        let parts = batch::decode(&text);
        if let Some(failed) = parts.iter().find(|p| p.status >= 300 || p.status < 100) {
            let (_, message) = error_parts(&failed.body);
            let index = message
                .split_once(':')
                .and_then(|(n, _)| n.trim().parse::<usize>().ok())
                .filter(|i| *i < ops.len())
                .unwrap_or(0);
            let key = ops.get(index).map(WriteOp::key);
            let error = service_error(failed.status, &failed.body, table, key);
            return Err(match error {
                Error::TableNotFound { .. } | Error::TableBeingDeleted { .. } => error,
                other => other.in_batch(index),
            });
        }
        if parts.len() != ops.len() {
            return Err(Error::Backend {
                message: format!(
                    "the batch response has {} parts for {} operations",
                    parts.len(),
                    ops.len()
                ),
            });
        }
        Ok(parts.into_iter().map(|p| p.etag).collect())
    }
}
