//! The targets a primary's index record lists: what it keeps in step with itself. Each
//! is a type of the declaration it belongs to ([`TargetType`], in the declaration's
//! folder); [`Target`] holds any of them and is stored internally tagged by `t`, as it
//! always was. Each declaration's folder submits the codecs of its target types
//! ([`Target::codec`]) and a stored target is decoded by its tag among them, so no list
//! here names the declarations.

use std::any::Any;
use std::cmp::Ordering;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::super::operation::IndexOperation;
use super::super::reclaim::Reclaim;
use super::super::registry::open::{self, Codec, TagKey};
use super::EntityRef;

/// A declaration's target type: what a primary's record lists for it.
pub(crate) trait TargetType:
    Clone + Ord + Hash + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// The tag it is stored under (`t`).
    const TAG: &'static str;
    /// Where targets of this type sort among the others' (the order a record lists them
    /// in, so a record is stored as it always was).
    const RANK: u16;

    /// The index, index entity, field or value the target belongs to.
    fn name(&self) -> &str;

    /// What the target occupies: two targets with the same slot are the same entry with
    /// other settings, so a write updates it in place.
    fn same_slot(&self, other: &Self) -> bool {
        self == other
    }

    /// Whether the target is written in the primary's entity group transaction.
    fn is_atomic(&self, source: &EntityRef) -> bool;

    /// Adds what a write holding this target did outside its transaction, and must be
    /// undone if the write never commits (a reservation, a link), to `reclaim`.
    fn reclaim(&self, _source: &EntityRef, _reclaim: &mut Reclaim) {}

    /// The entity holding a copy of the primary's `property`, if the target is one (a
    /// copy carrying it): a property changed outside a write (a denormalised field
    /// brought up to date) is copied there too.
    fn carries(&self, _property: &str) -> Option<&EntityRef> {
        None
    }

    /// The operation that brings the target in line with the primary `source` at
    /// `version`: its write when the primary has it (`present`), its removal otherwise.
    fn operation(
        &self,
        source: &EntityRef,
        version: i64,
        present: bool,
        kind_property: &str,
    ) -> IndexOperation;
}

/// The object-safe side of [`TargetType`].
trait AnyTarget: Any + Debug + Send + Sync {
    fn tag(&self) -> &'static str;
    fn any(&self) -> &dyn Any;
    fn fields(&self) -> &dyn erased_serde::Serialize;
    fn rank(&self) -> u16;
    fn name(&self) -> &str;
    fn eq_any(&self, other: &dyn AnyTarget) -> bool;
    fn cmp_any(&self, other: &dyn AnyTarget) -> Ordering;
    fn hash_any(&self, state: &mut dyn Hasher);
    fn same_slot_any(&self, other: &dyn AnyTarget) -> bool;
    fn is_atomic(&self, source: &EntityRef) -> bool;
    fn reclaim(&self, source: &EntityRef, reclaim: &mut Reclaim);
    fn carries(&self, property: &str) -> Option<&EntityRef>;
    fn operation(
        &self,
        source: &EntityRef,
        version: i64,
        present: bool,
        kind_property: &str,
    ) -> IndexOperation;
}

impl<T: TargetType> AnyTarget for T {
    fn tag(&self) -> &'static str {
        T::TAG
    }

    fn any(&self) -> &dyn Any {
        self
    }

    fn fields(&self) -> &dyn erased_serde::Serialize {
        self
    }

    fn rank(&self) -> u16 {
        T::RANK
    }

    fn name(&self) -> &str {
        TargetType::name(self)
    }

    fn eq_any(&self, other: &dyn AnyTarget) -> bool {
        other.any().downcast_ref::<T>() == Some(self)
    }

    fn cmp_any(&self, other: &dyn AnyTarget) -> Ordering {
        T::RANK
            .cmp(&other.rank())
            .then_with(|| match other.any().downcast_ref::<T>() {
                Some(other) => self.cmp(other),
                None => T::TAG.cmp(other.tag()),
            })
    }

    fn hash_any(&self, mut state: &mut dyn Hasher) {
        T::TAG.hash(&mut state);
        self.hash(&mut state);
    }

    fn same_slot_any(&self, other: &dyn AnyTarget) -> bool {
        other
            .any()
            .downcast_ref::<T>()
            .is_some_and(|other| self.same_slot(other))
    }

    fn is_atomic(&self, source: &EntityRef) -> bool {
        TargetType::is_atomic(self, source)
    }

    fn reclaim(&self, source: &EntityRef, reclaim: &mut Reclaim) {
        TargetType::reclaim(self, source, reclaim);
    }

    fn carries(&self, property: &str) -> Option<&EntityRef> {
        TargetType::carries(self, property)
    }

    fn operation(
        &self,
        source: &EntityRef,
        version: i64,
        present: bool,
        kind_property: &str,
    ) -> IndexOperation {
        TargetType::operation(self, source, version, present, kind_property)
    }
}

/// Something a primary keeps in step with itself: a target of one of the declarations
/// (a copy, a denormalised field, an id-list membership, a reservation of a unique
/// value, …). Built from a declaration's target type (`CopyTarget::into`), read back as
/// one with [`Target::get`].
#[derive(Clone)]
pub struct Target(Arc<dyn AnyTarget>);

impl Target {
    /// The target, of a declaration's target type.
    pub(crate) fn new<T: TargetType>(target: T) -> Self {
        Target(Arc::new(target))
    }

    /// The target as a `T`, if it is one.
    pub fn get<T: 'static>(&self) -> Option<&T> {
        self.0.any().downcast_ref()
    }

    /// Whether the target is a `T`.
    pub fn is<T: 'static>(&self) -> bool {
        self.0.any().is::<T>()
    }

    /// The tag the target is stored under (`copy`, `member`, …).
    pub fn tag(&self) -> &'static str {
        self.0.tag()
    }

    /// The index, index entity, field or value the target belongs to.
    pub fn index(&self) -> &str {
        self.0.name()
    }

    /// What the target occupies: two targets with the same slot are the same entry with
    /// other settings (a changed `properties` list, another source property), so a write
    /// updates it in place instead of adding one and dropping the other.
    pub fn same_slot(&self, other: &Target) -> bool {
        self.0.same_slot_any(other.0.as_ref())
    }

    /// Whether the target is written in the primary's entity group transaction.
    pub fn is_atomic(&self, source: &EntityRef) -> bool {
        self.0.is_atomic(source)
    }

    /// The entity holding a copy of the primary's `property`, if the target is one.
    pub(crate) fn carries(&self, property: &str) -> Option<&EntityRef> {
        self.0.carries(property)
    }

    /// Adds what a write holding the target must undo if it never commits.
    pub(crate) fn reclaim(&self, source: &EntityRef, reclaim: &mut Reclaim) {
        self.0.reclaim(source, reclaim);
    }

    /// The operation that brings the target in line with the primary `source` at
    /// `version`: its write when the primary has it (`present`), its removal otherwise.
    pub(crate) fn operation(
        &self,
        source: &EntityRef,
        version: i64,
        present: bool,
        kind_property: &str,
    ) -> IndexOperation {
        self.0.operation(source, version, present, kind_property)
    }
}

impl Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for Target {
    fn eq(&self, other: &Self) -> bool {
        self.0.eq_any(other.0.as_ref())
    }
}

impl Eq for Target {}

impl PartialOrd for Target {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Target {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp_any(other.0.as_ref())
    }
}

impl Hash for Target {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash_any(state);
    }
}

impl Serialize for Target {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        open::serialize(TagKey::Target, self.0.tag(), self.0.fields(), serializer)
    }
}

impl<'de> Deserialize<'de> for Target {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (tag, fields) = open::deserialize(TagKey::Target, deserializer)?;
        open::decode_by_tag(
            "target",
            &tag,
            fields,
            inventory::iter::<Codec<Target>>.into_iter(),
        )
        .map_err(serde::de::Error::custom)
    }
}

inventory::collect!(Codec<Target>);

impl Target {
    /// The codec of the target type `T` of the declaration `attribute`, for its folder to
    /// submit (`inventory::submit! { Target::codec::<T>(ATTRIBUTE) }`).
    pub(crate) const fn codec<T: TargetType>(attribute: &'static str) -> Codec<Target>
    where
        Target: From<T>,
    {
        Codec {
            attribute,
            tag: T::TAG,
            decode: open::decode::<T, Target>,
        }
    }
}
