//! The `$filter` formatter: canonical OData text that [`Filter::parse`] reads back into
//! the same tree.

use std::fmt::{self, Write};

use chrono::SecondsFormat;

use super::Filter;
use crate::model::Value;

impl Filter {
    /// The filter as canonical OData `$filter` text; the same as `to_string()`.
    ///
    /// ```
    /// use tablekit_core::filter::property_named;
    ///
    /// let f = property_named("PartitionKey").eq("Sales") & property_named("RowKey").ge("empid_000100");
    /// assert_eq!(f.to_odata(), "PartitionKey eq 'Sales' and RowKey ge 'empid_000100'");
    /// ```
    pub fn to_odata(&self) -> String {
        self.to_string()
    }
}

/// Canonical OData: comparisons bare (`Age ge 30`) with the property on the left;
/// keywords, `true`, `false` and type prefixes in lowercase (`X` for Binary); an
/// `and`/`or` operand that is itself an `and` or `or` in parentheses, so the tree's shape
/// survives a round trip; `not (…)` always parenthesised.
///
/// `Filter::parse(&f.to_string())` gives back `f` whenever every property name is an
/// identifier other than a keyword in any case (`and or not eq ne gt ge lt le true
/// false`) or `NaN`, `INF`,
/// every DateTime falls in years 0000 to 9999 and the tree nests at most
/// [`MAX_NESTING`](super::MAX_NESTING) levels; the parser never builds any other filter.
/// (A NaN literal round-trips too, although `NaN != NaN` makes the two trees unequal.)
impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Filter::Compare {
                property,
                op,
                value,
            } => {
                write!(f, "{property} {op} ")?;
                write_literal(f, value)
            }
            Filter::And(left, right) => write_logical(f, left, "and", right),
            Filter::Or(left, right) => write_logical(f, left, "or", right),
            Filter::Not(operand) => write!(f, "not ({operand})"),
            Filter::Literal(value) => write!(f, "{value}"),
        }
    }
}

fn write_logical(
    f: &mut fmt::Formatter<'_>,
    left: &Filter,
    keyword: &str,
    right: &Filter,
) -> fmt::Result {
    write_operand(f, left)?;
    write!(f, " {keyword} ")?;
    write_operand(f, right)
}

fn write_operand(f: &mut fmt::Formatter<'_>, operand: &Filter) -> fmt::Result {
    match operand {
        Filter::And(..) | Filter::Or(..) => write!(f, "({operand})"),
        Filter::Compare { .. } | Filter::Not(_) | Filter::Literal(_) => write!(f, "{operand}"),
    }
}

fn write_literal(f: &mut fmt::Formatter<'_>, value: &Value) -> fmt::Result {
    match value {
        Value::String(s) => {
            f.write_char('\'')?;
            for (i, part) in s.split('\'').enumerate() {
                if i > 0 {
                    f.write_str("''")?;
                }
                f.write_str(part)?;
            }
            f.write_char('\'')
        }
        Value::Int32(v) => write!(f, "{v}"),
        Value::Int64(v) => write!(f, "{v}L"),
        Value::Double(v) => write_double(f, *v),
        Value::Boolean(v) => write!(f, "{v}"),
        Value::DateTime(v) => write!(
            f,
            "datetime'{}'",
            v.to_rfc3339_opts(SecondsFormat::AutoSi, true)
        ),
        Value::Guid(v) => write!(f, "guid'{}'", v.hyphenated()),
        Value::Binary(bytes) => {
            f.write_str("X'")?;
            for b in bytes {
                write!(f, "{b:02x}")?;
            }
            f.write_char('\'')
        }
    }
}

/// Writes a Double so that it reads back as the same Double: `{:?}` is the shortest text
/// that round-trips, and a `.0` is added if it has neither `.` nor an exponent, so that
/// it cannot read back as an Int32.
fn write_double(f: &mut fmt::Formatter<'_>, v: f64) -> fmt::Result {
    if v.is_nan() {
        f.write_str("NaN")
    } else if v.is_infinite() {
        f.write_str(if v > 0.0 { "INF" } else { "-INF" })
    } else {
        let text = format!("{v:?}");
        f.write_str(&text)?;
        if text.contains(['.', 'e', 'E']) {
            Ok(())
        } else {
            f.write_str(".0")
        }
    }
}
