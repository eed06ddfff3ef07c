//! Typed primary keys: reads and deletes of a table's own entities by their key fields,
//! without a hand-built key string. `#[derive(Entity)]` gives every entity type its key's
//! field types in order ([`EntityType::Key`]: the PartitionKey template's fields, then the
//! RowKey template's), so a value of another type, or one too many, does not compile.
//!
//! `employees.primary().key("Sales").key(123).get()` reads `empid_000123` of `Sales`;
//! `employees.primary().key("Sales").range(100, 199).all()` the ids 100 to 199.

use std::marker::PhantomData;

use futures::{Stream, StreamExt, TryStreamExt};

use super::handle::{End, KeyArg, Partition, Row};
use super::{EntityType, KeyBounds, KeyPart, Stored};
use crate::error::Result;
use crate::filter;
use crate::keys::KeyError;
use crate::model::IfMatch;
use crate::query::Query;

/// A table whose entities are read and deleted by typed primary keys: the core
/// [`Table`](super::Table) and the tables of the pattern modules (whose deletes also
/// remove what the entity's declarations keep elsewhere).
pub trait PrimaryTable: Sync {
    /// The entity type.
    type Entity: EntityType;
    /// What a delete answers.
    type Deleted;

    /// Reads the entity with these keys.
    fn read_at(
        &self,
        partition_key: &str,
        row_key: &str,
    ) -> impl Future<Output = Result<Option<Stored<Self::Entity>>>> + Send;

    /// Reads the entities a query matches, page after page.
    fn read_query(
        &self,
        query: Query,
    ) -> impl Stream<Item = Result<Stored<Self::Entity>>> + Send + '_;

    /// Reads the entities a query matches as stored (its `$select` kept), page after page,
    /// for projections.
    fn read_entities(
        &self,
        query: Query,
    ) -> impl Stream<Item = Result<crate::model::Entity>> + Send + '_;

    /// How many entities a query matches, reading keys only.
    fn count_query(&self, query: Query) -> impl Future<Output = Result<u64>> + Send;
}

/// A [`PrimaryTable`] that also writes by typed primary key (`primary().…delete()`,
/// `primary().…update()`): every pattern table, and a plain [`Table`](super::Table) of a
/// type with nothing to keep after its writes ([`PlainWrite`](super::PlainWrite)).
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not write by primary key: its entity type declares work that follows its writes",
    label = "a plain `Table` would leave its indexes, id lists, unique values, counts, feed or expiry behind",
    note = "write it through `tablekit_patterns::index::IndexedTable`, the one write path that keeps its declarations"
)]
pub trait PrimaryWrite: PrimaryTable {
    /// Applies a partial update (properties and their new values, `None` to remove) to
    /// the entity with these keys through the table's write path, if `if_match` holds;
    /// with `IfMatch::Any` a concurrent change is merged into again.
    fn update_at(
        &self,
        partition_key: &str,
        row_key: &str,
        changes: Vec<(&'static str, Option<crate::model::Value>)>,
        if_match: IfMatch,
    ) -> impl Future<Output = Result<Self::Deleted>> + Send;

    /// Deletes the entity with these keys if `if_match` holds.
    fn delete_at(
        &self,
        partition_key: &str,
        row_key: &str,
        if_match: IfMatch,
    ) -> impl Future<Output = Result<Self::Deleted>> + Send;
}

/// The key state after [`range`](PrimaryKey::range): the last given RowKey field lies in a
/// range.
pub struct InRange;

type Part = Box<dyn KeyPart + Send>;

/// A read or delete by primary key: built with a table's `primary()`, given the key's
/// fields with [`key`](Self::key) in template order, each of its field's type. With the
/// PartitionKey's fields given it reads the partition ([`all`](Self::all),
/// [`stream`](Self::stream)), with some RowKey fields the keys that start with them, with
/// [`range`](Self::range) a range of the next field, and with every field one entity
/// ([`get`](Self::get), [`delete`](Self::delete)).
pub struct PrimaryKey<'t, T: ?Sized, K> {
    table: &'t T,
    given: Vec<Part>,
    span: Option<(Part, Part)>,
    condition: Option<FilterGiven>,
    state: PhantomData<fn() -> K>,
}

impl<T: ?Sized, K> std::fmt::Debug for PrimaryKey<'_, T, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrimaryKey")
            .field("given", &self.given.len())
            .field("range", &self.span.is_some())
            .finish()
    }
}

impl<'t, T: PrimaryTable + ?Sized> PrimaryKey<'t, T, <T::Entity as EntityType>::Key> {
    /// A key of `table` with no field given yet.
    pub fn new(table: &'t T) -> Self {
        PrimaryKey {
            table,
            given: Vec::new(),
            span: None,
            condition: None,
            state: PhantomData,
        }
    }
}

impl<'t, T: ?Sized, K> PrimaryKey<'t, T, K> {
    fn then<Next>(mut self, part: Option<Part>) -> PrimaryKey<'t, T, Next> {
        self.given.extend(part);
        PrimaryKey {
            table: self.table,
            given: self.given,
            span: self.span,
            condition: self.condition,
            state: PhantomData,
        }
    }
}

impl<'t, T: ?Sized, F: KeyPart + Send + 'static, Rest> PrimaryKey<'t, T, Partition<F, Rest>> {
    /// The value of the next field of the PartitionKey template.
    pub fn key(self, value: impl KeyArg<F>) -> PrimaryKey<'t, T, Rest> {
        self.then(Some(Box::new(value.into_key())))
    }
}

impl<'t, T: ?Sized, F: KeyPart + Send + 'static, Rest> PrimaryKey<'t, T, Row<F, Rest>> {
    /// The value of the next field of the RowKey template.
    pub fn key(self, value: impl KeyArg<F>) -> PrimaryKey<'t, T, Rest> {
        self.then(Some(Box::new(value.into_key())))
    }

    /// The entities whose next RowKey field lies in `lo ..= hi`, the fields before it as
    /// given.
    pub fn range(mut self, lo: impl KeyArg<F>, hi: impl KeyArg<F>) -> PrimaryKey<'t, T, InRange> {
        self.span = Some((Box::new(lo.into_key()), Box::new(hi.into_key())));
        self.then(None)
    }
}

/// The key states a read of several entities may start from: the PartitionKey given
/// (and perhaps a RowKey prefix), a range, or the whole key.
#[diagnostic::on_unimplemented(
    message = "this read needs the PartitionKey's fields first: give them with `.key(..)`",
    label = "the PartitionKey's fields are not all given yet",
    note = "to read or count the whole table, use the table's `scan()` (`table.scan().filter(..).count_scan()`): a table scan, whose cost grows with the table"
)]
pub trait Scannable: sealed::Sealed {}
impl<F, Rest> Scannable for Row<F, Rest> {}
impl Scannable for End {}
impl Scannable for InRange {}

mod sealed {
    pub trait Sealed {}
    impl<F, Rest> Sealed for super::Row<F, Rest> {}
    impl Sealed for super::End {}
    impl Sealed for super::InRange {}
}

/// The reads of several entities named on a key whose PartitionKey is not given yet, so
/// that calling one is a readable error (see [`Scannable`]) rather than a missing method.
impl<T: ?Sized, F, Rest> PrimaryKey<'_, T, Partition<F, Rest>> {
    /// Not available before the PartitionKey's fields: give them with `key`, or read the
    /// whole table with the table's `scan()`.
    pub fn filter<C>(self, _condition: C) -> Self
    where
        Partition<F, Rest>: Scannable,
    {
        self
    }

    /// Not available before the PartitionKey's fields: give them with `key`, or count
    /// the whole table with the table's `scan().count_scan()`.
    ///
    /// # Errors
    /// Never: it does not compile.
    pub async fn count_scan(self) -> Result<u64>
    where
        Partition<F, Rest>: Scannable,
    {
        Ok(0)
    }

    /// Not available before the PartitionKey's fields: give them with `key`, or read the
    /// whole table with the table's `scan().all()`.
    ///
    /// # Errors
    /// Never: it does not compile.
    pub async fn all(self) -> Result<()>
    where
        Partition<F, Rest>: Scannable,
    {
        Ok(())
    }
}

type FilterGiven = std::result::Result<filter::Filter, Box<super::field::FieldError>>;

/// `condition` joined to what was given before with `and` (the first error kept).
fn joined<E>(before: Option<FilterGiven>, condition: super::Condition<E>) -> FilterGiven {
    match (before, condition.into_parts()) {
        (None, c) => c,
        (Some(Ok(a)), Ok(b)) => Ok(a & b),
        (Some(Err(e)), _) | (_, Err(e)) => Err(e),
    }
}

/// The chosen fields of every entity `query` matches, read with `$select` of their
/// properties alone (and the expiry time, when the type expires).
async fn select_fields<T: PrimaryTable + ?Sized, F: super::Fields<T::Entity>>(
    table: &T,
    query: Query,
    fields: F,
) -> Result<Vec<F::Output>> {
    let mut properties = fields.properties();
    if <T::Entity as super::Record>::expires() {
        properties.push(super::EXPIRES_PROPERTY.to_owned());
    }
    table
        .read_entities(query.select(properties))
        .map(|entity| entity.and_then(|e| fields.read(e)))
        .try_collect()
        .await
}

fn parts(given: &[Part]) -> Vec<&dyn KeyPart> {
    given.iter().map(|p| p.as_ref() as &dyn KeyPart).collect()
}

fn entity_error<E: EntityType>(source: KeyError) -> KeyError {
    KeyError::Entity {
        type_name: E::schema().type_name,
        source: Box::new(source),
    }
}

impl<T: PrimaryTable + ?Sized, K> PrimaryKey<'_, T, K> {
    /// The PartitionKey, and the values given for the RowKey's fields.
    fn partition(&self) -> Result<(String, Vec<&dyn KeyPart>)> {
        let schema = <T::Entity as EntityType>::schema();
        let mut all = parts(&self.given);
        let row = all.split_off(schema.partition_key.fields().len().min(all.len()));
        let partition_key = schema
            .partition_key
            .render_args(&all)
            .map_err(entity_error::<T::Entity>)?;
        crate::limits::check_key(crate::limits::KeyKind::PartitionKey, &partition_key)?;
        Ok((partition_key, row))
    }

    fn query(&self) -> Result<Query> {
        let schema = <T::Entity as EntityType>::schema();
        let (partition_key, row) = self.partition()?;
        let bounds: KeyBounds = match &self.span {
            Some((lo, hi)) => schema.row_key.range(&row, lo.as_ref(), hi.as_ref()),
            None => schema.row_key.prefix(&row),
        }
        .map_err(entity_error::<T::Entity>)?;
        // A whole partition of a RowKey template without a literal prefix has no bounds.
        let keys = if row.is_empty() && self.span.is_none() && bounds.start.is_empty() {
            filter::partition_key().eq(partition_key.as_str())
        } else {
            bounds.in_partition(&partition_key)
        };
        Ok(Query::with_filter(match &self.condition {
            Some(Ok(condition)) => keys & condition.clone(),
            Some(Err(e)) => return Err(crate::Error::Field(e.clone())),
            None => keys,
        }))
    }
}

impl<'t, T: PrimaryTable + ?Sized, K: Scannable> PrimaryKey<'t, T, K> {
    /// Only the entities that also meet a condition over the type's typed properties
    /// (`Order::fields().total.ge(30)`); several conditions are joined with `and`.
    pub fn filter(mut self, condition: super::Condition<T::Entity>) -> Self {
        self.condition = Some(joined(self.condition.take(), condition));
        self
    }

    /// The chosen fields of every entity of the key given, read with `$select` of their
    /// properties alone, into a tuple of the fields' types.
    ///
    /// # Errors
    /// As [`all`](Self::all); [`Error::Field`](crate::Error::Field) naming the property and
    /// the keys of an entity whose property does not read as its field.
    pub async fn select<F: super::Fields<T::Entity>>(self, fields: F) -> Result<Vec<F::Output>> {
        select_fields(self.table, self.query()?, fields).await
    }

    /// Every entity of the key given (the partition, the RowKeys that start with the
    /// fields given, or the range), in RowKey order, page after page.
    pub fn stream(self) -> impl Stream<Item = Result<Stored<T::Entity>>> + Send + 't {
        match self.query() {
            Ok(query) => self.table.read_query(query).left_stream(),
            Err(e) => futures::stream::once(async move { Err(e) }).right_stream(),
        }
    }

    /// How many entities the key given matches, reading their keys only (no value is
    /// read or kept).
    ///
    /// # Errors
    /// Key errors; the store's errors.
    pub async fn count_scan(self) -> Result<u64> {
        let query = self.query()?;
        self.table.count_query(query).await
    }

    /// Every entity of the key given, collected: for results that fit in memory
    /// ([`stream`](Self::stream) reads a page at a time).
    ///
    /// # Errors
    /// Key errors (a value holding the separator after its field); the store's errors;
    /// an entity that does not read as the type.
    pub async fn all(self) -> Result<Vec<Stored<T::Entity>>> {
        self.stream().try_collect().await
    }
}

impl<'t, T: PrimaryTable + ?Sized> PrimaryKey<'t, T, End> {
    /// The keys given, rendered: (PartitionKey, RowKey).
    ///
    /// # Errors
    /// Key errors.
    pub fn keys(&self) -> Result<(String, String)> {
        let schema = <T::Entity as EntityType>::schema();
        let (partition_key, row) = self.partition()?;
        let row_key = schema
            .row_key
            .render_args(&row)
            .map_err(entity_error::<T::Entity>)?;
        crate::limits::check_key(crate::limits::KeyKind::RowKey, &row_key)?;
        Ok((partition_key, row_key))
    }

    /// The entity with the key given, if any.
    ///
    /// # Errors
    /// As [`all`](Self::all).
    pub async fn get(self) -> Result<Option<Stored<T::Entity>>> {
        let (partition_key, row_key) = self.keys()?;
        self.table.read_at(&partition_key, &row_key).await
    }

    /// A partial update of the entity with the key given: set typed fields with
    /// [`set`](KeyUpdate::set), then [`apply`](KeyUpdate::apply).
    pub fn update(self) -> KeyUpdate<'t, T>
    where
        T: PrimaryWrite,
    {
        KeyUpdate {
            keys: self.keys(),
            table: self.table,
            changes: super::Update::new(),
        }
    }

    /// Deletes the entity with the key given if `if_match` holds.
    ///
    /// # Errors
    /// Key errors; `NotFound`, `PreconditionFailed`; the store's errors.
    pub async fn delete(self, if_match: IfMatch) -> Result<T::Deleted>
    where
        T: PrimaryWrite,
    {
        let (partition_key, row_key) = self.keys()?;
        self.table
            .delete_at(&partition_key, &row_key, if_match)
            .await
    }
}

/// How many RowKeys one query of [`Table::get_many`](super::Table::get_many) asks for: the
/// table service takes at most 15 comparisons in a filter, one of them the PartitionKey's.
pub const KEYS_PER_QUERY: usize = 14;

/// How many queries of one [`Table::get_many`](super::Table::get_many) run at a time.
pub const GET_MANY_CONCURRENCY: usize = 8;

/// A primary key a batch read takes: a typed key with every field given
/// (`table.primary().key("Sales").key(7)`), or the rendered keys.
pub trait IntoKeys {
    /// The (PartitionKey, RowKey).
    ///
    /// # Errors
    /// Key errors.
    fn into_keys(self) -> Result<(String, String)>;
}

impl<T: PrimaryTable + ?Sized> IntoKeys for PrimaryKey<'_, T, End> {
    fn into_keys(self) -> Result<(String, String)> {
        self.keys()
    }
}

impl IntoKeys for (String, String) {
    fn into_keys(self) -> Result<(String, String)> {
        Ok(self)
    }
}

impl IntoKeys for (&str, &str) {
    fn into_keys(self) -> Result<(String, String)> {
        Ok((self.0.to_owned(), self.1.to_owned()))
    }
}

/// A partial update by primary key: typed fields set through the table's one write path,
/// so indexes, unique values, change events and denormalised copies follow.
pub struct KeyUpdate<'t, T: PrimaryTable + ?Sized> {
    table: &'t T,
    keys: Result<(String, String)>,
    changes: super::Update<T::Entity>,
}

impl<T: PrimaryTable + ?Sized> std::fmt::Debug for KeyUpdate<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyUpdate")
            .field("keys", &self.keys.as_ref().ok())
            .field("changes", &self.changes)
            .finish()
    }
}

impl<T: PrimaryWrite + ?Sized> KeyUpdate<'_, T> {
    /// Sets a field to a value of its type; a key field does not compile (a key change is
    /// a delete and an insert).
    pub fn set<F: super::FieldValue, M: super::property::Set>(
        mut self,
        property: super::Property<T::Entity, F, M>,
        value: impl super::FieldArg<F>,
    ) -> Self {
        self.changes = self.changes.set(property, value);
        self
    }

    /// Writes the changes if `if_match` holds.
    ///
    /// # Errors
    /// Key errors and values a property cannot hold (before any I/O); `NotFound`,
    /// `PreconditionFailed`; the table's write errors.
    pub async fn apply(self, if_match: IfMatch) -> Result<T::Deleted> {
        let (partition_key, row_key) = self.keys?;
        let changes = self.changes.into_changes()?;
        self.table
            .update_at(&partition_key, &row_key, changes, if_match)
            .await
    }
}

/// A read of a whole table, every partition: built with a table's `scan()`, narrowed by
/// conditions over the type's typed properties with [`filter`](Self::filter), then read
/// ([`stream`](Self::stream), [`all`](Self::all), [`select`](Self::select)) or counted
/// ([`count_scan`](Self::count_scan)).
///
/// **Its cost is a table scan**: the store reads every row of the table, page by page in
/// bounded memory (a filter narrows what is returned, not what is read; a count reads
/// keys only). For a read that should not grow with the table, give the PartitionKey
/// (`primary().key(..)`), declare an index (`#[index]`) or keep a count (`#[count]`).
pub struct TableScan<'t, T: ?Sized> {
    table: &'t T,
    condition: Option<FilterGiven>,
}

impl<T: ?Sized> std::fmt::Debug for TableScan<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableScan")
            .field("filtered", &self.condition.is_some())
            .finish()
    }
}

impl<'t, T: PrimaryTable + ?Sized> TableScan<'t, T> {
    /// A scan of every entity of `table`.
    pub fn new(table: &'t T) -> Self {
        TableScan {
            table,
            condition: None,
        }
    }

    /// Only the entities that also meet a condition over the type's typed properties
    /// (`Order::fields().status.eq("placed")`); several conditions are joined with `and`.
    pub fn filter(mut self, condition: super::Condition<T::Entity>) -> Self {
        self.condition = Some(joined(self.condition.take(), condition));
        self
    }

    fn query(&self) -> Result<Query> {
        Ok(match &self.condition {
            Some(Ok(condition)) => Query::with_filter(condition.clone()),
            Some(Err(e)) => return Err(crate::Error::Field(e.clone())),
            None => Query::new(),
        })
    }

    /// Every entity the scan matches, in key order, page after page.
    pub fn stream(self) -> impl Stream<Item = Result<Stored<T::Entity>>> + Send + 't {
        match self.query() {
            Ok(query) => self.table.read_query(query).left_stream(),
            Err(e) => futures::stream::once(async move { Err(e) }).right_stream(),
        }
    }

    /// Every entity the scan matches, collected: for results that fit in memory
    /// ([`stream`](Self::stream) reads a page at a time).
    ///
    /// # Errors
    /// The store's errors; an entity that does not read as the type.
    pub async fn all(self) -> Result<Vec<Stored<T::Entity>>> {
        self.stream().try_collect().await
    }

    /// The chosen fields of every entity the scan matches, read with `$select` of their
    /// properties alone.
    ///
    /// # Errors
    /// As [`all`](Self::all); [`Error::Field`](crate::Error::Field) for a property that
    /// does not read as its field.
    pub async fn select<F: super::Fields<T::Entity>>(self, fields: F) -> Result<Vec<F::Output>> {
        select_fields(self.table, self.query()?, fields).await
    }

    /// How many entities the scan matches, reading keys only (and the properties the
    /// filter names).
    ///
    /// # Errors
    /// The store's errors.
    pub async fn count_scan(self) -> Result<u64> {
        let query = self.query()?;
        self.table.count_query(query).await
    }
}
