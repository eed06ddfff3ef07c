//! A type's layout: the indexes, index entities, denormalised fields, unique values,
//! expiry and change events it declares, with their templates parsed, and the targets a
//! primary has under them.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use tablekit_core::Entity;
use tablekit_core::limits::KeyKind;
use tablekit_core::typed::{ExpiryMeta, IndexPlacement, KeyTemplate, Schema};

use super::{CopyTarget, DenormalizedTarget, MemberTarget};
use super::{EntityRef, MemberStorage, Target};
use crate::error::Result;
use crate::index::decl::expiry::entry::EXPIRY_INDEX;

/// One declared secondary index, with its templates parsed.
#[derive(Clone, Debug)]
pub struct IndexLayout {
    /// The name.
    pub name: String,
    /// The copies' table; the primary's when `None`.
    pub table: Option<String>,
    /// The copies' PartitionKey template.
    pub partition_key: KeyTemplate,
    /// The copies' RowKey template.
    pub row_key: KeyTemplate,
    /// The properties a copy carries.
    pub properties: Option<Vec<String>>,
    /// Whether some entities have no copy.
    pub sparse: bool,
}

/// One declared index entity, with its template parsed.
#[derive(Clone, Debug)]
pub struct MemberLayout {
    /// The name.
    pub name: String,
    /// The template of the indexed value.
    pub key: KeyTemplate,
    /// The id lists' table; the primary's when `None`.
    pub table: Option<String>,
    /// Where the id lists live.
    pub storage: MemberStorage,
}

/// One declared denormalised field, with its templates parsed.
#[derive(Clone, Debug)]
pub struct DenormalizedLayout {
    /// The property holding the copy.
    pub property: String,
    /// The kind of the source.
    pub from_kind: String,
    /// The source's table; the primary's when `None`.
    pub table: Option<String>,
    /// The source's PartitionKey, from the primary's fields.
    pub partition_key: KeyTemplate,
    /// The source's RowKey, from the primary's fields.
    pub row_key: KeyTemplate,
    /// The source's property.
    pub source_property: String,
}

/// How a type's entities expire, as the layout keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExpiryLayout {
    /// Each write sets the expiry this many seconds after it.
    Ttl(u64),
    /// A field says when (the expiry is stored beside it, in `TablekitExpires`).
    Field,
}

impl From<ExpiryMeta> for ExpiryLayout {
    fn from(meta: ExpiryMeta) -> Self {
        match meta {
            ExpiryMeta::Ttl(seconds) => ExpiryLayout::Ttl(seconds),
            ExpiryMeta::Field(_) => ExpiryLayout::Field,
        }
    }
}

/// The indexes and index entities of an entity type: what its primaries keep in step.
#[derive(Clone, Debug)]
pub struct Layout {
    /// The primaries' table.
    pub table: String,
    /// The kind of the primaries.
    pub kind: String,
    /// The property holding the kind.
    pub kind_property: String,
    /// The secondary indexes.
    pub indexes: Vec<IndexLayout>,
    /// The index entities.
    pub members: Vec<MemberLayout>,
    /// The denormalised fields.
    pub denormalized: Vec<DenormalizedLayout>,
    /// The declarations described by their attribute alone (`#[unique]`, `#[count]`), laid out by
    /// the declaration their attribute names, through the registry.
    pub declared: Vec<DeclaredLayout>,
}

/// How a declaration described by its attribute alone lays out from the type's layout:
/// the targets a primary has under it, the tables it keeps, and its follow-up work. Its
/// folder submits it as a [`LaidOut`].
pub(crate) trait LaysOut: Sync {
    /// The targets of the primary at `source` under `declared`; `render` renders a key
    /// template from the primary's fields. None by default.
    ///
    /// # Errors
    /// The rendering's errors; a setting the declaration cannot read.
    fn targets(
        &self,
        _declared: &DeclaredLayout,
        _source: &EntityRef,
        _render: &dyn Fn(&KeyTemplate, KeyKind) -> Result<String>,
    ) -> Result<Vec<Target>> {
        Ok(Vec::new())
    }

    /// The tables it keeps its entities in, for primaries in `table`. None by default.
    fn tables(&self, _declared: &DeclaredLayout, _table: &str) -> Vec<String> {
        Vec::new()
    }

    /// Its follow-up work outside a write's transaction, described as
    /// [`Layout::follow_up`] lists it.
    fn follow_up(&self, declared: &DeclaredLayout, table: &str) -> Option<String>;

    /// Whether the schema registry records it (true by default): a declaration only the
    /// typed paths act on stays out of the record the untyped paths read.
    fn recorded(&self) -> bool {
        true
    }
}

/// A declaration's [`LaysOut`], submitted by its folder (`inventory::submit!`).
pub(crate) struct LaidOut {
    /// The attribute that declares it.
    pub attribute: &'static str,
    /// How it lays out.
    pub lays_out: &'static dyn LaysOut,
}

inventory::collect!(LaidOut);

/// How the declaration `attribute` lays out.
///
/// # Errors
/// [`crate::Error::Malformed`] when no declaration with that attribute submitted one.
pub(crate) fn lays_out(attribute: &str) -> Result<&'static dyn LaysOut> {
    inventory::iter::<LaidOut>
        .into_iter()
        .find(|l| l.attribute == attribute)
        .map(|l| l.lays_out)
        .ok_or_else(|| {
            crate::Error::malformed(
                format!("declaration `#[{attribute}]`"),
                "no registered declaration has that attribute",
            )
        })
}

/// A declaration described by its attribute alone, with its key template parsed.
#[derive(Clone, Debug)]
pub struct DeclaredLayout {
    /// The attribute (`unique`, `count`).
    pub attribute: String,
    /// The name.
    pub name: String,
    /// The key template, if it has one.
    pub key: Option<KeyTemplate>,
    /// The table it keeps its entities in, when declared.
    pub table: Option<String>,
    /// Its other settings, as written.
    pub settings: Vec<(String, String)>,
}

impl DeclaredLayout {
    /// A setting by key.
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

impl Layout {
    /// The layout a derived entity type declares.
    pub fn of(schema: &Schema) -> Self {
        Layout {
            table: schema.table.to_owned(),
            kind: schema.kind.to_owned(),
            kind_property: schema.kind_property.to_owned(),
            indexes: schema
                .indexes
                .iter()
                .map(|i| IndexLayout {
                    name: i.name.to_owned(),
                    table: match i.placement {
                        IndexPlacement::OtherTable => i.table.map(str::to_owned),
                        _ => None,
                    },
                    partition_key: i.partition_key.clone(),
                    row_key: i.row_key.clone(),
                    properties: i
                        .properties
                        .map(|p| p.iter().map(|s| (*s).to_owned()).collect()),
                    sparse: i.sparse,
                })
                .collect(),
            members: schema
                .index_entities
                .iter()
                .map(|m| MemberLayout {
                    name: m.name.to_owned(),
                    key: m.key.clone(),
                    table: m.table.map(str::to_owned),
                    storage: m.storage.into(),
                })
                .collect(),
            denormalized: schema
                .denormalized
                .iter()
                .map(|d| DenormalizedLayout {
                    property: d.property.to_owned(),
                    from_kind: d.from_kind.to_owned(),
                    table: d.table.map(str::to_owned),
                    partition_key: d.partition_key.clone(),
                    row_key: d.row_key.clone(),
                    source_property: d.source_property.to_owned(),
                })
                .collect(),
            declared: schema
                .declared
                .iter()
                .map(|d| DeclaredLayout {
                    attribute: d.attribute.to_owned(),
                    name: d.name.to_owned(),
                    key: d.key.clone(),
                    table: d.table.map(str::to_owned),
                    settings: d
                        .settings
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                })
                .collect(),
        }
    }

    /// The layout of primaries whose type is not registered: nothing declared, the
    /// default kind property. Deleting one through it removes what its record names.
    pub fn bare(table: &str) -> Self {
        Layout {
            table: table.to_owned(),
            kind: String::new(),
            kind_property: tablekit_core::typed::DEFAULT_KIND_PROPERTY.to_owned(),
            indexes: Vec::new(),
            members: Vec::new(),
            denormalized: Vec::new(),
            declared: Vec::new(),
        }
    }

    /// Whether the layout declares nothing the schema registry records (a wide type's
    /// chunks are its own entity's).
    pub fn is_bare(&self) -> bool {
        self.indexes.is_empty()
            && self.members.is_empty()
            && self.denormalized.is_empty()
            && self
                .declared
                .iter()
                .all(|d| !lays_out(&d.attribute).is_ok_and(|l| l.recorded()))
    }

    /// The same layout on another table name (one table per tenant).
    pub fn on_table(mut self, table: &str) -> Self {
        self.table = table.to_owned();
        self
    }

    /// The targets of a primary: `render` renders a template (PartitionKey or RowKey
    /// rules), `in_index` says whether a sparse index holds the primary. With `only`, the
    /// targets of that index or index entity alone.
    ///
    /// # Errors
    /// The rendering's errors.
    pub fn targets(
        &self,
        source: &EntityRef,
        render: &dyn Fn(&KeyTemplate, KeyKind) -> Result<String>,
        in_index: &dyn Fn(&str) -> bool,
        only: Option<&str>,
    ) -> Result<BTreeSet<Target>> {
        let mut targets = BTreeSet::new();
        for index in &self.indexes {
            if only.is_some_and(|o| o != index.name) || (index.sparse && !in_index(&index.name)) {
                continue;
            }
            let at = EntityRef::new(
                index.table.clone().unwrap_or_else(|| source.table.clone()),
                render(&index.partition_key, KeyKind::PartitionKey)?,
                render(&index.row_key, KeyKind::RowKey)?,
            );
            targets.insert(Target::from(CopyTarget {
                index: index.name.clone(),
                at,
                properties: index.properties.clone(),
            }));
        }
        for member in &self.members {
            if only.is_some_and(|o| o != member.name) {
                continue;
            }
            let table = match member.storage {
                MemberStorage::Partition => source.table.clone(),
                _ => member.table.clone().unwrap_or_else(|| source.table.clone()),
            };
            targets.insert(Target::from(MemberTarget {
                index: member.name.clone(),
                storage: member.storage,
                table,
                value: render(&member.key, KeyKind::RowKey)?,
            }));
        }
        for field in &self.denormalized {
            if only.is_some_and(|o| o != field.property) {
                continue;
            }
            targets.insert(Target::from(DenormalizedTarget {
                property: field.property.clone(),
                source: EntityRef::new(
                    field.table.clone().unwrap_or_else(|| source.table.clone()),
                    render(&field.partition_key, KeyKind::PartitionKey)?,
                    render(&field.row_key, KeyKind::RowKey)?,
                ),
                source_property: field.source_property.clone(),
            }));
        }
        for declared in &self.declared {
            if only.is_some_and(|o| o != declared.name) {
                continue;
            }
            let lays_out = lays_out(&declared.attribute)?;
            targets.extend(lays_out.targets(declared, source, render)?);
        }
        Ok(targets)
    }

    /// The most chunks a primary may take, if the type is wide (the declaration `wide`,
    /// with the setting `chunks`).
    pub fn wide(&self) -> Option<usize> {
        self.declared
            .iter()
            .find(|d| d.attribute == "wide")?
            .setting("chunks")?
            .parse()
            .ok()
    }

    /// How the primaries expire, if they do (the declaration `expiry`, with the setting
    /// `ttl` in seconds or `field`): each has an entry in the expiry index.
    pub fn expiry(&self) -> Option<ExpiryLayout> {
        let declared = self.declared.iter().find(|d| d.attribute == "expiry")?;
        match (declared.setting("ttl"), declared.setting("field")) {
            (Some(seconds), _) => seconds.parse().ok().map(ExpiryLayout::Ttl),
            (None, Some(_)) => Some(ExpiryLayout::Field),
            (None, None) => None,
        }
    }

    /// The queue the type's change events go to, if it publishes them (the declaration
    /// `changes`).
    pub fn changes(&self) -> Option<&str> {
        self.declared
            .iter()
            .find(|d| d.attribute == "changes")
            .and_then(|d| d.setting("queue"))
    }

    /// Whether the layout declares an index or index entity of that name.
    pub fn declares(&self, name: &str) -> bool {
        self.indexes.iter().any(|i| i.name == name)
            || self.members.iter().any(|m| m.name == name)
            || self.denormalized.iter().any(|d| d.property == name)
            || (self.expiry().is_some() && name == EXPIRY_INDEX)
            || self.declared.iter().any(|d| d.name == name)
    }

    /// The entry of a primary in the expiry index, when the layout expires its primaries
    /// and the primary (`entity`, as it is written) has an expiry time.
    pub fn expiry_target(&self, source: &EntityRef, entity: &Entity) -> Option<Target> {
        self.expiry()?;
        let at = tablekit_core::typed::expires_at(entity)?;
        Some(crate::index::decl::expiry::entry_target(source, at))
    }

    /// The declarations whose upkeep is follow-up work outside a write's own entity group
    /// transaction — the work the writer records in the partition's outbox for a sink,
    /// the relay or the inline applier — each named as its attribute names it, with where
    /// its work goes: copies in another partition or table, id lists in a table or in
    /// blobs, denormalised fields whose source is in another partition or table, unique
    /// values (released after the write), expiry (entries in the expiry table) and change
    /// events. `partition_key` is the primaries' PartitionKey template: a copy or source
    /// whose template has the same parts is in the primary's partition, written in its
    /// transaction. Same-partition copies, id lists and sources, and a wide entity's
    /// chunks, need none.
    pub fn follow_up(&self, partition_key: &KeyTemplate) -> Vec<String> {
        let elsewhere = |table: Option<&String>, template: &KeyTemplate| {
            if let Some(table) = table.filter(|t| **t != self.table) {
                Some(format!("table `{table}`"))
            } else {
                (template.parts() != partition_key.parts())
                    .then(|| format!("other partitions of `{}`", self.table))
            }
        };
        let mut work = Vec::new();
        for index in &self.indexes {
            if let Some(at) = elsewhere(index.table.as_ref(), &index.partition_key) {
                work.push(format!("index `{}`: copies in {at}", index.name));
            }
        }
        for member in &self.members {
            match member.storage {
                MemberStorage::Partition => {}
                MemberStorage::Table => work.push(format!(
                    "index entity `{}`: id lists in table `{}`",
                    member.name,
                    member.table.as_deref().unwrap_or(&self.table)
                )),
                MemberStorage::Blob => {
                    work.push(format!("index entity `{}`: id lists in blobs", member.name));
                }
            }
        }
        for field in &self.denormalized {
            if let Some(at) = elsewhere(field.table.as_ref(), &field.partition_key) {
                work.push(format!(
                    "denormalized `{}` from `{}`: its source in {at}",
                    field.property, field.from_kind
                ));
            }
        }
        for declared in &self.declared {
            if let Ok(lays_out) = lays_out(&declared.attribute) {
                work.extend(lays_out.follow_up(declared, &self.table));
            }
        }
        work
    }

    /// The tables other than the primaries' that hold copies, id lists or reservations.
    pub fn other_tables(&self) -> BTreeSet<String> {
        self.indexes
            .iter()
            .filter_map(|i| i.table.clone())
            .chain(
                self.members
                    .iter()
                    .filter(|m| m.storage == MemberStorage::Table)
                    .filter_map(|m| m.table.clone()),
            )
            .chain(self.declared.iter().flat_map(|d| {
                lays_out(&d.attribute)
                    .map(|l| l.tables(d, &self.table))
                    .unwrap_or_default()
            }))
            .filter(|t| *t != self.table)
            .collect()
    }
}
