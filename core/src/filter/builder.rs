//! The typed filter builder: `property_named("Age").ge(30) & !property_named("Dept").eq("HR")`.

use std::ops::{BitAnd, BitOr, Not};

use super::{CompareOp, Filter};
use crate::model::{PARTITION_KEY, ROW_KEY, TIMESTAMP, Value};

/// A property to compare, made by [`property_named`], [`partition_key`], [`row_key`] or
/// [`timestamp`]; each comparison method returns a [`Filter`].
///
/// ```
/// use tablekit_core::filter::property_named;
///
/// let age = property_named("Age");
/// let thirties = age.ge(30) & age.lt(40);
/// assert_eq!(thirties.to_string(), "Age ge 30 and Age lt 40");
/// ```
#[derive(Clone, Debug)]
pub struct Property {
    name: String,
}

/// The property `name` (a user property, or a system property by its name): the
/// untyped form, for properties an application names at run time. An entity type's
/// own fields are compared through its typed properties (`Employee::fields().age.ge(30)`),
/// which check the name and the literal's type at compile time.
///
/// The name is not checked here; the query layer checks it with
/// [`check_selectable_name`](crate::limits::check_selectable_name).
pub fn property_named(name: impl Into<String>) -> Property {
    Property { name: name.into() }
}

/// The `PartitionKey` system property.
pub fn partition_key() -> Property {
    property_named(PARTITION_KEY)
}

/// The `RowKey` system property.
pub fn row_key() -> Property {
    property_named(ROW_KEY)
}

/// The `Timestamp` system property.
pub fn timestamp() -> Property {
    property_named(TIMESTAMP)
}

/// `true` (every entity) or `false` (no entity) as a whole condition, written as the
/// bare keyword: `literal(true) | property_named("Age").gt(30)` is `true or Age gt 30`.
///
/// ```
/// use tablekit_core::{Entity, filter::{Filter, literal, property_named}};
///
/// let f = (literal(true) & property_named("RowKey").eq("1")) | property_named("PartitionKey").eq("b");
/// assert_eq!(f.to_string(), "(true and RowKey eq '1') or PartitionKey eq 'b'");
/// assert_eq!(Filter::parse(&f.to_string()), Ok(f.clone()));
/// assert!(f.matches(&Entity::new("a", "1")));
/// assert!(!literal(false).matches(&Entity::new("a", "1")));
/// ```
pub fn literal(value: bool) -> Filter {
    Filter::Literal(value)
}

/// `Filter::from(true)` is [`literal(true)`](literal).
impl From<bool> for Filter {
    fn from(value: bool) -> Filter {
        literal(value)
    }
}

impl Property {
    /// The property's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `self op value`.
    pub fn compare(&self, op: CompareOp, value: impl Into<Value>) -> Filter {
        Filter::Compare {
            property: self.name.clone(),
            op,
            value: value.into(),
        }
    }

    /// `self eq value`.
    pub fn eq(&self, value: impl Into<Value>) -> Filter {
        self.compare(CompareOp::Eq, value)
    }

    /// `self ne value`.
    pub fn ne(&self, value: impl Into<Value>) -> Filter {
        self.compare(CompareOp::Ne, value)
    }

    /// `self gt value`.
    pub fn gt(&self, value: impl Into<Value>) -> Filter {
        self.compare(CompareOp::Gt, value)
    }

    /// `self ge value`.
    pub fn ge(&self, value: impl Into<Value>) -> Filter {
        self.compare(CompareOp::Ge, value)
    }

    /// `self lt value`.
    pub fn lt(&self, value: impl Into<Value>) -> Filter {
        self.compare(CompareOp::Lt, value)
    }

    /// `self le value`.
    pub fn le(&self, value: impl Into<Value>) -> Filter {
        self.compare(CompareOp::Le, value)
    }
}

impl Filter {
    /// `self and other`.
    pub fn and(self, other: Filter) -> Filter {
        Filter::And(Box::new(self), Box::new(other))
    }

    /// `self or other`.
    pub fn or(self, other: Filter) -> Filter {
        Filter::Or(Box::new(self), Box::new(other))
    }

    /// `not (self)`; the same as `!self`.
    pub fn negate(self) -> Filter {
        Filter::Not(Box::new(self))
    }
}

/// `a & b` is `a.and(b)`.
impl BitAnd for Filter {
    type Output = Filter;

    fn bitand(self, other: Filter) -> Filter {
        self.and(other)
    }
}

/// `a | b` is `a.or(b)`.
impl BitOr for Filter {
    type Output = Filter;

    fn bitor(self, other: Filter) -> Filter {
        self.or(other)
    }
}

/// `!a` is `a.negate()`.
impl Not for Filter {
    type Output = Filter;

    fn not(self) -> Filter {
        self.negate()
    }
}
