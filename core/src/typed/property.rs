//! Typed properties: `#[derive(Entity)]` gives every stored field of an entity type a
//! [`Property`] (`Order::fields().total`), typed by the entity and the field, from which
//! filters ([`Condition`]), partial updates ([`Update`]) and projections ([`Fields`]) are
//! built. A misspelt field is a compile error (no such field of `fields()`), a literal of
//! another type does not compile (`total.ge("30")` on a `u32`), a condition on another
//! entity type's field does not join this one's, and a key field cannot be set (a key
//! change is a delete and an insert). The untyped forms
//! ([`filter::property_named`](crate::filter::property_named)) remain for what an
//! application names at run time.
//!
//! `orders.primary().key("alice").filter(f.total.ge(20) & !f.total.eq(30)).all()`, with
//! `let f = Order::fields();`; `orders.primary().key("alice").key(1).update().set(f.total,
//! 15).apply(IfMatch::Any)`; `orders.primary().key("alice").select((f.id, f.total))`.

use std::marker::PhantomData;
use std::ops::{BitAnd, BitOr, Not};

use super::EntityType;
use super::field::{Direction, FieldError, FieldProblem, FieldValue};
use crate::error::{Error, Result};
use crate::filter::{self, CompareOp, Filter};
use crate::model::{Entity, Value};

/// Marks a property that a partial update may set, a filter compare and a projection
/// select: a field stored as a property.
pub struct Settable;

/// Marks a property of a key field: compared and selected, never set (a key change is a
/// delete and an insert).
pub struct KeyField;

/// Marks a blob field (`#[entity(blob)]`): set by a partial update (its bytes move to the
/// blob store as a full write moves them), never compared or selected (the table holds
/// its address, not its bytes).
pub struct BlobProperty;

/// The properties a filter compares: stored fields and key fields.
#[diagnostic::on_unimplemented(
    message = "a blob field cannot be compared in a filter",
    note = "the table holds a blob field's address, not its bytes"
)]
pub trait Compared {}
impl Compared for Settable {}
impl Compared for KeyField {}

/// The properties a partial update sets: stored fields and blob fields, never key fields.
#[diagnostic::on_unimplemented(
    message = "a key field cannot be set by a partial update",
    note = "a key change is a delete and an insert: write the new value with `insert` and delete the old key"
)]
pub trait Set {}
impl Set for Settable {}
impl Set for BlobProperty {}

/// The properties a projection selects: stored fields and key fields.
#[diagnostic::on_unimplemented(
    message = "a blob field cannot be selected in a projection",
    note = "the table holds a blob field's address, not its bytes: read the entity"
)]
pub trait Selected {}
impl Selected for Settable {}
impl Selected for KeyField {}

/// A stored field of entity type `E`, of Rust type `T`; `M` is [`Settable`] or
/// [`KeyField`].
pub struct Property<E, T, M = Settable> {
    field: &'static str,
    property: &'static str,
    types: PhantomData<Types<E, T, M>>,
}

/// The types a [`Property`] carries (covariant, `Send` and `Sync` whatever they are).
type Types<E, T, M> = fn() -> (E, T, M);

impl<E, T, M> Property<E, T, M> {
    /// The property of the field `field` stored as `property` (the derive makes these).
    #[doc(hidden)]
    pub const fn new(field: &'static str, property: &'static str) -> Self {
        Property {
            field,
            property,
            types: PhantomData,
        }
    }

    /// The Rust field's name.
    pub const fn field(&self) -> &'static str {
        self.field
    }

    /// The stored property's name.
    pub const fn property(&self) -> &'static str {
        self.property
    }
}

impl<E, T, M> Clone for Property<E, T, M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E, T, M> Copy for Property<E, T, M> {}

impl<E, T, M> std::fmt::Debug for Property<E, T, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Property").field(&self.property).finish()
    }
}

/// A value a comparison or an update takes for a field of type `T`: a `T`, a `&T`, a
/// `&str` for a `String`, or for an `Option<U>` field a `U` (compared with the value
/// when present).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a value of this field, which is a `{T}`",
    label = "expected a value of the field's type `{T}`",
    note = "a typed property compares with and is set to values of its field's type: a `T`, a `&T`, a `&str` for a `String`, a `U` for an `Option<U>`"
)]
pub trait FieldArg<T> {
    /// The value, as the field's type.
    fn into_field(self) -> T;
}

impl<T: FieldValue> FieldArg<T> for T {
    fn into_field(self) -> T {
        self
    }
}

impl<T: FieldValue + Clone> FieldArg<T> for &T {
    fn into_field(self) -> T {
        self.clone()
    }
}

impl FieldArg<String> for &str {
    fn into_field(self) -> String {
        self.to_owned()
    }
}

impl FieldArg<Option<String>> for &str {
    fn into_field(self) -> Option<String> {
        Some(self.to_owned())
    }
}

macro_rules! optional_arg {
    ($($t:ty),*) => {$(
        impl FieldArg<Option<$t>> for $t {
            fn into_field(self) -> Option<$t> {
                Some(self)
            }
        }
    )*};
}

optional_arg!(
    String,
    bool,
    i8,
    i16,
    i32,
    i64,
    isize,
    u8,
    u16,
    u32,
    u64,
    usize,
    f64,
    chrono::DateTime<chrono::Utc>,
    uuid::Uuid,
    Vec<u8>
);

/// A value a property cannot hold, given to a filter or a partial update (`used_in`),
/// which has no entity keys to name.
fn value_error<E: EntityType>(
    used_in: &str,
    property: &str,
    problem: FieldProblem,
) -> Box<FieldError> {
    Box::new(FieldError {
        direction: Direction::Write,
        type_name: E::schema().type_name,
        partition_key: used_in.to_owned(),
        row_key: String::new(),
        property: property.to_owned(),
        problem,
    })
}

impl<E: EntityType, T: FieldValue, M: Compared> Property<E, T, M> {
    fn compare(self, op: CompareOp, value: impl FieldArg<T>) -> Condition<E> {
        let value = match value.into_field().to_value() {
            Ok(Some(value)) => Ok(filter::property_named(self.property).compare(op, value)),
            // An absent value has no literal: the table service compares present values.
            Ok(None) => Err(value_error::<E>(
                "(a filter)",
                self.property,
                FieldProblem::Missing,
            )),
            Err(problem) => Err(value_error::<E>("(a filter)", self.property, problem)),
        };
        Condition {
            filter: value,
            entity: PhantomData,
        }
    }

    /// `field eq value`.
    pub fn eq(self, value: impl FieldArg<T>) -> Condition<E> {
        self.compare(CompareOp::Eq, value)
    }

    /// `field ne value` (an entity without the property does not match).
    pub fn ne(self, value: impl FieldArg<T>) -> Condition<E> {
        self.compare(CompareOp::Ne, value)
    }

    /// `field gt value`.
    pub fn gt(self, value: impl FieldArg<T>) -> Condition<E> {
        self.compare(CompareOp::Gt, value)
    }

    /// `field ge value`.
    pub fn ge(self, value: impl FieldArg<T>) -> Condition<E> {
        self.compare(CompareOp::Ge, value)
    }

    /// `field lt value`.
    pub fn lt(self, value: impl FieldArg<T>) -> Condition<E> {
        self.compare(CompareOp::Lt, value)
    }

    /// `field le value`.
    pub fn le(self, value: impl FieldArg<T>) -> Condition<E> {
        self.compare(CompareOp::Le, value)
    }
}

/// A filter over the typed properties of entity type `E`: comparisons joined with
/// `&` (and), `|` (or) and `!` (not), rendered to the table service's `$filter`.
pub struct Condition<E> {
    filter: std::result::Result<Filter, Box<FieldError>>,
    entity: PhantomData<fn() -> E>,
}

impl<E> std::fmt::Debug for Condition<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.filter {
            Ok(filter) => write!(f, "Condition({filter})"),
            Err(e) => write!(f, "Condition(error: {e})"),
        }
    }
}

impl<E> Condition<E> {
    fn join(self, other: Condition<E>, join: fn(Filter, Filter) -> Filter) -> Condition<E> {
        Condition {
            filter: match (self.filter, other.filter) {
                (Ok(a), Ok(b)) => Ok(join(a, b)),
                (Err(e), _) | (_, Err(e)) => Err(e),
            },
            entity: PhantomData,
        }
    }

    /// Both conditions; the same as `a & b`.
    pub fn and(self, other: Condition<E>) -> Condition<E> {
        self.join(other, Filter::and)
    }

    /// Either condition; the same as `a | b`.
    pub fn or(self, other: Condition<E>) -> Condition<E> {
        self.join(other, Filter::or)
    }

    /// Not the condition; the same as `!a`.
    pub fn negate(self) -> Condition<E> {
        Condition {
            filter: self.filter.map(Filter::negate),
            entity: PhantomData,
        }
    }

    /// The untyped filter.
    ///
    /// # Errors
    /// [`Error::Field`] for a value its field's property cannot hold (a `u64` above
    /// `i64::MAX`, an absent `Option`).
    pub fn into_filter(self) -> Result<Filter> {
        self.filter.map_err(Error::Field)
    }

    pub(crate) fn into_parts(self) -> std::result::Result<Filter, Box<FieldError>> {
        self.filter
    }
}

impl<E> BitAnd for Condition<E> {
    type Output = Condition<E>;

    fn bitand(self, other: Condition<E>) -> Condition<E> {
        self.and(other)
    }
}

impl<E> BitOr for Condition<E> {
    type Output = Condition<E>;

    fn bitor(self, other: Condition<E>) -> Condition<E> {
        self.or(other)
    }
}

impl<E> Not for Condition<E> {
    type Output = Condition<E>;

    fn not(self) -> Condition<E> {
        self.negate()
    }
}

/// The changes of a partial update of entity type `E`: typed fields and their new values
/// (an `Option` field set to `None` loses its property).
pub struct Update<E> {
    changes: std::result::Result<Vec<(&'static str, Option<Value>)>, Box<FieldError>>,
    entity: PhantomData<fn() -> E>,
}

impl<E> std::fmt::Debug for Update<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Update")
            .field("changes", &self.changes.as_ref().map(Vec::len))
            .finish()
    }
}

impl<E> Default for Update<E> {
    fn default() -> Self {
        Update {
            changes: Ok(Vec::new()),
            entity: PhantomData,
        }
    }
}

impl<E: EntityType> Update<E> {
    /// No change yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets a field (not a key field: those do not compile).
    pub fn set<T: FieldValue, M: Set>(
        mut self,
        property: Property<E, T, M>,
        value: impl FieldArg<T>,
    ) -> Self {
        if let Ok(changes) = &mut self.changes {
            match value.into_field().to_value() {
                Ok(value) => {
                    changes.retain(|(p, _)| *p != property.property);
                    changes.push((property.property, value));
                }
                Err(problem) => {
                    self.changes = Err(value_error::<E>(
                        "(a partial update)",
                        property.property,
                        problem,
                    ));
                }
            }
        }
        self
    }

    /// The properties and their values (`None`: remove), in the order set.
    ///
    /// # Errors
    /// [`Error::Field`] for a value its property cannot hold.
    pub fn into_changes(self) -> Result<Vec<(&'static str, Option<Value>)>> {
        self.changes.map_err(Error::Field)
    }

    /// Applies the changes to a stored entity.
    pub fn apply_to(changes: &[(&'static str, Option<Value>)], entity: &mut Entity) {
        for (property, value) in changes {
            match value {
                Some(value) => {
                    entity
                        .properties
                        .insert((*property).to_owned(), value.clone());
                }
                None => {
                    entity.properties.shift_remove(*property);
                }
            }
        }
    }
}

/// Typed properties of entity type `E` read together: a tuple of one to six
/// [`Property`]s, read into the tuple of their fields' types with `$select` of their
/// properties alone.
pub trait Fields<E> {
    /// The values read.
    type Output;

    /// The properties to select.
    fn properties(&self) -> Vec<String>;

    /// Reads the values from an entity read with that selection.
    ///
    /// # Errors
    /// [`Error::Field`] naming the property and the entity's keys.
    fn read(&self, entity: Entity) -> Result<Self::Output>;
}

fn read_one<E: EntityType, T: FieldValue>(entity: &mut Entity, property: &str) -> Result<T> {
    let value = entity.properties.swap_remove(property);
    T::from_value(value).map_err(|problem| {
        Error::Field(Box::new(FieldError {
            direction: Direction::Read,
            type_name: E::schema().type_name,
            partition_key: entity.partition_key.clone(),
            row_key: entity.row_key.clone(),
            property: property.to_owned(),
            problem,
        }))
    })
}

macro_rules! tuple_fields {
    ($(($($t:ident $m:ident $i:tt),+)),+) => {$(
        impl<E: EntityType, $($t: FieldValue, $m: Selected),+> Fields<E> for ($(Property<E, $t, $m>,)+) {
            type Output = ($($t,)+);

            fn properties(&self) -> Vec<String> {
                vec![$(self.$i.property.to_owned()),+]
            }

            fn read(&self, mut entity: Entity) -> Result<Self::Output> {
                Ok(($(read_one::<E, $t>(&mut entity, self.$i.property)?,)+))
            }
        }
    )+};
}

tuple_fields!(
    (A MA 0),
    (A MA 0, B MB 1),
    (A MA 0, B MB 1, C MC 2),
    (A MA 0, B MB 1, C MC 2, D MD 3),
    (A MA 0, B MB 1, C MC 2, D MD 3, F MF 4),
    (A MA 0, B MB 1, C MC 2, D MD 3, F MF 4, G MG 5)
);
