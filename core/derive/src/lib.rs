//! `#[derive(Entity)]`, `#[derive(EntityKind)]`, `#[derive(Projection)]` and
//! `#[derive(FieldEnum)]` for tablekit.
//! Applications use them through `tablekit` (feature `derive`, on by default).
//!
//! Each derive parses its attributes, checks the whole declaration (collecting every
//! mistake, each reported on the attribute or field at fault), then generates the trait
//! impls and a static [`Schema`](../tablekit/typed/struct.Schema.html) inside
//! `const _: () = { … }`, naming tablekit by absolute path (`::tablekit`, or the path given
//! by `#[entity(crate = "…")]`).

// Examples show the current API: a doctest that calls a deprecated item fails to
// compile. `allow(unused)` is rustdoc's default, which any `test(attr(..))` replaces.
#![doc(test(attr(allow(unused), deny(deprecated))))]

mod check;
mod decl;
mod entity;
mod field_enum;
mod generate;
mod internals;
mod kinds;
mod parse;
mod projection;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

/// Declares an entity type: its table, kind, version, key templates, fields, and the
/// indexes, index entities, unique values, blob fields, denormalised fields, wide storage
/// and data series the pattern modules keep; it also gives the type its typed primary key
/// (`table.primary().key("Sales").key(123)`) and typed properties (`Type::fields()`).
///
/// ```
/// use tablekit::prelude::*;
///
/// #[derive(Entity, Clone, Debug, PartialEq)]
/// #[entity(table = "Employees", kind = "Employee", version = 1,
///          partition_key = "{department}", row_key = "empid_{id:06}")]
/// #[index(name = "email", partition_key = "{department}", row_key = "email_{email}")]
/// #[index(name = "by_email", table = "EmployeesByEmail", partition_key = "email_{department}", row_key = "{email}")]
/// #[index_entity(name = "last_name", key = "{last_name}")]
/// struct Employee {
///     department: String,
///     id: u32,
///     first_name: String,
///     last_name: String,
///     age: i32,
///     email: String,
///     #[entity(blob)]
///     photo: Option<Vec<u8>>,
/// }
///
/// let jun = Employee {
///     department: "Sales".into(), id: 123, first_name: "Jun".into(),
///     last_name: "Cao".into(), age: 34, email: "jun@contoso.com".into(), photo: None,
/// };
/// assert_eq!(jun.row_key()?, "empid_000123");
/// assert_eq!(jun.index_keys("email")?, Some(("Sales".into(), "email_jun@contoso.com".into())));
/// let entity = jun.to_entity()?;
/// assert_eq!(entity.get("EntityKind"), Some(&Value::from("Employee")));
/// assert_eq!(Employee::from_entity(entity)?.value, jun);
/// # Ok::<_, tablekit::Error>(())
/// ```
///
/// # `#[entity(...)]` on the struct
///
/// | key | value | default |
/// | --- | --- | --- |
/// | `table` | the table name (3–63 letters and digits, starting with a letter) | required |
/// | `partition_key` | the PartitionKey template | required |
/// | `row_key` | the RowKey template | required |
/// | `kind` | the kind recorded on every entity | the type's name |
/// | `version` | the type's version, 1 or more | `1` |
/// | `kind_property` | the property holding the kind | `"EntityKind"` |
/// | `version_property` | the property holding the version | `"EntityVersion"` |
/// | `rename_all` | `"PascalCase"`, `"camelCase"`, `"snake_case"`, `"lowercase"` or `"UPPERCASE"`: how field names become property names | field names as written |
/// | `upcast` | a `fn(&mut Entity, from_version: u32) -> Result<(), E: Display>` that upgrades an older stored version before its fields are read | none: older versions are read as they are |
/// | `changes` | a queue: an `IndexedTable` publishes every committed insert, update and delete of the type there as a change event (through the outbox; `tablekit_workers::changes::Changes` consumes them typed) | no change events |
/// | `ttl` | a time to live (`"30d"`, `"12h"`, `"1d12h"`, `"90s"`): every write through an `IndexedTable` sets the entity to expire that long after it; reads leave expired entities out and the expiry sweeper deletes them | entities do not expire |
/// | `crate` | the path of the `tablekit` crate, for a renamed dependency (`crate = "tk"`) | `::tablekit` |
///
/// ```
/// // A renamed dependency: `crate = "tk"` tells the derive where tablekit is.
/// extern crate tablekit as tk;
/// use tk::prelude::*;
///
/// #[derive(tk::Entity)]
/// #[entity(crate = "tk", table = "Orders", kind = "order", version = 3,
///          partition_key = "{customer}", row_key = "order_{number:08}",
///          kind_property = "Type", version_property = "Schema", rename_all = "PascalCase")]
/// struct Order { customer: String, number: u32, total_cents: i64 }
///
/// let order = Order { customer: "c1".into(), number: 42, total_cents: 1250 };
/// let entity = order.to_entity()?;
/// assert_eq!((entity.partition_key.as_str(), entity.row_key.as_str()), ("c1", "order_00000042"));
/// assert_eq!(entity.get("Type"), Some(&Value::from("order")));
/// assert_eq!(entity.get("Schema"), Some(&Value::Int32(3)));
/// assert_eq!(entity.get("TotalCents"), Some(&Value::Int64(1250)));
/// # Ok::<_, tk::Error>(())
/// ```
///
/// ```
/// use tablekit::prelude::*;
///
/// // Version 2 split `name` into first and last name; version 1 entities are upgraded on read.
/// fn upgrade(entity: &mut Entity, from: u32) -> Result<(), String> {
///     if from == 1 {
///         let name = entity.remove("Name").and_then(|v| v.as_str().map(str::to_owned)).ok_or("no Name")?;
///         let (first, last) = name.split_once(' ').ok_or("Name has no space")?;
///         entity.set("FirstName", first);
///         entity.set("LastName", last);
///     }
///     Ok(())
/// }
///
/// #[derive(Entity, Debug, PartialEq)]
/// #[entity(table = "People", version = 2, partition_key = "people", row_key = "{id}",
///          rename_all = "PascalCase", upcast = upgrade)]
/// struct Person { id: String, first_name: String, last_name: String }
///
/// let old = Entity::new("people", "p1").with("Id", "p1").with("Name", "Ada Lovelace").with("EntityVersion", 1);
/// let read = Person::from_entity(old)?;
/// assert_eq!(read.upgraded_from, Some(1));
/// assert_eq!(read.last_name, "Lovelace");
/// # Ok::<_, tablekit::Error>(())
/// ```
///
/// # Key templates
///
/// Literal text with fields in braces: `{field}` (the value's text), `{field:06}` (an
/// unsigned integer zero padded to 6 digits, so the keys sort numerically), `{field:hash4}`
/// (the first 4 hex characters of the md5 of the value, to spread sequential keys across
/// partitions), `{field:ticks_desc}` (a `DateTime<Utc>` as inverted .NET ticks, 19 digits,
/// newest first), `{{` and `}}` for braces. Several fields with separators make compound
/// keys. Checked at compile time: unknown fields, formats a field's type does not take
/// (padding on a string or a signed integer), characters keys forbid (`/ \ # ?`, control
/// characters), fields that are optional, skipped, json or blob, and fields following a
/// variable-width field without a separator. Values are checked at run time against the
/// key rules.
///
/// ```
/// use tablekit::prelude::*;
/// use chrono::{TimeZone, Utc};
///
/// #[derive(Entity)]
/// #[entity(table = "Logins", partition_key = "{user_id:hash4}_{user_id}", row_key = "{at:ticks_desc}_{device}")]
/// struct Login { user_id: u64, at: chrono::DateTime<chrono::Utc>, device: String }
///
/// let login = Login { user_id: 42, at: Utc.with_ymd_and_hms(2024, 5, 1, 8, 0, 0).unwrap(), device: "pc".into() };
/// assert_eq!(login.partition_key()?, "a1d0_42");
/// assert_eq!(login.row_key()?.len(), 19 + 3);
/// # Ok::<_, tablekit::Error>(())
/// ```
///
/// # `#[entity(...)]` on a field
///
/// | key | effect |
/// | --- | --- |
/// | `rename = "Name"` | the property's name |
/// | `skip` | not stored; read back as `Default::default()` |
/// | `default`, `default = "path"` | a missing property reads as `Default::default()` or `path()` |
/// | `json` | a nested serde type stored as a JSON string property (`None`/`null` is an absent property) |
/// | `blob` | content for the blob store (`Vec<u8>`, `String` or an `Option` of them). `LargeTable` and `IndexedTable::with_blobs` write it to their blob store and keep its address in the entity; a plain `Table` has no blob store and stores it inline as a property (64 KiB at most) |
/// | `denormalized(from = "Kind", partition_key = "…", row_key = "…", property = "Prop", table = "…"?)` | a copy of property `Prop` of the `Kind` entity found at the keys the templates make from this entity's fields |
/// | `expires` | the instant the entity expires (`DateTime<Utc>`, or `Option<DateTime<Utc>>` where `None` never expires); reads leave expired entities out and the expiry sweeper deletes them. Excludes `ttl` |
///
/// ```
/// use tablekit::prelude::*;
///
/// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq, Default)]
/// struct Address { city: String }
///
/// #[derive(Entity, Debug, PartialEq)]
/// #[entity(table = "Departments", partition_key = "{name}", row_key = "department")]
/// struct Department {
///     name: String,
///     #[entity(rename = "Mgr")]
///     manager_id: u32,
///     #[entity(denormalized(from = "Employee", partition_key = "{name}",
///                           row_key = "empid_{manager_id:06}", property = "email"))]
///     manager_email: String,
///     #[entity(json, default)]
///     address: Address,
///     #[entity(skip)]
///     cached: Option<u64>,
/// }
///
/// let meta = Department::schema();
/// assert_eq!(meta.field("manager_id").unwrap().property, "Mgr");
/// let copy = meta.denormalized().next().unwrap();
/// assert_eq!((copy.name, copy.setting("property")), ("manager_email", Some("email")));
/// # Ok::<_, tablekit::Error>(())
/// ```
///
/// # `#[index(...)]`
///
/// A secondary index: a copy of the entity under other keys. `name`, `partition_key` and
/// `row_key` are required; `table` puts the copies in another table; `properties = ["a",
/// "b"]` limits what a copy carries; `when = path` (a `fn(&Self) -> bool`) makes the index
/// sparse. With no `table` and the entity's own partition template the copies live in the
/// entity's partition (written in its entity group transaction); their RowKeys must not be
/// able to collide with the entity's, which a distinct literal prefix guarantees.
///
/// Each index is also a typed handle, an associated constant named after it in upper
/// snake case (`managers` → `Staff::MANAGERS`, `byEmail` → `BY_EMAIL`), whose type
/// carries the types of its key's fields in template order (the PartitionKey template's,
/// then the RowKey template's). `IndexedTable::lookup(Staff::MANAGERS)` takes them one
/// `key(..)` at a time: a misspelled handle, a missing or extra field, or a value of
/// another type does not compile.
///
/// ```
/// use tablekit::prelude::*;
///
/// fn is_manager(e: &Staff) -> bool { e.grade >= 7 }
///
/// #[derive(Entity)]
/// #[entity(table = "Staff", partition_key = "{department}", row_key = "id_{id:06}")]
/// #[index(name = "managers", partition_key = "{department}", row_key = "mgr_{id:06}", properties = ["id"], when = is_manager)]
/// struct Staff { department: String, id: u32, grade: u8 }
///
/// let index = Staff::schema().index("managers").unwrap();
/// assert_eq!(index.table, None); // the entity's own table (and partition)
/// assert_eq!(index.template("row_key").map(|t| t.source()), Some("mgr_{id:06}"));
/// assert_eq!(index.setting("properties"), Some("id"));
/// assert!(index.flag("sparse"));
/// let clerk = Staff { department: "Ops".into(), id: 1, grade: 3 };
/// assert_eq!(clerk.index_keys("managers")?, None);
/// assert_eq!(Staff::MANAGERS.name(), "managers");
/// # Ok::<_, tablekit::Error>(())
/// ```
///
/// # `#[index_entity(...)]`
///
/// An index entity: for each value of `key` (a template over the fields), the list of ids
/// of the entities that have it. `storage = "partition"` (default: in the entity's
/// partition, updated in its entity group transaction), `"table"` (in another partition, or
/// in `table`, kept by the worker) or `"blob"` (one blob per value, kept by the worker).
/// Each id list is a typed handle as an index is (`Person::LAST_NAME`), read with
/// `IndexedTable::list`.
///
/// ```
/// use tablekit::prelude::*;
///
/// #[derive(Entity)]
/// #[entity(table = "People", partition_key = "{team}", row_key = "p_{id}")]
/// #[index_entity(name = "last_name", key = "{last_name}", storage = "table", table = "PeopleByLastName")]
/// struct Person { team: String, id: String, last_name: String }
///
/// let meta = Person::schema().index_entity("last_name").unwrap();
/// assert_eq!(meta.setting("storage"), Some("table"));
/// assert_eq!(meta.table, Some("PeopleByLastName"));
/// assert_eq!(Person::LAST_NAME.name(), "last_name");
/// ```
///
/// # `#[unique(...)]`
///
/// A value no two entities of the type may hold at once, across partitions: `key` is a
/// template over the fields (rendered with the PartitionKey rules), `name` names it among
/// the type's indexes, and `table` names the reservation table (default
/// `<table>Unique`). An `IndexedTable` reserves the value before it writes the entity, and
/// refuses a value another entity holds with `ValueTaken`.
///
/// ```
/// use tablekit::prelude::*;
///
/// #[derive(Entity)]
/// #[entity(table = "Users", partition_key = "{team}", row_key = "u_{id}")]
/// #[unique(name = "email", key = "{email}")]
/// struct User { team: String, id: String, email: String }
///
/// let user = User { team: "a".into(), id: "1".into(), email: "ada@example.com".into() };
/// assert_eq!(user.unique_key("email")?, "ada@example.com");
/// assert_eq!(User::schema().declared("unique", "email").unwrap().table, None);
/// # Ok::<_, tablekit::Error>(())
/// ```
///
/// # `#[count(...)]`
///
/// For each value of `key` (a template over the fields, rendered with the PartitionKey
/// rules), the number of entities of the type that have it, kept without a scan by an
/// `IndexedTable` and its worker: `name` names it among the type's declarations,
/// `shards` spreads a value over that many partitions (1 to 64, default 1; summed on
/// read), and `table` names the counts' table (default `<table>Counts`). The derive makes
/// a typed handle named after it (`by_status` → `BY_STATUS`) for
/// `IndexedTable::count(..).key(..).get()`.
///
/// ```
/// use tablekit::prelude::*;
///
/// #[derive(Entity)]
/// #[entity(table = "Orders", partition_key = "{customer}", row_key = "{id}")]
/// #[count(name = "by_status", key = "{status}", shards = 4)]
/// struct Order { customer: String, id: String, status: String }
///
/// let count = Order::schema().declared("count", "by_status").unwrap();
/// assert_eq!(count.setting("shards"), Some("4"));
/// assert_eq!(Order::BY_STATUS.name(), "by_status");
/// ```
///
/// # `#[feed]`
///
/// A change feed: every committed write of the type through an `IndexedTable` records its
/// change in its own transaction, the relay orders the changes into a log kept for
/// `retention` (default `"7d"`), divided into `shares` (1 to 1024, default 16), and named
/// groups of consumers read it from the beginning, a time or a checkpoint
/// (`tablekit::patterns::feed`, `tablekit::workers::feed::Feed`). `#[feed]` alone takes
/// the defaults.
///
/// ```
/// use tablekit::prelude::*;
///
/// #[derive(Entity)]
/// #[entity(table = "Orders", partition_key = "{customer}", row_key = "{id}")]
/// #[feed(retention = "30d", shares = 8)]
/// struct Order { customer: String, id: String, total: i64 }
///
/// let feed = Order::schema().declared("feed", "feed").unwrap();
/// assert_eq!(feed.setting("retention"), Some("2592000"));
/// assert_eq!(feed.setting("shares"), Some("8"));
/// ```
///
/// # `#[wide]`
///
/// A type with more properties than one entity holds (252, less the 8 tablekit keeps
/// beside them: 244 for the fields). An `IndexedTable` stores each value as chunks of its
/// partition — chunk 0 at the RowKey, chunk `n` at `<RowKey>~<n:03>` — written in the
/// write's one entity group transaction, and reads it back whole.
///
/// - On the struct, `#[wide]` or `#[wide(chunks = N)]`: the most chunks one value may take,
///   2 to 90 (default 90; the chunks share one transaction of 100 operations with the
///   write's own).
/// - On a field, `#[wide]` (no arguments) spreads a `BTreeMap<String, V>` over one property
///   per entry, named `<property>_<key>`; a type with such a field is wide without the
///   struct attribute. Such a field cannot also be `skip`, `json` or `blob`.
///
/// The budget is checked at compile time: a type that is not wide and stores more than 244
/// properties does not compile, nor does a wide type whose fixed fields need more chunks
/// than it allows (244 properties in the first chunk, 250 in each further one); both
/// messages give the numbers. A map's size is known when it is written: a value needing
/// more chunks than the type allows is refused before any I/O. An index on a wide type
/// names the `properties` its copies carry (a whole wide value does not fit one copy).
///
/// ```
/// use std::collections::BTreeMap;
/// use tablekit::prelude::*;
///
/// #[derive(Entity, Clone, Debug, PartialEq)]
/// #[entity(table = "Sensors", partition_key = "{site}", row_key = "{sensor}")]
/// #[index(name = "by_model", table = "SensorsByModel", partition_key = "{model}",
///         row_key = "{site},{sensor}", properties = ["model"])]
/// #[wide(chunks = 8)]
/// struct Sensor {
///     site: String,
///     sensor: String,
///     model: String,
///     #[wide]
///     readings: BTreeMap<String, f64>,
/// }
///
/// let sensor = Sensor {
///     site: "north".into(), sensor: "s1".into(), model: "m7".into(),
///     readings: BTreeMap::from([("temp".to_owned(), 20.5), ("humidity".to_owned(), 0.4)]),
/// };
/// let entity = sensor.to_entity()?;
/// assert_eq!(entity.get("readings_temp"), Some(&Value::Double(20.5)));
/// assert_eq!(Sensor::schema().wide().map(|w| w.chunks), Some(8));
/// assert_eq!(Sensor::from_entity(entity)?.value, sensor);
/// # Ok::<_, tablekit::Error>(())
/// ```
///
/// # `#[series(...)]`
///
/// A data series: one entity per span with one point per step (24 hourly counters a day,
/// 365 daily values a year), which `IndexedTable::add` adds to, `span` reads and `points`
/// reads between two instants. Spans are aligned on the Unix epoch (a day starts at
/// midnight UTC).
///
/// | key | value | default |
/// | --- | --- | --- |
/// | `start` | the `DateTime<Utc>` field holding the span's start; part of the RowKey template, so spans sort by time | required |
/// | `points` | the `Points<V>` field (V: `i64`, `i32` or `f64`), stored one property per point (`views_0000`, `views_0001`, …) | required |
/// | `every` | the step (`"1h"`, `"15m"`, `"1d"`), at least one second | required |
/// | `span` | one entity's span, a whole number of steps, at most 100,000 points | required |
/// | `spill` | where the points go when they do not fit one entity: `"chunks"` (chunks of the partition, as `#[wide]`) or `"blob"` (one value in the table's blob store, `IndexedTableOptions::blobs`) | none: the points fit one entity |
///
/// The budget is checked at compile time: a span whose points, with the other fields, pass
/// 244 properties or 1 MiB without `spill`, or need more than 90 chunks or one
/// transaction's 4 MiB with `spill = "chunks"`, does not compile, and the message gives
/// the numbers and what to declare.
///
/// ```
/// use chrono::{DateTime, TimeZone, Utc};
/// use tablekit::prelude::*;
/// use tablekit::typed::{Points, SeriesType};
///
/// #[derive(Entity, Clone, Debug, Default, PartialEq)]
/// #[entity(table = "PageViews", partition_key = "{page}", row_key = "{day}")]
/// #[series(start = "day", points = "views", every = "1h", span = "1d")]
/// struct DailyViews {
///     page: String,
///     day: DateTime<Utc>,
///     views: Points<i64>,
/// }
///
/// assert_eq!(DailyViews::POINTS, 24);
/// assert_eq!(DailyViews::schema().series().map(|s| s.every_seconds), Some(3600));
///
/// let mut day = DailyViews {
///     page: "home".into(),
///     day: Utc.with_ymd_and_hms(2026, 11, 26, 0, 0, 0).unwrap(),
///     views: Points::zeros(24),
/// };
/// *day.views.get_mut(14).unwrap() += 5; // 14:00 to 15:00
/// let entity = day.to_entity()?;
/// assert_eq!(entity.get("views_0014"), Some(&Value::Int64(5)));
/// assert_eq!(DailyViews::from_entity(entity)?.value, day);
/// # Ok::<_, tablekit::Error>(())
/// ```
///
/// # Typed primary keys
///
/// The derive gives the type its key's field types in order, the PartitionKey template's
/// fields then the RowKey template's ([`EntityType::Key`]). A typed table's `primary()`
/// (on `Table` and `IndexedTable`) takes them one `key(..)` at a time, each a value of its
/// field's type, and renders the keys from the templates: with every field given it reads
/// (`get`), updates (`update`, below) or deletes (`delete`) one entity; with the
/// PartitionKey's fields it reads the partition (`all`, `stream`, `count_scan`); with
/// `range(lo, hi)` the entities whose next field lies in `lo ..= hi`. A missing or extra
/// field, or a value of another type (`key("123")` for a `u32` id), does not compile; a
/// string value holding its separator is refused before any I/O. `get_many` reads many
/// typed keys at once, in the order asked.
///
/// [`EntityType::Key`]: ../tablekit/typed/trait.EntityType.html#associatedtype.Key
///
/// ```
/// use tablekit::prelude::*;
///
/// #[derive(Entity, Clone, Debug, PartialEq)]
/// #[entity(table = "Employees", partition_key = "{department}", row_key = "empid_{id:06}")]
/// struct Employee { department: String, id: u32, name: String }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let employees = Table::<Employee, _>::new(MemoryStore::new());
/// employees.create().await?;
/// for (id, name) in [(1, "Ada"), (2, "Jun"), (3, "Ken")] {
///     employees.insert(&Employee { department: "Sales".into(), id, name: name.into() }).await?;
/// }
/// let jun = employees.primary().key("Sales").key(2).get().await?.expect("stored");
/// assert_eq!((jun.row_key.as_str(), jun.value.name.as_str()), ("empid_000002", "Jun"));
/// assert_eq!(employees.primary().key("Sales").all().await?.len(), 3);
/// assert_eq!(employees.primary().key("Sales").range(2, 3).count_scan().await?, 2);
/// let found = employees
///     .get_many([employees.primary().key("Sales").key(3), employees.primary().key("Sales").key(9)])
///     .await?;
/// assert_eq!(found.iter().map(Option::is_some).collect::<Vec<_>>(), [true, false]);
/// employees.primary().key("Sales").key(1).delete(IfMatch::Any).await?;
/// # Ok::<_, tablekit::Error>(())
/// # }).unwrap();
/// ```
///
/// # Typed properties
///
/// `Type::fields()` has one typed property per stored field (`Order::fields().total`),
/// from which filters, partial updates and projections are built on `primary()`:
///
/// - a comparison (`eq`, `ne`, `gt`, `ge`, `lt`, `le`) takes a value of the field's type
///   (a `&str` for a `String`, a `U` for an `Option<U>`, an enum variant for a
///   `FieldEnum`); comparisons join with `&`, `|` and `!`, and `filter(..)` adds them to a
///   read of the partition, a prefix or a range;
/// - `update().set(field, value)…apply(if_match)` writes only the properties set (an
///   `Option` set to `None` loses its property), through `IndexedTable`'s one write path
///   so indexes, unique values and change events follow; key fields cannot be set (a key
///   change is a delete and an insert);
/// - `select((f.id, f.total))` reads the chosen fields alone (`$select`) into a tuple.
///
/// A misspelt field, a literal of another type, a condition over another type's fields
/// or a key field given to `set` does not compile. For property names chosen at run time,
/// `tablekit::core::filter::property_named` builds the untyped form.
///
/// ```
/// use tablekit::prelude::*;
///
/// #[derive(FieldEnum, Clone, Copy, Debug, PartialEq)]
/// #[field_enum(rename_all = "snake_case")]
/// enum Status { Placed, OnHold, Shipped }
///
/// #[derive(Entity, Clone, Debug, PartialEq)]
/// #[entity(table = "Orders", partition_key = "{customer}", row_key = "o_{id:06}")]
/// struct Order { customer: String, id: u32, total: u32, status: Status, note: Option<String> }
///
/// let f = Order::fields();
/// assert_eq!(f.total.property(), "total");
/// let condition = f.total.ge(20) & f.status.eq(Status::OnHold);
/// assert_eq!(condition.into_filter()?.to_string(), "total ge 20L and status eq 'on_hold'");
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let orders = Table::<Order, _>::new(MemoryStore::new());
/// orders.create().await?;
/// for (id, total, status) in [(1, 10, Status::Placed), (2, 20, Status::OnHold), (3, 30, Status::Placed)] {
///     orders.insert(&Order { customer: "alice".into(), id, total, status, note: None }).await?;
/// }
/// let big = orders.primary().key("alice").filter(f.total.ge(20) & !f.status.eq(Status::OnHold)).all().await?;
/// assert_eq!(big.iter().map(|o| o.value.id).collect::<Vec<_>>(), [3]);
///
/// orders.primary().key("alice").key(1).update()
///     .set(f.status, Status::Shipped)
///     .set(f.note, "gift")
///     .apply(IfMatch::Any)
///     .await?;
/// let rows = orders.primary().key("alice").filter(f.total.lt(20)).select((f.id, f.status, f.note)).await?;
/// assert_eq!(rows, [(1, Status::Shipped, Some("gift".to_owned()))]);
/// # Ok::<_, tablekit::Error>(())
/// # }).unwrap();
/// # Ok::<_, tablekit::Error>(())
/// ```
#[proc_macro_derive(
    Entity,
    attributes(entity, index, index_entity, unique, wide, series, count, feed)
)]
pub fn derive_entity(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    entity::expand(&input)
        .unwrap_or_else(|errors| errors)
        .into()
}

/// Reads the entity types that share a table into one enum, by the kind each entity
/// records: the heterogeneous-table pattern.
///
/// ```
/// use tablekit::prelude::*;
///
/// #[derive(Entity, Debug, PartialEq)]
/// #[entity(table = "Org", partition_key = "{department}", row_key = "emp_{id}")]
/// struct Employee { department: String, id: String }
///
/// #[derive(Entity, Debug, PartialEq)]
/// #[entity(table = "Org", partition_key = "{name}", row_key = "dept")]
/// struct Department { name: String, employee_count: i32 }
///
/// #[derive(EntityKind, Debug, PartialEq)]
/// enum Org {
///     Employee(Employee),
///     Department(Department),
/// }
///
/// let entity = Department { name: "Sales".into(), employee_count: 3 }.to_entity()?;
/// assert!(matches!(Org::from_entity(entity)?.value, Org::Department(_)));
/// assert_eq!(Org::kinds(), ["Employee", "Department"]);
/// # Ok::<_, tablekit::Error>(())
/// ```
///
/// Every variant must hold one entity type; all of them live in the same table and record
/// their kind in the same property, with distinct kinds (checked at compile time). An
/// entity of a kind no variant holds reads as an error naming the kinds expected.
/// `#[entity(crate = "…")]` names a renamed `tablekit`.
#[proc_macro_derive(EntityKind, attributes(entity))]
pub fn derive_entity_kind(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    kinds::entity_kind(&input)
        .unwrap_or_else(|errors| errors)
        .into()
}

/// A typed projection: the subset of an entity's properties a query selects
/// (`Table::select`). Fields take `rename`, `skip`, `default` and `json` as in
/// `#[derive(Entity)]`; the struct takes `rename_all` and `crate`.
///
/// ```
/// use tablekit::prelude::*;
///
/// #[derive(Projection, Debug, PartialEq)]
/// #[entity(rename_all = "PascalCase")]
/// struct Name { first_name: String, last_name: String }
///
/// assert_eq!(Name::PROPERTIES, ["FirstName", "LastName"]);
/// ```
#[proc_macro_derive(Projection, attributes(entity))]
pub fn derive_projection(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    projection::expand(&input)
        .unwrap_or_else(|errors| errors)
        .into()
}

/// A unit enum as a field and a key part: stored as one property, and usable in key
/// templates and as a look-up's key value.
///
/// ```
/// use tablekit::prelude::*;
///
/// #[derive(FieldEnum, Clone, Copy, Debug, PartialEq)]
/// #[field_enum(rename_all = "snake_case")]
/// enum Status { Placed, OnHold, Shipped }
///
/// #[derive(Entity, Debug, PartialEq)]
/// #[entity(table = "Orders", partition_key = "{status}", row_key = "{id:06}")]
/// struct Order { status: Status, id: u32, previous: Option<Status> }
///
/// let order = Order { status: Status::OnHold, id: 7, previous: Some(Status::Placed) };
/// assert_eq!(order.partition_key()?, "on_hold");
/// let entity = order.to_entity()?;
/// assert_eq!(entity.get("status"), Some(&Value::from("on_hold")));
/// assert_eq!(entity.get("previous"), Some(&Value::from(Status::Placed)));
/// assert_eq!(Order::from_entity(entity)?.value, order);
///
/// assert_eq!(Status::OnHold.as_str(), "on_hold");
/// assert_eq!("shipped".parse::<Status>(), Ok(Status::Shipped));
/// // A filter literal: in a typed condition, and as a `Value` in the untyped form.
/// let shipped = Order::fields().status.eq(Status::Shipped);
/// let by_name = tablekit::core::filter::property_named("status").eq(Status::Shipped);
/// assert_eq!(shipped.into_filter()?.to_string(), by_name.to_string());
/// # Ok::<_, tablekit::Error>(())
/// ```
///
/// Every variant is a unit variant and the enum has no generics. What is stored:
///
/// - by default (`repr = "string"`), an `Edm.String` holding the variant's name, after
///   `rename_all` and `rename`; names are distinct and not empty (checked at compile
///   time). The enum gets `as_str()` (the stored name), `Display` and `FromStr` (the
///   stored name back);
/// - with `repr = "int"`, an `Edm.Int32` holding the discriminant: the literal written
///   (`Placed = 1`, negative ones too) or, as Rust numbers them, one more than the
///   previous variant's (the first is 0). A discriminant is an integer literal within
///   `i32`, checked at compile time. `FromStr` reads the decimal text, zero padded or not
///   (a key's text). Reads accept an `Int64` that another client wrote.
///
/// Either way `From<Enum>` and `From<&Enum>` give the stored [`Value`], so the enum is a
/// filter literal, and `Option<Enum>` is an optional field (`None` is an absent property).
/// A stored value no variant names (a string of another spelling, an unknown number) is a
/// read error naming the property, the value, the entity's keys and the values expected
/// (`FieldProblem::UnknownVariant`), unless a variant is marked `other`: it takes them
/// (and is written back as its own value).
///
/// # In keys
///
/// The enum implements `KeyPart`, so it may be a key template's field (`{status}`) and a
/// typed look-up's key value (`orders.lookup(Order::BY_STATUS).key(Status::Placed)`).
///
/// - A string enum's key text is its stored name: keys sort by name, not by declaration
///   order. The separator after `{status}` must sort below every character of every name
///   (checked at compile time): `{status},{id}` compiles, and `{status}_{id}` compiles
///   only when no name holds `_` or a character below it (`snake_case` names hold `_`;
///   digits and upper-case letters sort below it).
/// - An int enum's key text is the discriminant's decimal text, as for an integer field
///   and as for the stored `Int32` (so a key rendered from the stored entity, as the
///   audit's backfill does, is the same). To sort keys by discriminant, pad it:
///   `{status:02}` (an enum without negative discriminants implements `PaddedKeyPart`);
///   a range over an unpadded int enum followed by more of the key is refused, as for an
///   integer. A separator after it must sort below `0` (below `-` when a discriminant is
///   negative).
///
/// ```
/// use tablekit::prelude::*;
///
/// #[derive(FieldEnum, Clone, Copy, Debug, PartialEq)]
/// #[field_enum(repr = "int")]
/// enum Priority { Low = 1, Normal = 5, Urgent = 9, #[field_enum(other)] Unknown = 0 }
///
/// #[derive(Entity, Debug, PartialEq)]
/// #[entity(table = "Tickets", partition_key = "tickets", row_key = "{priority:02},{id}")]
/// struct Ticket { priority: Priority, id: String }
///
/// let ticket = Ticket { priority: Priority::Urgent, id: "t1".into() };
/// assert_eq!(ticket.row_key()?, "09,t1");
/// assert_eq!(ticket.to_entity()?.get("priority"), Some(&Value::Int32(9)));
///
/// // Normal to Urgent, in order of priority.
/// let bounds = Ticket::schema().row_key.range(&[], &Priority::Normal, &Priority::Urgent)?;
/// assert_eq!(bounds.start, "05");
///
/// // A number no variant has reads as the `other` variant.
/// let newer = Entity::new("tickets", "07,t2").with("id", "t2").with("priority", 7);
/// assert_eq!(Ticket::from_entity(newer)?.value.priority, Priority::Unknown);
/// # Ok::<_, tablekit::Error>(())
/// ```
///
/// # `#[field_enum(...)]` on the enum
///
/// | key | value | default |
/// | --- | --- | --- |
/// | `repr` | `"string"` (the variant's name, `Edm.String`) or `"int"` (the discriminant, `Edm.Int32`) | `"string"` |
/// | `rename_all` | `"snake_case"`, `"kebab-case"`, `"lowercase"`, `"UPPERCASE"`, `"camelCase"`, `"PascalCase"` or `"SCREAMING_SNAKE_CASE"`: how variant names become stored names (string enums only) | names as written |
/// | `crate` | the path of the `tablekit` crate, for a renamed dependency | `::tablekit` |
///
/// # `#[field_enum(...)]` on a variant
///
/// | key | effect |
/// | --- | --- |
/// | `rename = "name"` | the stored name (string enums only) |
/// | `other` | reads every stored value no variant names (at most one variant) |
///
/// The derive adds `as_str` and `Display` to a string enum; an enum that declares its own
/// cannot derive `FieldEnum` as a string enum.
///
/// [`Value`]: ../tablekit/enum.Value.html
#[proc_macro_derive(FieldEnum, attributes(field_enum))]
pub fn derive_field_enum(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    field_enum::expand(&input)
        .unwrap_or_else(|errors| errors)
        .into()
}
