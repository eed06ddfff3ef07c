//! Reads of the Table service: point reads and query pages, with the continuation
//! tokens, `$select` lists and the filters loosened for the emulator.

use reqwest::{Method, StatusCode};
use serde_json::Value as Json;

use super::json;
use super::table::{AzureTableStore, SERVICE_TOKEN};
use crate::error::{Error, Result};
use crate::limits;
use crate::model::Entity;
use crate::query::{ContinuationToken, Page, Query};

impl AzureTableStore {
    pub(super) async fn get_raw(
        &self,
        name: &str,
        table: &str,
        pk: &str,
        rk: &str,
        select: Option<&[&str]>,
    ) -> Result<Option<Entity>> {
        let mut query = Vec::new();
        if let Some(select) = select {
            query.push(("$select", select_list(select.iter().copied())));
        }
        let response = self
            .send(
                Method::GET,
                &self.entity_url(name, pk, rk),
                &query,
                &[],
                None,
            )
            .await?;
        match response.status() {
            status if status.is_success() => {
                let etag = Self::etag(&response);
                let mut entity = json::entity_from_json(Self::json(response).await?)?;
                if entity.etag.is_none() {
                    entity.etag = etag;
                }
                Ok(Some(entity))
            }
            StatusCode::NOT_FOUND => match Self::error(response, table, Some((pk, rk))).await {
                Error::NotFound { .. } => Ok(None),
                other => Err(other),
            },
            _ => Err(Self::error(response, table, Some((pk, rk))).await),
        }
    }

    /// One page of a query; `scope` narrows it to a shared access signature's key range.
    pub(super) async fn query_raw(
        &self,
        name: &str,
        table: &str,
        query: &Query,
        scope: Option<&crate::filter::Filter>,
    ) -> Result<Page> {
        let mut filter = query.filter.clone();
        let mut params = Vec::new();
        match &query.continuation {
            Some(token) if token.next_partition_key().starts_with(SERVICE_TOKEN) => {
                params.push((
                    "NextPartitionKey",
                    token.next_partition_key()[SERVICE_TOKEN.len_utf8()..].to_owned(),
                ));
                if !token.next_row_key().is_empty() {
                    params.push(("NextRowKey", token.next_row_key().to_owned()));
                }
            }
            Some(token) => {
                // A token naming a key: resume at that key, inclusive.
                let (pk, rk) = (token.next_partition_key(), token.next_row_key());
                let resume = crate::filter::partition_key().gt(pk)
                    | (crate::filter::partition_key().eq(pk) & crate::filter::row_key().ge(rk));
                filter = Some(match filter {
                    Some(f) => f & resume,
                    None => resume,
                });
            }
            None => {}
        }
        let unscoped = filter.clone();
        if let Some(scope) = scope {
            filter = Some(match filter {
                Some(f) => f & scope.clone(),
                None => scope.clone(),
            });
        }
        // Over the service's comparison limit, the key range is applied here only (the
        // service applies its token's range by itself).
        let sent = match &filter {
            Some(f) if f.comparisons() > limits::MAX_FILTER_COMPARISONS => &unscoped,
            other => other,
        };
        let server_filter = match sent {
            Some(f) if self.emulator && self.refilter => emulator_filter(f),
            other => other.clone(),
        };
        if let Some(f) = &server_filter {
            params.push(("$filter", f.to_odata()));
        }
        params.push(("$top", query.page_size().to_string()));
        if let Some(select) = &query.select {
            // The filter's properties come too, so that results can be filtered again here.
            let mut names: Vec<&str> = select.iter().map(String::as_str).collect();
            let mut referenced = Vec::new();
            if let Some(f) = &filter {
                collect_properties(f, &mut referenced);
            }
            names.extend(referenced.iter().map(String::as_str));
            names.sort_unstable();
            names.dedup();
            params.push(("$select", select_list(names.into_iter())));
        }
        let response = self
            .send(
                Method::GET,
                &format!("{}/{name}()", self.config.endpoint),
                &params,
                &[],
                None,
            )
            .await?;
        if !response.status().is_success() {
            return Err(Self::error(response, table, None).await);
        }
        let header = |n: &str| {
            response
                .headers()
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let continuation = header("x-ms-continuation-NextPartitionKey").map(|npk| {
            ContinuationToken::new(
                format!("{SERVICE_TOKEN}{npk}"),
                header("x-ms-continuation-NextRowKey").unwrap_or_default(),
            )
        });
        let mut body: Json = Self::json(response).await?;
        let mut entities = Vec::new();
        if let Json::Array(values) = body["value"].take() {
            for value in values {
                let mut entity = json::entity_from_json(value)?;
                // The core's filter rules are the contract on every backend.
                if self.refilter && filter.as_ref().is_some_and(|f| !f.matches(&entity)) {
                    continue;
                }
                if let Some(select) = &query.select {
                    entity.project(select);
                }
                entities.push(entity);
            }
        }
        Ok(Page {
            entities,
            continuation,
        })
    }
}

/// Emulator only: the filter to send, loosened where Azurite answers wrongly: `not`
/// (Azurite negates comparisons over absent properties), `true` and `false` (Azurite
/// refuses most filters without a property), `eq` with an Int32 literal (Azurite does not
/// widen it to Int64 values) and comparisons with Int64, Binary, DateTime or non-finite
/// Double literals become "any entity". The results are then filtered by the core's
/// rules, so loosening only costs transfer.
pub(super) fn emulator_filter(filter: &crate::filter::Filter) -> Option<crate::filter::Filter> {
    use crate::filter::Filter;
    use crate::model::Value;
    match filter {
        Filter::Compare {
            property,
            value,
            op,
        } => {
            let loosened = match value {
                // Azurite fails on Int64 literals against other types, does not order
                // binaries, compares DateTimes to the millisecond, and reads no INF/NaN.
                Value::Int64(_) | Value::Binary(_) | Value::DateTime(_) => true,
                Value::Double(d) => !d.is_finite(),
                // It keeps Int64 values as strings, which never equal a number (they
                // order against one by JavaScript's coercion).
                Value::Int32(_) => *op == crate::filter::CompareOp::Eq,
                _ => false,
            };
            // Key comparisons are always exact: they are what limits the scan.
            let is_key = matches!(property.as_str(), "PartitionKey" | "RowKey");
            (is_key || !loosened).then(|| filter.clone())
        }
        Filter::Not(_) | Filter::Literal(_) => None,
        Filter::And(a, b) => match (emulator_filter(a), emulator_filter(b)) {
            (Some(a), Some(b)) => Some(a & b),
            (Some(x), None) | (None, Some(x)) => Some(x),
            (None, None) => None,
        },
        Filter::Or(a, b) => match (emulator_filter(a), emulator_filter(b)) {
            (Some(a), Some(b)) => Some(a | b),
            _ => None,
        },
    }
}

fn collect_properties(filter: &crate::filter::Filter, out: &mut Vec<String>) {
    use crate::filter::Filter;
    match filter {
        Filter::Compare { property, .. } => out.push(property.clone()),
        Filter::Not(inner) => collect_properties(inner, out),
        Filter::Literal(_) => {}
        Filter::And(a, b) | Filter::Or(a, b) => {
            collect_properties(a, out);
            collect_properties(b, out);
        }
    }
}
/// `$select` with the keys and timestamp always included, so every result is an entity.
pub(super) fn select_list<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut list = vec!["PartitionKey", "RowKey", "Timestamp"];
    list.extend(names.filter(|n| !matches!(*n, "PartitionKey" | "RowKey" | "Timestamp")));
    list.join(",")
}
