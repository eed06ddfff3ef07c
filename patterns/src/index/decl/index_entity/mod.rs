//! Id lists (index entities): the ids of the entities sharing a value, such as the
//! employees with one last name, kept in the three places the design guide names.
//!
//! - **Partition storage** (option 2): pages in the primaries' partition, RowKey
//!   `~ix~<index>~<value>` and `…~p0001`, `…~p0002` for continuation pages; updated in the
//!   primary's entity group transaction under each page's ETag.
//! - **Table storage** (option 3): pages in their own partition `~ix~<index>~<value>`,
//!   RowKeys `p0000`, `p0001`, …; updated by the worker.
//! - **Blob storage** (option 1): one blob per value, `indexes/<table>/<index>/<value>.json`;
//!   updated by the worker under compare-and-swap.
//!
//! A page holds at most [`PAGE_CAPACITY`] characters of ids: a list that outgrows a page
//! continues on the next one, so a long list never fails a write. Worker-kept lists
//! (table, blob) are last-writer-wins sets: each member carries the version of the
//! primary's write that added or removed it, and removals leave a tombstone, so a late or
//! repeated message never undoes a newer change.

mod apply;
mod audit;
pub(crate) mod layout;
pub(crate) mod record;
pub(crate) mod write;

use percent_encoding::utf8_percent_encode;
use serde::{Deserialize, Serialize};
use tablekit_core::blob::BlobStore;
use tablekit_core::{ETag, Entity, ErrorKind, IfMatch, Query, TableStore, Value, WriteOp, filter};

use crate::consistency::RetryPolicy;
use crate::error::{Error, Result};
use crate::index::record::{EntityRef, INDEX_ENTITY_KIND, MARKER_PROPERTY};

/// The most characters of ids a page holds (a string property holds 32 Ki UTF-16 units).
pub const PAGE_CAPACITY: usize = 30_000;
/// The property holding a page's ids (JSON).
const IDS_PROPERTY: &str = "Ids";
/// The property holding the index entity's name.
const INDEX_PROPERTY: &str = "Index";
/// The property holding the indexed value.
const VALUE_PROPERTY: &str = "Value";

/// `~` doubled, so a value never reads as a page suffix (`~p0001`).
fn escape(value: &str) -> String {
    value.replace('~', "~~")
}

/// The RowKey of page 0 of a partition-stored id list.
pub fn partition_page_key(index: &str, value: &str) -> String {
    format!("~ix~{}~{}", escape(index), escape(value))
}

fn page_suffix(page: usize) -> String {
    format!("~p{page:04}")
}

/// The PartitionKey of a table-stored id list.
pub fn table_list_partition(index: &str, value: &str) -> String {
    format!("~ix~{}~{}", escape(index), escape(value))
}

use crate::address::BLOB_NAME_SET as BLOB_SET;

/// The blob of a blob-stored id list.
pub fn blob_name(table: &str, index: &str, value: &str) -> String {
    format!(
        "indexes/{}/{}/{}.json",
        utf8_percent_encode(table, BLOB_SET),
        utf8_percent_encode(index, BLOB_SET),
        utf8_percent_encode(value, BLOB_SET)
    )
}

/// One page of a partition-stored id list: RowKeys of the primaries.
#[derive(Clone, Debug)]
pub struct PartitionPage {
    /// The page's RowKey.
    pub row_key: String,
    /// The stored page's ETag.
    pub etag: Option<ETag>,
    /// The RowKeys listed.
    pub ids: Vec<String>,
}

fn ids_of(entity: &Entity) -> Result<Vec<String>> {
    match entity.properties.get(IDS_PROPERTY) {
        Some(Value::String(json)) => serde_json::from_str(json)
            .map_err(|e| Error::malformed(format!("id list page {}", entity.row_key), e)),
        _ => Err(Error::malformed(
            format!("id list page {}", entity.row_key),
            "no Ids property",
        )),
    }
}

fn page_entity(
    partition_key: &str,
    row_key: &str,
    index: &str,
    value: &str,
    ids_json: String,
) -> Entity {
    let mut page = Entity::new(partition_key, row_key);
    page.properties.insert(
        MARKER_PROPERTY.to_owned(),
        Value::String(INDEX_ENTITY_KIND.to_owned()),
    );
    page.properties
        .insert(INDEX_PROPERTY.to_owned(), Value::String(index.to_owned()));
    page.properties
        .insert(VALUE_PROPERTY.to_owned(), Value::String(value.to_owned()));
    page.properties
        .insert(IDS_PROPERTY.to_owned(), Value::String(ids_json));
    page
}

/// Reads the pages of a partition-stored id list, page 0 first (one range query).
///
/// # Errors
/// The store's errors; [`Error::Malformed`] for a page that does not read.
pub async fn read_partition_pages<S: TableStore>(
    store: &S,
    table: &str,
    partition_key: &str,
    index: &str,
    value: &str,
) -> Result<Vec<PartitionPage>> {
    let base = partition_page_key(index, value);
    let last = format!("{base}~p9999");
    let query = Query::with_filter(
        filter::partition_key().eq(partition_key)
            & filter::row_key().ge(base.as_str())
            & filter::row_key().le(last.as_str()),
    );
    let rows = match store.query_all(table, query).await {
        Ok(rows) => rows,
        Err(e) if e.kind() == ErrorKind::TableNotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let mut pages = Vec::new();
    for row in rows {
        let is_page = row.row_key == base
            || row.row_key.strip_prefix(&base).is_some_and(|rest| {
                rest.len() == 6
                    && rest.starts_with("~p")
                    && rest[2..].bytes().all(|b| b.is_ascii_digit())
            });
        if is_page {
            pages.push(PartitionPage {
                ids: ids_of(&row)?,
                row_key: row.row_key,
                etag: row.etag,
            });
        }
    }
    Ok(pages)
}

/// The write that keeps the page holding `id` as it is, under its ETag: a write that
/// finds its membership already listed (left by an earlier entity of that key, whose
/// delete may yet remove it) makes its transaction depend on that page.
///
/// # Errors
/// [`Error::Encode`].
pub fn pin_partition_page(
    pages: &[PartitionPage],
    partition_key: &str,
    index: &str,
    value: &str,
    id: &str,
) -> Result<Option<WriteOp>> {
    let Some(page) = pages.iter().find(|p| p.ids.iter().any(|i| i == id)) else {
        return Ok(None);
    };
    let Some(etag) = &page.etag else {
        return Ok(None);
    };
    let json = crate::error::json("an id-list page", &page.ids)?;
    let entity = page_entity(partition_key, &page.row_key, index, value, json);
    Ok(Some(WriteOp::Replace(entity, IfMatch::ETag(etag.clone()))))
}

/// The page writes that add `id` to or remove it from a partition-stored id list, each
/// under its page's ETag (a new page is an insert): none when nothing changes.
pub fn plan_partition_change(
    pages: &[PartitionPage],
    partition_key: &str,
    index: &str,
    value: &str,
    id: &str,
    add: bool,
) -> Result<Vec<WriteOp>> {
    let no_change: Vec<WriteOp> = Vec::new();
    let holder = pages.iter().find(|p| p.ids.iter().any(|i| i == id));
    let write = |page: &PartitionPage, ids: Vec<String>| -> Result<WriteOp> {
        let json = crate::error::json("an id-list page", &ids)?;
        let entity = page_entity(partition_key, &page.row_key, index, value, json);
        Ok(match &page.etag {
            Some(etag) => WriteOp::Replace(entity, IfMatch::ETag(etag.clone())),
            None => WriteOp::Insert(entity),
        })
    };
    match (add, holder) {
        (true, Some(_)) | (false, None) => Ok(no_change),
        (false, Some(page)) => {
            let ids: Vec<String> = page.ids.iter().filter(|i| *i != id).cloned().collect();
            match (&page.etag, ids.is_empty()) {
                // The last id of a page: the page goes.
                (Some(etag), true) => Ok(vec![WriteOp::Delete {
                    partition_key: partition_key.to_owned(),
                    row_key: page.row_key.clone(),
                    if_match: IfMatch::ETag(etag.clone()),
                }]),
                _ => Ok(vec![write(page, ids)?]),
            }
        }
        (true, None) => {
            let room = pages.iter().rev().find(|p| {
                serde_json::to_string(&p.ids).map_or(0, |s| s.len()) + id.len() + 3 <= PAGE_CAPACITY
            });
            match room {
                Some(page) => {
                    let mut ids = page.ids.clone();
                    ids.push(id.to_owned());
                    Ok(vec![write(page, ids)?])
                }
                None => {
                    let base = partition_page_key(index, value);
                    let last = pages
                        .iter()
                        .map(|p| {
                            p.row_key
                                .strip_prefix(&base)
                                .and_then(|rest| rest.strip_prefix("~p"))
                                .and_then(|n| n.parse::<usize>().ok())
                                .unwrap_or(0)
                        })
                        .max();
                    let row_key = match last {
                        None => base,
                        Some(n) => format!("{base}{}", page_suffix(n + 1)),
                    };
                    let page = PartitionPage {
                        row_key,
                        etag: None,
                        ids: Vec::new(),
                    };
                    Ok(vec![write(&page, vec![id.to_owned()])?])
                }
            }
        }
    }
}

/// A member of a worker-kept id list: a primary, the version of the write that last
/// changed its membership, and whether it is in the list (or a tombstone).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// The primary.
    pub source: EntityRef,
    /// The version of the primary's write that added or removed it.
    pub version: i64,
    /// In the list (`false`: removed, kept as a tombstone).
    pub present: bool,
}

#[derive(Serialize, Deserialize)]
struct MemberRow(String, String, String, i64, bool);

fn members_json(members: &[Member]) -> Result<String> {
    let rows: Vec<MemberRow> = members
        .iter()
        .map(|m| {
            MemberRow(
                m.source.table.clone(),
                m.source.partition_key.clone(),
                m.source.row_key.clone(),
                m.version,
                m.present,
            )
        })
        .collect();
    crate::error::json("an id list", &rows)
}

fn members_from_json(what: &str, json: &str) -> Result<Vec<Member>> {
    let rows: Vec<MemberRow> = serde_json::from_str(json).map_err(|e| Error::malformed(what, e))?;
    Ok(rows
        .into_iter()
        .map(|MemberRow(table, pk, rk, version, present)| Member {
            source: EntityRef::new(table, pk, rk),
            version,
            present,
        })
        .collect())
}

/// Applies one change to a last-writer-wins member list: `false` when the list already
/// holds this change or a newer one for the member.
/// With `force` (repair) a change of the same version as the stored entry applies too;
/// a newer stored entry always wins.
fn merge_member(members: &mut Vec<Member>, change: &Member, force: bool) -> bool {
    match members.iter_mut().find(|m| m.source == change.source) {
        Some(m) if m.version > change.version => false,
        Some(m) if !force && m.version == change.version => false,
        // The same membership, newer: the entry takes the newer version, so a late
        // change older than this one cannot undo it.
        Some(m) if m.present == change.present => {
            let newer = m.version < change.version;
            m.version = m.version.max(change.version);
            newer
        }
        Some(m) => {
            m.version = change.version;
            m.present = change.present;
            true
        }
        None if !change.present && force => false,
        None => {
            members.push(change.clone());
            true
        }
    }
}

struct TablePage {
    row_key: String,
    etag: Option<ETag>,
    members: Vec<Member>,
}

async fn read_table_pages<S: TableStore>(
    store: &S,
    table: &str,
    index: &str,
    value: &str,
) -> Result<Vec<TablePage>> {
    let partition = table_list_partition(index, value);
    let rows = match store.query_all(table, Query::partition(partition)).await {
        Ok(rows) => rows,
        Err(e) if e.kind() == ErrorKind::TableNotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    rows.into_iter()
        .map(|row| {
            let what = format!("id list page {}/{}", row.partition_key, row.row_key);
            let members = match row.properties.get(IDS_PROPERTY) {
                Some(Value::String(json)) => members_from_json(&what, json)?,
                _ => return Err(Error::malformed(what, "no Ids property")),
            };
            Ok(TablePage {
                row_key: row.row_key,
                etag: row.etag,
                members,
            })
        })
        .collect()
}

/// The members of a table-stored id list, tombstones included.
///
/// # Errors
/// The store's errors; [`Error::Malformed`].
pub async fn read_table_members<S: TableStore>(
    store: &S,
    table: &str,
    index: &str,
    value: &str,
) -> Result<Vec<Member>> {
    let mut newest: Vec<Member> = Vec::new();
    for member in read_table_pages(store, table, index, value)
        .await?
        .into_iter()
        .flat_map(|p| p.members)
    {
        match newest.iter_mut().find(|m| m.source == member.source) {
            Some(m) if m.version < member.version => *m = member,
            Some(_) => {}
            None => newest.push(member),
        }
    }
    Ok(newest)
}

/// Applies a membership change to a table-stored id list, under the pages' ETags, again
/// after a concurrent change. With `force` (repair) the change applies whatever the
/// versions say. `true` when the list changed.
///
/// # Errors
/// The store's errors; [`Error::Contention`] after many concurrent changes.
pub async fn change_table_member<S: TableStore>(
    store: &S,
    table: &str,
    index: &str,
    value: &str,
    change: &Member,
    force: bool,
) -> Result<bool> {
    let partition = table_list_partition(index, value);
    let mut retry = RetryPolicy::default().start();
    loop {
        retry
            .next(|| format!("id list `{index}` value `{value}` in table `{table}`"))
            .await?;
        let mut pages = read_table_pages(store, table, index, value).await?;
        let holders = pages
            .iter()
            .filter(|p| p.members.iter().any(|m| m.source == change.source))
            .count();
        if holders > 1 {
            // Two writers put the member on two pages at once: one entry again first.
            dedupe_member(store, table, index, value, &change.source).await?;
            continue;
        }
        let holder = pages
            .iter()
            .position(|p| p.members.iter().any(|m| m.source == change.source));
        let (at, is_new) = match holder {
            Some(at) => (at, false),
            None => {
                let mut room = None;
                for (at, p) in pages.iter().enumerate().rev() {
                    if members_json(&p.members)?.len() + 64 + change.source.row_key.len()
                        <= PAGE_CAPACITY
                    {
                        room = Some(at);
                        break;
                    }
                }
                match room {
                    Some(at) => (at, false),
                    None => {
                        pages.push(TablePage {
                            row_key: format!("p{:04}", pages.len()),
                            etag: None,
                            members: Vec::new(),
                        });
                        (pages.len() - 1, true)
                    }
                }
            }
        };
        let page = &mut pages[at];
        if !merge_member(&mut page.members, change, force) {
            return Ok(false);
        }
        let entity = page_entity(
            &partition,
            &page.row_key,
            index,
            value,
            members_json(&page.members)?,
        );
        let op = match (&page.etag, is_new) {
            (Some(etag), false) => WriteOp::Replace(entity, IfMatch::ETag(etag.clone())),
            _ => WriteOp::Insert(entity),
        };
        match store.execute(table, op).await {
            Ok(_) => {
                if holder.is_none() {
                    // A concurrent writer may have added the member on another page.
                    dedupe_member(store, table, index, value, &change.source).await?;
                }
                return Ok(true);
            }
            Err(e) if e.kind() == ErrorKind::TableNotFound => {
                store.create_table_if_not_exists(table).await?;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::PreconditionFailed | ErrorKind::AlreadyExists | ErrorKind::NotFound
                ) => {}
            Err(e) => return Err(e),
        }
    }
}

/// Leaves one entry of `source` in a table-stored id list, the newest, on the first page
/// that held it.
async fn dedupe_member<S: TableStore>(
    store: &S,
    table: &str,
    index: &str,
    value: &str,
    source: &EntityRef,
) -> Result<()> {
    let partition = table_list_partition(index, value);
    let mut retry = RetryPolicy::default().start();
    'attempt: loop {
        retry
            .next(|| format!("id list `{index}` value `{value}` in table `{table}`"))
            .await?;
        let pages = read_table_pages(store, table, index, value).await?;
        let holders: Vec<&TablePage> = pages
            .iter()
            .filter(|p| p.members.iter().any(|m| m.source == *source))
            .collect();
        if holders.len() <= 1 {
            return Ok(());
        }
        let Some(winner) = holders
            .iter()
            .flat_map(|p| p.members.iter().filter(|m| m.source == *source))
            .max_by_key(|m| m.version)
            .cloned()
        else {
            return Ok(());
        };
        for (n, page) in holders.iter().enumerate() {
            let mut members: Vec<Member> = page
                .members
                .iter()
                .filter(|m| m.source != *source)
                .cloned()
                .collect();
            if n == 0 {
                members.push(winner.clone());
            }
            let entity = page_entity(
                &partition,
                &page.row_key,
                index,
                value,
                members_json(&members)?,
            );
            let if_match = page.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            match store
                .execute(table, WriteOp::Replace(entity, if_match))
                .await
            {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::PreconditionFailed | ErrorKind::NotFound
                    ) =>
                {
                    continue 'attempt;
                }
                Err(e) => return Err(e),
            }
        }
        return Ok(());
    }
}

#[derive(Serialize, Deserialize)]
struct BlobList {
    index: String,
    value: String,
    members: String,
}

/// The members of a blob-stored id list, tombstones included.
///
/// # Errors
/// The blob store's errors; [`Error::Malformed`].
pub async fn read_blob_members(
    blobs: &BlobStore,
    table: &str,
    index: &str,
    value: &str,
) -> Result<Vec<Member>> {
    let name = blob_name(table, index, value);
    match blobs.get(&name).await? {
        None => Ok(Vec::new()),
        Some(bytes) => parse_blob(&name, &bytes),
    }
}

fn parse_blob(name: &str, bytes: &[u8]) -> Result<Vec<Member>> {
    let list: BlobList =
        serde_json::from_slice(bytes).map_err(|e| Error::malformed(format!("blob {name}"), e))?;
    members_from_json(&format!("blob {name}"), &list.members)
}

/// Applies a membership change to a blob-stored id list under compare-and-swap.
///
/// # Errors
/// The blob store's errors; [`Error::Contention`].
pub async fn change_blob_member(
    blobs: &BlobStore,
    table: &str,
    index: &str,
    value: &str,
    change: &Member,
    force: bool,
) -> Result<bool> {
    let name = blob_name(table, index, value);
    let mut retry = RetryPolicy::default().start();
    loop {
        retry.next(|| format!("id list blob {name}")).await?;
        let current = blobs.get_versioned(&name).await?;
        let (mut members, version) = match current {
            Some((bytes, version)) => (parse_blob(&name, &bytes)?, Some(version)),
            None => (Vec::new(), None),
        };
        if !merge_member(&mut members, change, force) {
            return Ok(false);
        }
        let list = BlobList {
            index: index.to_owned(),
            value: value.to_owned(),
            members: members_json(&members)?,
        };
        let bytes = crate::error::json("an id-list blob", &list)?.into_bytes();
        if blobs.put_if_version(&name, bytes, version.as_ref()).await? {
            return Ok(true);
        }
    }
}

/// The values and members of every blob-stored id list of a table's index entity.
///
/// # Errors
/// The blob store's errors; [`Error::Malformed`].
pub async fn list_blob_lists(
    blobs: &BlobStore,
    table: &str,
    index: &str,
) -> Result<Vec<(String, Vec<Member>)>> {
    let prefix = format!(
        "indexes/{}/{}/",
        utf8_percent_encode(table, BLOB_SET),
        utf8_percent_encode(index, BLOB_SET)
    );
    let mut out = Vec::new();
    for info in blobs.list(&prefix).await? {
        if let Some(bytes) = blobs.get(&info.name).await? {
            let list: BlobList = serde_json::from_slice(&bytes)
                .map_err(|e| Error::malformed(format!("blob {}", info.name), e))?;
            let members = members_from_json(&info.name, &list.members)?;
            out.push((list.value, members));
        }
    }
    Ok(out)
}

/// Reads an id-list page entity found by a scan: its index, value and, for a
/// partition-stored list, the RowKeys it lists; for a table-stored list, its members.
pub(crate) fn read_page(entity: &Entity) -> Result<(String, String, PageIds)> {
    let what = format!("id list page {}/{}", entity.partition_key, entity.row_key);
    let text = |name: &str| match entity.properties.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(Error::malformed(
            what.clone(),
            format!("no {name} property"),
        )),
    };
    let index = text(INDEX_PROPERTY)?;
    let value = text(VALUE_PROPERTY)?;
    let json = text(IDS_PROPERTY)?;
    let ids = if entity.partition_key.starts_with("~ix~") {
        PageIds::Members(members_from_json(&what, &json)?)
    } else {
        PageIds::RowKeys(
            serde_json::from_str(&json).map_err(|e| Error::malformed(what.clone(), e))?,
        )
    };
    Ok((index, value, ids))
}

/// What a scanned page lists.
pub(crate) enum PageIds {
    /// RowKeys in the page's partition (partition storage).
    RowKeys(Vec<String>),
    /// Members (table storage).
    Members(Vec<Member>),
}

crate::index::registry::roles::declaration! {
    write::Lists {
        attribute: write::ATTRIBUTE,
        steps: [write, upkeep],
        targets: [record::MemberTarget],
        operations: [record::AddMember, record::RemoveMember],
        lays_out: layout::Lists,
    }
}
