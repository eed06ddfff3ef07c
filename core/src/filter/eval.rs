//! Filter evaluation against an entity, following the comparison rules in the
//! [module docs](crate::filter).

use std::cmp::Ordering;

use chrono::{DateTime, Utc};

use super::{CompareOp, Filter};
use crate::model::{Entity, PARTITION_KEY, ROW_KEY, TIMESTAMP, Value};

/// What a filter reads of an entity: its keys, its Timestamp and its properties by
/// name. An [`Entity`] has them; a backend can offer a stored row's encoded form, so a
/// row the filter rejects is never built.
pub(crate) trait Fields {
    fn partition_key(&self) -> &str;
    fn row_key(&self) -> &str;
    fn timestamp(&self) -> Option<DateTime<Utc>>;
    /// Whether the property `name` exists and `test` holds for its value.
    fn property_is(&self, name: &str, test: impl FnOnce(&Value) -> bool) -> bool;
}

impl Fields for Entity {
    fn partition_key(&self) -> &str {
        &self.partition_key
    }

    fn row_key(&self) -> &str {
        &self.row_key
    }

    fn timestamp(&self) -> Option<DateTime<Utc>> {
        self.timestamp
    }

    fn property_is(&self, name: &str, test: impl FnOnce(&Value) -> bool) -> bool {
        self.get(name).is_some_and(test)
    }
}

impl Filter {
    /// Whether `entity` satisfies the filter, by the rules in the
    /// [module docs](crate::filter): a comparison holds only when the property exists
    /// with the literal's type (an Int32 literal also compares with Int64 and Double
    /// properties) and the values compare as the operator asks.
    ///
    /// ```
    /// use tablekit_core::{Entity, filter::property_named};
    ///
    /// let jun = Entity::new("Sales", "empid_000123").with("Age", 47);
    /// assert!((property_named("Age").ge(30) & property_named("PartitionKey").eq("Sales")).matches(&jun));
    /// assert!(!property_named("Age").ge(30i64).matches(&jun)); // Int32 property, Int64 literal
    /// assert!(property_named("Price").eq(5).matches(&jun.clone().with("Price", 5.0))); // widened
    /// assert!(!property_named("Dept").ne("HR").matches(&jun)); // absent property
    /// ```
    pub fn matches(&self, entity: &Entity) -> bool {
        self.matches_fields(entity)
    }

    /// As [`matches`](Self::matches), reading the entity through [`Fields`].
    pub(crate) fn matches_fields(&self, entity: &impl Fields) -> bool {
        match self {
            Filter::Compare {
                property,
                op,
                value,
            } => compare_property(entity, property, *op, value),
            Filter::And(left, right) => left.matches_fields(entity) && right.matches_fields(entity),
            Filter::Or(left, right) => left.matches_fields(entity) || right.matches_fields(entity),
            Filter::Not(operand) => !operand.matches_fields(entity),
            Filter::Literal(value) => *value,
        }
    }

    /// The number of comparisons in the filter, `true` and `false` not counted (the
    /// table service allows at most
    /// [`MAX_FILTER_COMPARISONS`](crate::limits::MAX_FILTER_COMPARISONS) in one query).
    pub fn comparisons(&self) -> usize {
        match self {
            Filter::Compare { .. } => 1,
            Filter::And(left, right) | Filter::Or(left, right) => {
                left.comparisons() + right.comparisons()
            }
            Filter::Not(operand) => operand.comparisons(),
            Filter::Literal(_) => 0,
        }
    }
}

fn compare_property(entity: &impl Fields, property: &str, op: CompareOp, literal: &Value) -> bool {
    match (property, literal) {
        (PARTITION_KEY, Value::String(s)) => holds(entity.partition_key(), op, s.as_str()),
        (ROW_KEY, Value::String(s)) => holds(entity.row_key(), op, s.as_str()),
        (PARTITION_KEY | ROW_KEY, _) => false,
        (TIMESTAMP, Value::DateTime(t)) => entity
            .timestamp()
            .is_some_and(|stored| holds(&stored, op, t)),
        (TIMESTAMP, _) => false,
        (name, literal) => entity.property_is(name, |stored| compare_values(stored, op, literal)),
    }
}

/// `stored op literal` for two values of the same type, or an Int32 literal widened to
/// an Int64 or Double property's type; false for any other pair of types.
fn compare_values(stored: &Value, op: CompareOp, literal: &Value) -> bool {
    match (stored, literal) {
        (Value::String(a), Value::String(b)) => holds(a.as_str(), op, b.as_str()),
        (Value::Int32(a), Value::Int32(b)) => holds(a, op, b),
        (Value::Int64(a), Value::Int32(b)) => holds(a, op, &i64::from(*b)),
        (Value::Double(a), Value::Int32(b)) => holds(a, op, &f64::from(*b)),
        (Value::Int64(a), Value::Int64(b)) => holds(a, op, b),
        (Value::Double(a), Value::Double(b)) => holds(a, op, b),
        (Value::Boolean(a), Value::Boolean(b)) => holds(a, op, b),
        (Value::DateTime(a), Value::DateTime(b)) => holds(a, op, b),
        (Value::Guid(a), Value::Guid(b)) => holds(a, op, b),
        (Value::Binary(a), Value::Binary(b)) => holds(a.as_slice(), op, b.as_slice()),
        _ => false,
    }
}

/// `a op b` by `PartialOrd`; false for every operator, `ne` included, when the two are
/// unordered (a Double NaN on either side).
fn holds<T: PartialOrd + ?Sized>(a: &T, op: CompareOp, b: &T) -> bool {
    let Some(order) = a.partial_cmp(b) else {
        return false;
    };
    match op {
        CompareOp::Eq => order == Ordering::Equal,
        CompareOp::Ne => order != Ordering::Equal,
        CompareOp::Gt => order == Ordering::Greater,
        CompareOp::Ge => order != Ordering::Less,
        CompareOp::Lt => order == Ordering::Less,
        CompareOp::Le => order != Ordering::Greater,
    }
}
