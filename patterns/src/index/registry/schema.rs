//! The schema registry: each indexed table records, in the `TablekitSchemas` table, the
//! indexes and index entities its entity types declare (templates as text). The audit
//! and backfill read it to work on a table without the application's entity types, and
//! writers read it to find the types that copy their properties.

use serde::{Deserialize, Serialize};
use tablekit_core::limits::{self, KeyKind};
use tablekit_core::typed::{FieldStorage, KeyPart, KeyTemplate, Schema};
use tablekit_core::{Entity, ErrorKind, Query, TableStore, Value, filter};

use super::record::{
    DeclaredLayout, DenormalizedLayout, ExpiryLayout, IndexLayout, Layout, MemberLayout,
    MemberStorage,
};
use crate::error::{Error, Result};
use crate::index::record::lays_out;

/// The table holding the registry.
pub const SCHEMA_TABLE: &str = "TablekitSchemas";
const SCHEMA_PROPERTY: &str = "Schema";

/// A declared secondary index, as registered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexDecl {
    /// The name.
    pub name: String,
    /// The copies' table, when not the primaries'.
    pub table: Option<String>,
    /// The PartitionKey template.
    pub partition_key: String,
    /// The RowKey template.
    pub row_key: String,
    /// The properties a copy carries.
    pub properties: Option<Vec<String>>,
    /// Whether the index is sparse (`when = …`: only the entity type can tell).
    pub sparse: bool,
}

/// A declared index entity, as registered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberDecl {
    /// The name.
    pub name: String,
    /// The template of the value.
    pub key: String,
    /// The id lists' table, when not the primaries'.
    pub table: Option<String>,
    /// Where the id lists live.
    pub storage: MemberStorage,
}

/// A declared denormalised field, as registered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DenormalizedDecl {
    /// The property holding the copy.
    pub property: String,
    /// The kind of the source.
    pub from_kind: String,
    /// The source's table, when not the primaries'.
    pub table: Option<String>,
    /// The source's PartitionKey template.
    pub partition_key: String,
    /// The source's RowKey template.
    pub row_key: String,
    /// The source's property.
    pub source_property: String,
}

/// What one entity type of a table declares.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "StoredSchemaRecord")]
pub struct SchemaRecord {
    /// The primaries' table.
    pub table: String,
    /// The kind.
    pub kind: String,
    /// The property holding the kind.
    pub kind_property: String,
    /// Each stored field: (field name, property name).
    pub fields: Vec<(String, String)>,
    /// The secondary indexes.
    pub indexes: Vec<IndexDecl>,
    /// The index entities.
    pub members: Vec<MemberDecl>,
    /// The denormalised fields.
    #[serde(default)]
    pub denormalized: Vec<DenormalizedDecl>,
    /// The declarations described by their attribute alone (`#[unique]`, `#[count]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declared: Vec<DeclaredDecl>,
}

/// A schema record as stored by any version: the expiry, the change events' queue and the
/// unique values of a record written before they were declarations described by their
/// attribute alone are read from their own fields (`expiry`, `changes`, `uniques`) into
/// `declared`.
#[derive(Deserialize)]
struct StoredSchemaRecord {
    table: String,
    kind: String,
    kind_property: String,
    fields: Vec<(String, String)>,
    indexes: Vec<IndexDecl>,
    members: Vec<MemberDecl>,
    #[serde(default)]
    denormalized: Vec<DenormalizedDecl>,
    #[serde(default)]
    uniques: Vec<StoredUnique>,
    #[serde(default)]
    expiry: Option<ExpiryLayout>,
    #[serde(default)]
    changes: Option<String>,
    #[serde(default)]
    declared: Vec<DeclaredDecl>,
}

/// A unique value as records stored it in their own field.
#[derive(Deserialize)]
struct StoredUnique {
    name: String,
    key: String,
    table: Option<String>,
}

impl From<StoredSchemaRecord> for SchemaRecord {
    fn from(stored: StoredSchemaRecord) -> Self {
        let uniques = stored.uniques.into_iter().map(|u| DeclaredDecl {
            attribute: "unique".to_owned(),
            name: u.name,
            key: Some(u.key),
            table: u.table,
            settings: Vec::new(),
        });
        let expiry = stored.expiry.map(|expiry| DeclaredDecl {
            attribute: "expiry".to_owned(),
            name: "expiry".to_owned(),
            key: None,
            table: None,
            settings: vec![match expiry {
                ExpiryLayout::Ttl(seconds) => ("ttl".to_owned(), seconds.to_string()),
                ExpiryLayout::Field => ("field".to_owned(), String::new()),
            }],
        });
        let changes = stored.changes.map(|queue| DeclaredDecl {
            attribute: "changes".to_owned(),
            name: "changes".to_owned(),
            key: None,
            table: None,
            settings: vec![("queue".to_owned(), queue)],
        });
        SchemaRecord {
            table: stored.table,
            kind: stored.kind,
            kind_property: stored.kind_property,
            fields: stored.fields,
            indexes: stored.indexes,
            members: stored.members,
            denormalized: stored.denormalized,
            declared: expiry
                .into_iter()
                .chain(changes)
                .chain(uniques)
                .chain(stored.declared)
                .collect(),
        }
    }
}

/// A declaration described by its attribute alone, as registered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeclaredDecl {
    /// The attribute (`unique`, `count`).
    pub attribute: String,
    /// The name.
    pub name: String,
    /// The key template, if it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The table it keeps its entities in, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// Its other settings, as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<(String, String)>,
}

impl SchemaRecord {
    /// The record of a derived entity type, on `table`.
    pub fn of(schema: &Schema, table: &str) -> Self {
        let layout = Layout::of(schema);
        SchemaRecord {
            table: table.to_owned(),
            kind: schema.kind.to_owned(),
            kind_property: schema.kind_property.to_owned(),
            fields: schema
                .fields
                .iter()
                .filter(|f| f.storage != FieldStorage::Skipped)
                .map(|f| (f.name.to_owned(), f.property.to_owned()))
                .collect(),
            indexes: layout
                .indexes
                .iter()
                .map(|i| IndexDecl {
                    name: i.name.clone(),
                    table: i.table.clone(),
                    partition_key: i.partition_key.source().to_owned(),
                    row_key: i.row_key.source().to_owned(),
                    properties: i.properties.clone(),
                    sparse: i.sparse,
                })
                .collect(),
            members: layout
                .members
                .iter()
                .map(|m| MemberDecl {
                    name: m.name.clone(),
                    key: m.key.source().to_owned(),
                    table: m.table.clone(),
                    storage: m.storage,
                })
                .collect(),
            denormalized: layout
                .denormalized
                .iter()
                .map(|d| DenormalizedDecl {
                    property: d.property.clone(),
                    from_kind: d.from_kind.clone(),
                    table: d.table.clone(),
                    partition_key: d.partition_key.source().to_owned(),
                    row_key: d.row_key.source().to_owned(),
                    source_property: d.source_property.clone(),
                })
                .collect(),
            declared: layout
                .declared
                .iter()
                .filter(|d| lays_out(&d.attribute).is_ok_and(|l| l.recorded()))
                .map(|d| DeclaredDecl {
                    attribute: d.attribute.clone(),
                    name: d.name.clone(),
                    key: d.key.as_ref().map(|k| k.source().to_owned()),
                    table: d.table.clone(),
                    settings: d.settings.clone(),
                })
                .collect(),
        }
    }

    /// Whether the primaries expire (the declaration `expiry`).
    pub fn expires(&self) -> bool {
        self.declared.iter().any(|d| d.attribute == "expiry")
    }

    /// The queue the type's change events go to, if it publishes them (the declaration
    /// `changes`).
    pub fn changes(&self) -> Option<&str> {
        self.declared
            .iter()
            .find(|d| d.attribute == "changes")
            .and_then(|d| d.settings.iter().find(|(k, _)| k == "queue"))
            .map(|(_, queue)| queue.as_str())
    }

    /// The layout, with the templates parsed.
    ///
    /// # Errors
    /// [`Error::Malformed`] for a template that does not parse.
    pub fn layout(&self) -> Result<Layout> {
        let parse = |source: &str| {
            KeyTemplate::parse(source)
                .map_err(|e| Error::malformed(format!("registered template `{source}`"), e))
        };
        Ok(Layout {
            table: self.table.clone(),
            kind: self.kind.clone(),
            kind_property: self.kind_property.clone(),
            indexes: self
                .indexes
                .iter()
                .map(|i| {
                    Ok(IndexLayout {
                        name: i.name.clone(),
                        table: i.table.clone(),
                        partition_key: parse(&i.partition_key)?,
                        row_key: parse(&i.row_key)?,
                        properties: i.properties.clone(),
                        sparse: i.sparse,
                    })
                })
                .collect::<Result<_>>()?,
            members: self
                .members
                .iter()
                .map(|m| {
                    Ok(MemberLayout {
                        name: m.name.clone(),
                        key: parse(&m.key)?,
                        table: m.table.clone(),
                        storage: m.storage,
                    })
                })
                .collect::<Result<_>>()?,
            denormalized: self
                .denormalized
                .iter()
                .map(|d| {
                    Ok(DenormalizedLayout {
                        property: d.property.clone(),
                        from_kind: d.from_kind.clone(),
                        table: d.table.clone(),
                        partition_key: parse(&d.partition_key)?,
                        row_key: parse(&d.row_key)?,
                        source_property: d.source_property.clone(),
                    })
                })
                .collect::<Result<_>>()?,
            declared: self
                .declared
                .iter()
                .map(|d| {
                    Ok(DeclaredLayout {
                        attribute: d.attribute.clone(),
                        name: d.name.clone(),
                        key: d.key.as_deref().map(parse).transpose()?,
                        table: d.table.clone(),
                        settings: d.settings.clone(),
                    })
                })
                .collect::<Result<_>>()?,
        })
    }

    /// Renders a template from a stored entity's properties.
    ///
    /// # Errors
    /// A key error naming the field; a limit violation.
    pub fn render(&self, entity: &Entity, template: &KeyTemplate, kind: KeyKind) -> Result<String> {
        let value_of = |field: &str| -> Option<&dyn KeyPart> {
            let property = self
                .fields
                .iter()
                .find(|(f, _)| f == field)
                .map_or(field, |(_, p)| p.as_str());
            entity
                .properties
                .get(property)
                .map(|v: &Value| v as &dyn KeyPart)
        };
        let key = template
            .render(value_of)
            .map_err(tablekit_core::Error::from)?;
        limits::check_key(kind, &key).map_err(tablekit_core::Error::from)?;
        Ok(key)
    }

    /// Records the schema (replacing an older record of the same table and kind).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn register<S: TableStore>(&self, store: &S) -> Result<()> {
        store.create_table_if_not_exists(SCHEMA_TABLE).await?;
        let mut entity = Entity::new(self.table.as_str(), self.kind.as_str());
        entity.properties.insert(
            SCHEMA_PROPERTY.to_owned(),
            Value::String(crate::error::json("a schema record", self)?),
        );
        store.insert_or_replace(SCHEMA_TABLE, entity).await?;
        Ok(())
    }

    /// Every registered schema, or those of one table.
    ///
    /// # Errors
    /// The store's errors; [`Error::Malformed`].
    pub async fn list<S: TableStore>(store: &S, table: Option<&str>) -> Result<Vec<Self>> {
        let query = match table {
            Some(t) => Query::with_filter(filter::partition_key().eq(t)),
            None => Query::new(),
        };
        let rows = match store.query_all(SCHEMA_TABLE, query).await {
            Ok(rows) => rows,
            Err(e) if e.kind() == ErrorKind::TableNotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        rows.into_iter()
            .map(|row| match row.properties.get(SCHEMA_PROPERTY) {
                Some(Value::String(json)) => serde_json::from_str(json).map_err(|e| {
                    Error::malformed(
                        format!("schema record {}/{}", row.partition_key, row.row_key),
                        e,
                    )
                }),
                _ => Err(Error::malformed(
                    format!("schema record {}/{}", row.partition_key, row.row_key),
                    "no Schema property",
                )),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::record::EntityRef;

    /// A record as stored before unique values, change events and expiry were
    /// declarations described by their attribute alone: `uniques`, `changes` and `expiry`
    /// in fields of their own.
    const STORED_WITH_UNIQUES: &str = r#"{"table":"Users","kind":"User","kind_property":"Kind","fields":[["team","Team"],["id","Id"],["email","Email"]],"indexes":[],"members":[],"denormalized":[],"uniques":[{"name":"email","key":"{email}","table":null}],"expiry":{"ttl":3600},"changes":"user-changes"}"#;

    #[test]
    fn a_record_stored_with_its_own_uniques_changes_and_expiry_reads_them_as_declarations() {
        let record: SchemaRecord = serde_json::from_str(STORED_WITH_UNIQUES).expect("reads");
        assert_eq!(record.changes(), Some("user-changes"));
        assert!(record.expires());
        assert_eq!(
            record.declared[2..],
            [DeclaredDecl {
                attribute: "unique".into(),
                name: "email".into(),
                key: Some("{email}".into()),
                table: None,
                settings: Vec::new(),
            }]
        );
        let written = serde_json::to_string(&record).expect("writes");
        assert!(!written.contains("uniques"), "{written}");
        assert!(!written.contains(r#""changes":"#), "{written}");
        assert!(!written.contains(r#""expiry":"#), "{written}");
        assert_eq!(
            serde_json::from_str::<SchemaRecord>(&written).expect("reads again"),
            record
        );

        let layout = record.layout().expect("lays out");
        assert_eq!(layout.changes(), Some("user-changes"));
        assert_eq!(layout.expiry(), Some(ExpiryLayout::Ttl(3600)));
        assert!(
            layout
                .follow_up(&KeyTemplate::parse("{team}").expect("a template"))
                .contains(&"change events: queue `user-changes`".to_owned())
        );
        assert!(layout.declares("email"));
        assert_eq!(
            layout.other_tables().into_iter().collect::<Vec<_>>(),
            ["UsersExpiry", "UsersUnique"]
        );
        let mut user = Entity::new("t", "1");
        user.properties
            .insert("Email".into(), Value::String("ada@example.com".into()));
        let render = |template: &KeyTemplate, kind| record.render(&user, template, kind);
        let targets = layout
            .targets(&EntityRef::new("Users", "t", "1"), &render, &|_| true, None)
            .expect("targets");
        let target = targets.iter().next().expect("one target");
        let unique = target
            .get::<crate::index::decl::unique::record::UniqueTarget>()
            .expect("a reservation");
        assert_eq!(
            unique.at,
            EntityRef::new("UsersUnique", "ada@example.com", "email")
        );
        assert_eq!(targets.len(), 1, "{targets:?}");
    }
}
