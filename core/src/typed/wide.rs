//! The typed parts of wide entities and data series that the derive's generated code
//! names: a field spread over many properties ([`SpreadField`]: a map of values, or the
//! [`Points`] of a series), and the [`SeriesType`] a `#[series(..)]` declaration
//! implements. The tables that store them in chunks of one partition, and the typed
//! `add` and range reads of a series, live in `tablekit_patterns::index::wide` and
//! `::series`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::EntityType;
use super::field::{FieldProblem, FieldValue};
use crate::model::{EdmType, Value};

/// What separates a spread field's property name from each entry's part:
/// `readings_temp`, `views_0042`.
pub const SPREAD_SEPARATOR: char = '_';

/// The most application properties one entity holds: the table service's 252, less the
/// eight tablekit may keep beside them (kind, type version, index record, version,
/// expiry, chunk count and versions, a marker). The derive checks a type against it.
pub const FIELDS_PER_ENTITY: usize = 244;

/// The most application properties each further chunk of a wide entity holds.
pub const FIELDS_PER_CHUNK: usize = 250;

/// The most chunks one wide entity may have: its chunks are written in one entity group
/// transaction of at most 100 operations, which also holds the write's own (its intent,
/// index copies, follow-up work).
pub const MAX_CHUNKS: usize = 90;

/// A field stored as many properties, one per entry, named `<property>_<entry>`.
pub trait SpreadField: Sized {
    /// The entries, with the part of each property name after the separator.
    ///
    /// # Errors
    /// A [`FieldProblem`] for an entry name a property cannot take or a value that does
    /// not convert.
    fn entries(&self) -> Result<Vec<(String, Value)>, FieldProblem>;

    /// The field from the stored entries (in name order).
    ///
    /// # Errors
    /// A [`FieldProblem`] for a value that does not read.
    fn from_entries(entries: Vec<(String, Value)>) -> Result<Self, FieldProblem>;
}

fn valid_entry(name: &str) -> Result<(), FieldProblem> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(FieldProblem::OutOfRange {
            value: format!("{name:?}"),
            target: "a property name part (1 to 200 ASCII letters, digits or `_`)",
        })
    }
}

impl<V: FieldValue> SpreadField for BTreeMap<String, V> {
    fn entries(&self) -> Result<Vec<(String, Value)>, FieldProblem> {
        let mut out = Vec::with_capacity(self.len());
        for (name, value) in self {
            valid_entry(name)?;
            if let Some(value) = value.to_value()? {
                out.push((name.clone(), value));
            }
        }
        Ok(out)
    }

    fn from_entries(entries: Vec<(String, Value)>) -> Result<Self, FieldProblem> {
        entries
            .into_iter()
            .map(|(name, value)| Ok((name, V::from_value(Some(value))?)))
            .collect()
    }
}

/// The points of one span of a data series: point `i` covers
/// `[start + i * every, start + (i + 1) * every)`. Stored one property per point
/// (`views_0000`, `views_0001` …); a point never written reads as the value's default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Points<V> {
    values: Vec<V>,
}

impl<V: Clone + Default> Points<V> {
    /// `len` points, each the default value.
    pub fn zeros(len: usize) -> Self {
        Points {
            values: vec![V::default(); len],
        }
    }

    /// Grows or shrinks to `len` points (new ones default).
    pub fn resize(&mut self, len: usize) {
        self.values.resize(len, V::default());
    }
}

impl<V> Points<V> {
    /// The number of points.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Point `i`.
    pub fn get(&self, i: usize) -> Option<&V> {
        self.values.get(i)
    }

    /// Point `i`, to change.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut V> {
        self.values.get_mut(i)
    }

    /// The points, in time order.
    pub fn iter(&self) -> std::slice::Iter<'_, V> {
        self.values.iter()
    }

    /// The points as a slice.
    pub fn as_slice(&self) -> &[V] {
        &self.values
    }
}

impl<V> From<Vec<V>> for Points<V> {
    fn from(values: Vec<V>) -> Self {
        Points { values }
    }
}

/// The name part of point `i`.
fn point_name(i: usize) -> String {
    format!("{i:04}")
}

impl<V: FieldValue + Clone + Default> SpreadField for Points<V> {
    fn entries(&self) -> Result<Vec<(String, Value)>, FieldProblem> {
        let mut out = Vec::with_capacity(self.values.len());
        for (i, value) in self.values.iter().enumerate() {
            if let Some(value) = value.to_value()? {
                out.push((point_name(i), value));
            }
        }
        Ok(out)
    }

    fn from_entries(entries: Vec<(String, Value)>) -> Result<Self, FieldProblem> {
        let mut points = Points { values: Vec::new() };
        for (name, value) in entries {
            let Ok(i) = name.parse::<usize>() else {
                continue;
            };
            if i >= 100_000 {
                return Err(FieldProblem::OutOfRange {
                    value: name,
                    target: "a point of a series (at most 100,000)",
                });
            }
            if points.values.len() <= i {
                points.resize(i + 1);
            }
            points.values[i] = V::from_value(Some(value))?;
        }
        Ok(points)
    }
}

/// The points of a span as one value (`#[series(spill = "blob")]`): a JSON array, kept in
/// the blob store by a table that has one.
impl<V: serde::Serialize + serde::de::DeserializeOwned> FieldValue for Points<V> {
    const EDM: EdmType = EdmType::Binary;

    fn to_value(&self) -> Result<Option<Value>, FieldProblem> {
        serde_json::to_vec(&self.values)
            .map(|bytes| Some(Value::Binary(bytes)))
            .map_err(|e| FieldProblem::Json(e.to_string()))
    }

    fn from_value(value: Option<Value>) -> Result<Self, FieldProblem> {
        match value.ok_or(FieldProblem::Missing)? {
            Value::Binary(bytes) => serde_json::from_slice(&bytes)
                .map(|values| Points { values })
                .map_err(|e| FieldProblem::Json(e.to_string())),
            other => Err(FieldProblem::WrongType {
                expected: "Edm.Binary",
                found: other.edm_type(),
            }),
        }
    }
}

/// A value a series adds to.
pub trait SeriesValue: FieldValue + Copy + Default + PartialEq + Send + Sync + 'static {
    /// `self + delta`, saturating where the type does.
    fn plus(self, delta: Self) -> Self;
}

impl SeriesValue for i64 {
    fn plus(self, delta: Self) -> Self {
        self.saturating_add(delta)
    }
}

impl SeriesValue for i32 {
    fn plus(self, delta: Self) -> Self {
        self.saturating_add(delta)
    }
}

impl SeriesValue for f64 {
    fn plus(self, delta: Self) -> Self {
        self + delta
    }
}

/// An entity type that declares a data series (`#[series(..)]`): one entity per span
/// (`span`, at `start`), a point per step (`every`).
pub trait SeriesType: EntityType + Clone {
    /// The points' value.
    type Value: SeriesValue;
    /// The step, in seconds.
    const EVERY_SECONDS: i64;
    /// The span of one entity, in seconds.
    const SPAN_SECONDS: i64;
    /// Points per span (`SPAN_SECONDS / EVERY_SECONDS`).
    const POINTS: usize;

    /// The start of the span this value holds.
    fn start(&self) -> DateTime<Utc>;
    /// Sets the start of the span.
    fn set_start(&mut self, start: DateTime<Utc>);
    /// The points.
    fn points(&self) -> &Points<Self::Value>;
    /// The points, to change.
    fn points_mut(&mut self) -> &mut Points<Self::Value>;
}

/// How a wide type is stored (`#[wide]`, or a series that spills to chunks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WideMeta {
    /// The most chunks one entity may take.
    pub chunks: usize,
}

/// A data series declaration, for introspection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeriesMeta {
    /// The field holding the span's start.
    pub start: &'static str,
    /// The field holding the points.
    pub points: &'static str,
    /// The step, in seconds.
    pub every_seconds: i64,
    /// The span, in seconds.
    pub span_seconds: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_spread_and_read_back_with_gaps_as_defaults() {
        let points: Points<i64> = vec![1, 0, 3].into();
        let entries = points.entries().expect("spreads");
        assert_eq!(entries[2], ("0002".to_owned(), Value::Int64(3)));
        let back = Points::<i64>::from_entries(vec![
            ("0000".to_owned(), Value::Int64(1)),
            ("0002".to_owned(), Value::Int64(3)),
        ])
        .expect("reads");
        assert_eq!(back, points);
    }

    #[test]
    fn a_map_entry_a_property_cannot_take_is_refused() {
        let mut map = BTreeMap::new();
        map.insert("bad name".to_owned(), 1i64);
        assert!(matches!(
            map.entries(),
            Err(FieldProblem::OutOfRange { .. })
        ));
    }
}
