//! Typed handles of a type's indexes and id lists: `#[derive(Entity)]` generates one
//! associated constant per `#[index]` and `#[index_entity]` (`Employee::BY_EMAIL`), whose
//! type carries the types of the key's fields in order, so that a look-up with a
//! misspelled name, too many or too few key values, or a value of another type does not
//! compile.
//!
//! A handle's key is a chain of markers, one per field of its templates in the order
//! of [`KeyTemplate::fields`](super::KeyTemplate::fields):
//! [`Partition<T, Rest>`] for the fields of the PartitionKey template, then
//! [`Row<T, Rest>`] for those of the RowKey template (or an id list's key), ending in
//! [`End`]. A look-up takes one value per marker, each a [`KeyArg`] of the field's type.

use std::marker::PhantomData;

use super::KeyPart;

/// A field of a PartitionKey template still to be given, of type `T`, then `Rest`.
pub struct Partition<T, Rest>(PhantomData<fn() -> (T, Rest)>);

/// A field of a RowKey template (or of an id list's key) still to be given, of type `T`,
/// then `Rest`.
pub struct Row<T, Rest>(PhantomData<fn() -> (T, Rest)>);

/// Every field of the key is given.
pub struct End;

/// A key whose fields are given at run time, checked when the look-up runs (the
/// look-ups by name).
pub struct Dynamic;

/// An index of entity type `E` whose key fields are `K` (a chain of [`Partition`],
/// [`Row`] and [`End`]).
pub struct Index<E, K> {
    name: &'static str,
    key: PhantomData<fn() -> (E, K)>,
}

impl<E, K> Index<E, K> {
    /// The handle of the index named `name` (the derive makes these).
    #[doc(hidden)]
    pub const fn new(name: &'static str) -> Self {
        Index {
            name,
            key: PhantomData,
        }
    }

    /// The index's name, as declared.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl<E, K> Clone for Index<E, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E, K> Copy for Index<E, K> {}

impl<E, K> std::fmt::Debug for Index<E, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Index").field(&self.name).finish()
    }
}

/// An id list (`#[index_entity]`) of entity type `E` whose key fields are `K` (a chain
/// of [`Row`] ending in [`End`]).
pub struct IdList<E, K> {
    name: &'static str,
    key: PhantomData<fn() -> (E, K)>,
}

impl<E, K> IdList<E, K> {
    /// The handle of the id list named `name` (the derive makes these).
    #[doc(hidden)]
    pub const fn new(name: &'static str) -> Self {
        IdList {
            name,
            key: PhantomData,
        }
    }

    /// The id list's name, as declared.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl<E, K> Clone for IdList<E, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E, K> Copy for IdList<E, K> {}

impl<E, K> std::fmt::Debug for IdList<E, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("IdList").field(&self.name).finish()
    }
}

/// A value a look-up takes for a key field of type `T`: a `T`, a `&T`, or a `&str` for
/// a `String` field.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a value of this key field, which is a `{T}`",
    label = "expected a value of the key field's type `{T}`",
    note = "a look-up takes the key's fields in order (the PartitionKey template's, then the RowKey template's), each of its field's type: a `T`, a `&T`, or a `&str` for a `String`"
)]
pub trait KeyArg<T> {
    /// The value, owned.
    fn into_key(self) -> T;
}

impl<T: KeyPart> KeyArg<T> for T {
    fn into_key(self) -> T {
        self
    }
}

impl<T: KeyPart + Clone> KeyArg<T> for &T {
    fn into_key(self) -> T {
        self.clone()
    }
}

impl KeyArg<String> for &str {
    fn into_key(self) -> String {
        self.to_owned()
    }
}

impl KeyArg<String> for &mut str {
    fn into_key(self) -> String {
        (*self).to_owned()
    }
}

/// A declaration of entity type `E` described by its attribute (`#[count]`), whose key
/// fields are `K` (a chain of [`Row`] ending in [`End`]): the handle a declaration's
/// own read takes (`orders.count(Order::BY_STATUS)`), which checks the attribute.
pub struct Declared<E, K> {
    attribute: &'static str,
    name: &'static str,
    key: PhantomData<fn() -> (E, K)>,
}

impl<E, K> Declared<E, K> {
    /// The handle of the declaration `name` of `attribute` (the derive makes these).
    #[doc(hidden)]
    pub const fn new(attribute: &'static str, name: &'static str) -> Self {
        Declared {
            attribute,
            name,
            key: PhantomData,
        }
    }

    /// The attribute that declares it.
    pub const fn attribute(&self) -> &'static str {
        self.attribute
    }

    /// The declaration's name.
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl<E, K> Clone for Declared<E, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E, K> Copy for Declared<E, K> {}

impl<E, K> std::fmt::Debug for Declared<E, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Declared")
            .field(&self.attribute)
            .field(&self.name)
            .finish()
    }
}
