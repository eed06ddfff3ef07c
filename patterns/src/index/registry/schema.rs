//! The schema registry: each indexed table records, in the `TablekitSchemas` table, what
//! its entity types declare (each declaration described by its attribute, templates as
//! text). The audit
//! and backfill read it to work on a table without the application's entity types, and
//! writers read it to find the types that copy their properties.

use serde::{Deserialize, Serialize};
use tablekit_core::limits::{self, KeyKind};
use tablekit_core::typed::{FieldStorage, KeyPart, KeyTemplate, Schema};
use tablekit_core::{Entity, ErrorKind, Query, TableStore, Value, filter};

use super::record::{DeclaredLayout, ExpiryLayout, Layout, MemberStorage};
use crate::error::{Error, Result};
use crate::index::record::lays_out;

/// The table holding the registry.
pub const SCHEMA_TABLE: &str = "TablekitSchemas";
const SCHEMA_PROPERTY: &str = "Schema";

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
    /// What the type declares, each described by its attribute (`index`,
    /// `index_entity`, `denormalized`, `unique`, `count`, `expiry`, `changes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declared: Vec<DeclaredDecl>,
}

/// A schema record as stored by any version: the indexes, index entities, denormalised
/// fields, expiry, change events' queue and unique values of a record written before
/// they were declarations described by their attribute are read from their own fields
/// (`indexes`, `members`, `denormalized`, `expiry`, `changes`, `uniques`) into
/// `declared`, in that order.
#[derive(Deserialize)]
struct StoredSchemaRecord {
    table: String,
    kind: String,
    kind_property: String,
    fields: Vec<(String, String)>,
    #[serde(default)]
    indexes: Vec<StoredIndex>,
    #[serde(default)]
    members: Vec<StoredMember>,
    #[serde(default)]
    denormalized: Vec<StoredDenormalized>,
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

/// A secondary index as records stored it in their own field.
#[derive(Deserialize)]
struct StoredIndex {
    name: String,
    table: Option<String>,
    partition_key: String,
    row_key: String,
    properties: Option<Vec<String>>,
    sparse: bool,
}

/// An index entity as records stored it in their own field.
#[derive(Deserialize)]
struct StoredMember {
    name: String,
    key: String,
    table: Option<String>,
    storage: MemberStorage,
}

/// A denormalised field as records stored it in their own field.
#[derive(Deserialize)]
struct StoredDenormalized {
    property: String,
    from_kind: String,
    table: Option<String>,
    partition_key: String,
    row_key: String,
    source_property: String,
}

impl StoredIndex {
    fn declared(self) -> DeclaredDecl {
        let mut settings = Vec::new();
        if let Some(properties) = self.properties {
            settings.push(("properties".to_owned(), properties.join(",")));
        }
        if self.sparse {
            settings.push(("sparse".to_owned(), "true".to_owned()));
        }
        DeclaredDecl {
            attribute: "index".to_owned(),
            name: self.name,
            key: None,
            templates: vec![
                ("partition_key".to_owned(), self.partition_key),
                ("row_key".to_owned(), self.row_key),
            ],
            table: self.table,
            settings,
        }
    }
}

impl StoredMember {
    fn declared(self) -> DeclaredDecl {
        DeclaredDecl {
            attribute: "index_entity".to_owned(),
            name: self.name,
            key: Some(self.key),
            templates: Vec::new(),
            table: self.table,
            settings: vec![("storage".to_owned(), self.storage.setting().to_owned())],
        }
    }
}

impl StoredDenormalized {
    fn declared(self) -> DeclaredDecl {
        DeclaredDecl {
            attribute: "denormalized".to_owned(),
            name: self.property.clone(),
            key: None,
            templates: vec![
                ("partition_key".to_owned(), self.partition_key),
                ("row_key".to_owned(), self.row_key),
            ],
            table: self.table,
            settings: vec![
                ("field".to_owned(), self.property),
                ("from".to_owned(), self.from_kind),
                ("property".to_owned(), self.source_property),
            ],
        }
    }
}

impl From<StoredSchemaRecord> for SchemaRecord {
    fn from(stored: StoredSchemaRecord) -> Self {
        let uniques = stored.uniques.into_iter().map(|u| DeclaredDecl {
            attribute: "unique".to_owned(),
            name: u.name,
            key: Some(u.key),
            templates: Vec::new(),
            table: u.table,
            settings: Vec::new(),
        });
        let expiry = stored.expiry.map(|expiry| DeclaredDecl {
            attribute: "expiry".to_owned(),
            name: "expiry".to_owned(),
            key: None,
            templates: Vec::new(),
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
            templates: Vec::new(),
            table: None,
            settings: vec![("queue".to_owned(), queue)],
        });
        SchemaRecord {
            table: stored.table,
            kind: stored.kind,
            kind_property: stored.kind_property,
            fields: stored.fields,
            declared: (stored.indexes.into_iter().map(StoredIndex::declared))
                .chain(stored.members.into_iter().map(StoredMember::declared))
                .chain(
                    stored
                        .denormalized
                        .into_iter()
                        .map(StoredDenormalized::declared),
                )
                .chain(expiry)
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
    /// Its other key templates, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub templates: Vec<(String, String)>,
    /// The table it keeps its entities in, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// Its other settings, as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settings: Vec<(String, String)>,
}

impl DeclaredDecl {
    /// A setting by key.
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
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
            declared: layout
                .declared
                .iter()
                .filter(|d| lays_out(&d.attribute).is_ok_and(|l| l.recorded()))
                .map(|d| DeclaredDecl {
                    attribute: d.attribute.clone(),
                    name: d.name.clone(),
                    key: d.key.as_ref().map(|k| k.source().to_owned()),
                    templates: d
                        .templates
                        .iter()
                        .map(|(n, t)| (n.clone(), t.source().to_owned()))
                        .collect(),
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
            .and_then(|d| d.setting("queue"))
    }

    /// The layout, with the templates parsed and each declaration checked by the
    /// declaration its attribute names.
    ///
    /// # Errors
    /// [`Error::Malformed`] for a template that does not parse, a declaration no
    /// registered declaration has the attribute of, or one missing a template or
    /// setting its declaration reads (or holding one that does not parse).
    pub fn layout(&self) -> Result<Layout> {
        let parse = |source: &str| {
            KeyTemplate::parse(source)
                .map_err(|e| Error::malformed(format!("registered template `{source}`"), e))
        };
        Ok(Layout {
            table: self.table.clone(),
            kind: self.kind.clone(),
            kind_property: self.kind_property.clone(),
            declared: self
                .declared
                .iter()
                .map(|d| {
                    let declared = DeclaredLayout {
                        attribute: d.attribute.clone(),
                        name: d.name.clone(),
                        key: d.key.as_deref().map(parse).transpose()?,
                        templates: d
                            .templates
                            .iter()
                            .map(|(n, t)| Ok((n.clone(), parse(t)?)))
                            .collect::<Result<_>>()?,
                        table: d.table.clone(),
                        settings: d.settings.clone(),
                    };
                    lays_out(&declared.attribute)?.check(&declared)?;
                    Ok(declared)
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
                templates: Vec::new(),
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

    /// A record as stored before indexes, index entities and denormalised fields were
    /// declarations described by their attribute: in fields of their own.
    const STORED_WITH_INDEXES: &str = r#"{"table":"Orders","kind":"Order","kind_property":"Kind","fields":[["customer","Customer"],["id","Id"],["status","Status"],["city","City"],["shop","Shop"]],"indexes":[{"name":"by_status","table":null,"partition_key":"s_{status}","row_key":"{id}","properties":["Status"],"sparse":true},{"name":"by_id","table":null,"partition_key":"{customer}","row_key":"id_{id}","properties":null,"sparse":false}],"members":[{"name":"city","key":"{city}","table":"OrderCities","storage":"table"}],"denormalized":[{"property":"ShopName","from_kind":"Shop","table":"Shops","partition_key":"{shop}","row_key":"shop","source_property":"Name"}]}"#;

    #[test]
    fn a_record_stored_with_its_own_indexes_members_and_denormalized_reads_them_as_declarations() {
        let record: SchemaRecord = serde_json::from_str(STORED_WITH_INDEXES).expect("reads");
        let attributes: Vec<&str> = record
            .declared
            .iter()
            .map(|d| d.attribute.as_str())
            .collect();
        assert_eq!(
            attributes,
            ["index", "index", "index_entity", "denormalized"]
        );
        let written = serde_json::to_string(&record).expect("writes");
        assert!(!written.contains(r#""indexes":"#), "{written}");
        assert!(!written.contains(r#""members":"#), "{written}");
        assert_eq!(
            serde_json::from_str::<SchemaRecord>(&written).expect("reads again"),
            record
        );

        let layout = record.layout().expect("lays out");
        let index_named = |name| {
            let declared = layout.declared("index", name).expect("declared");
            crate::index::record::IndexLayout::of(declared).expect("reads")
        };
        let index = index_named("by_status");
        assert_eq!(index.partition_key.source(), "s_{status}");
        assert_eq!(index.properties, Some(vec!["Status".to_owned()]));
        assert!(index.sparse);
        let whole = index_named("by_id");
        assert_eq!((whole.properties, whole.sparse), (None, false));
        assert_eq!(
            layout.follow_up(&KeyTemplate::parse("{customer}").expect("a template")),
            [
                "index `by_status`: copies in other partitions of `Orders`",
                "index entity `city`: id lists in table `OrderCities`",
                "denormalized `ShopName` from `Shop`: its source in table `Shops`",
            ]
        );
        assert_eq!(
            layout.other_tables().into_iter().collect::<Vec<_>>(),
            ["OrderCities"]
        );

        let order = Entity::new("c1", "7")
            .with("Status", "placed")
            .with("City", "Oslo")
            .with("Shop", "s9")
            .with("Id", "7")
            .with("Customer", "c1");
        let render = |template: &KeyTemplate, kind| record.render(&order, template, kind);
        let source = EntityRef::new("Orders", "c1", "7");
        let all = layout
            .targets(&source, &render, &|_| true, None)
            .expect("targets");
        assert_eq!(all.len(), 4, "{all:?}");
        let sparse_out = layout
            .targets(&source, &render, &|index| index != "by_status", None)
            .expect("targets");
        assert_eq!(
            sparse_out.len(),
            3,
            "a sparse index leaves it out: {sparse_out:?}"
        );
        let only = layout
            .targets(&source, &render, &|_| true, Some("city"))
            .expect("targets");
        let member = only
            .iter()
            .next()
            .and_then(|t| t.get::<crate::index::record::MemberTarget>())
            .expect("the id list's membership");
        assert_eq!(
            (member.table.as_str(), member.value.as_str(), member.storage),
            ("OrderCities", "Oslo", MemberStorage::Table)
        );
    }

    #[test]
    fn a_declaration_whose_setting_does_not_parse_is_refused_when_laid_out() {
        for (attribute, settings) in [
            ("expiry", vec![("ttl", "abc")]),
            ("wide", vec![("chunks", "many")]),
            ("index_entity", vec![("storage", "drawer")]),
            ("count", vec![("shards", "0")]),
        ] {
            let record = SchemaRecord {
                table: "T".into(),
                kind: "K".into(),
                kind_property: "Kind".into(),
                fields: Vec::new(),
                declared: vec![DeclaredDecl {
                    attribute: attribute.into(),
                    name: "n".into(),
                    key: Some("{id}".into()),
                    templates: Vec::new(),
                    table: None,
                    settings: settings
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                }],
            };
            let error = record.layout().expect_err(attribute);
            assert!(
                matches!(error, Error::Malformed { .. }),
                "{attribute}: {error:?}"
            );
        }
        let unknown = SchemaRecord {
            table: "T".into(),
            kind: "K".into(),
            kind_property: "Kind".into(),
            fields: Vec::new(),
            declared: vec![DeclaredDecl {
                attribute: "index".into(),
                name: "no_templates".into(),
                key: None,
                templates: Vec::new(),
                table: None,
                settings: Vec::new(),
            }],
        };
        assert!(matches!(unknown.layout(), Err(Error::Malformed { .. })));
    }
}
