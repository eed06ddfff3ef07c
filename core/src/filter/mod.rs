//! Filters: the AST, a typed builder, and the parser and formatter of the table service's
//! OData `$filter` syntax, with the comparison semantics every backend shares.
//!
//! ```
//! use tablekit_core::filter::{Filter, property_named};
//!
//! let f = property_named("PartitionKey").eq("Sales") & property_named("RowKey").ge("empid_000100");
//! assert_eq!(f.to_string(), "PartitionKey eq 'Sales' and RowKey ge 'empid_000100'");
//! assert_eq!(Filter::parse(&f.to_string()), Ok(f));
//! ```
//!
//! # Syntax
//!
//! ```text
//! filter     := or_expr
//! or_expr    := and_expr ("or" and_expr)*          left-associative
//! and_expr   := unary ("and" unary)*               left-associative
//! unary      := "not"* primary                     `not` binds tightest
//! primary    := "(" or_expr ")" | boolean | comparison
//! boolean    := "true" | "false"                   a whole condition: every entity, none
//! comparison := Property op literal | literal op Property
//! op         := "eq" | "ne" | "gt" | "ge" | "lt" | "le"
//! ```
//!
//! - Keywords (`and`, `or`, `not`, the operators), `true`, `false` and the typed-literal
//!   prefixes (`datetime`, `guid`, `binary`, `X`) are read in any case: `True`, `AND`,
//!   `GUID'…'`, `x'0aff'`. `NaN` and `INF` are read only as spelled. Tokens may be
//!   separated by any amount of space, tab, carriage return or newline.
//! - An empty `$filter` (or only whitespace) is no filter: [`Query::parse`](crate::Query::parse)
//!   gives a query without one, while [`Filter::parse`] refuses it, as a [`Filter`] always
//!   selects by something.
//! - `true` and `false` stand alone as a whole condition (`true`,
//!   `(true and RowKey eq '1') or PartitionKey eq 'b'`), or as a comparison's literal
//!   (`Active eq true`, `false lt Active`). A comparison needs a property on one side:
//!   `true eq true` and `1 eq 1` are refused.
//! - A property is an identifier: a letter or `_`, then letters, digits or `_` (Unicode
//!   letters and digits included). `PartitionKey`, `RowKey` and `Timestamp` are ordinary
//!   identifiers. Keywords and the word literals (`true`, `false`, in any case, `NaN`,
//!   `INF`) cannot name a property.
//! - `literal op Property` is read as `Property op' literal` with the operator flipped
//!   (`30 lt Age` is `Age gt 30`), so the tree always has the property on the left.
//! - Literals, by type:
//!
//!   | type     | literal                                                              |
//!   |----------|----------------------------------------------------------------------|
//!   | String   | `'it''s'`: single quotes, `''` for a quote, any other character as is |
//!   | Int32    | `-?[0-9]+`, within `i32`                                             |
//!   | Int64    | `-?[0-9]+L` (or `l`), within `i64`                                   |
//!   | Double   | `1.5`, `-2.0`, `1e10`, `1.5E-3`, `5d`, `1.5D`, `NaN`, `INF`, `-INF`; finite unless spelled `INF` |
//!   | Boolean  | `true`, `false`                                                      |
//!   | DateTime | `datetime'2008-07-10T00:00:00Z'`: RFC 3339, any offset (converted to UTC), at most 9 fractional digits, years 0000 to 9999 in UTC |
//!   | Guid     | `guid'xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'`, hex in either case     |
//!   | Binary   | `X'0aff'` or `binary'0aff'` (prefix in any case): an even number of hex digits, either case |
//!
//! - A filter nests at most [`MAX_NESTING`] levels: at most that many parentheses open at
//!   once, and at most that many `and`, `or` and `not` on any path from the whole filter
//!   down to a comparison (a chain `a and b and c` counts two).
//!
//! Errors name the 1-based column (in characters) of the first token that does not fit,
//! what was expected there and what was found.
//!
//! # Semantics
//!
//! Every backend evaluates filters as [`Filter::matches`] does; a backend that
//! translates filters (to SQL, or to the table service itself) must give the same
//! answers.
//!
//! - **Lookup.** `PartitionKey` and `RowKey` are Strings taken from the entity's keys;
//!   `Timestamp` is a DateTime taken from the entity's timestamp, absent when the entity
//!   has none; any other name is a user property, absent when the entity does not have
//!   it.
//! - **Types.** A comparison holds only when the property is present *and* its
//!   [`EdmType`](crate::EdmType) is the literal's, with one widening, the table
//!   service's: an **Int32 literal** compares numerically with Int32, **Int64 and Double**
//!   properties (`Price eq 5` holds for the Double `5.0`, `Big gt 4` for the Int64 `5`).
//!   An Int64 literal compares only with Int64 properties and a Double literal only with
//!   Double properties (`Age eq 27L` and `Age eq 27.0` never hold for the Int32 `27`).
//!   An absent property or any other pair of types makes the comparison false for every
//!   operator, `ne` included: a String never equals a number.
//!
//!   | literal \ property | Int32 | Int64 | Double |
//!   |--------------------|-------|-------|--------|
//!   | Int32 (`5`)        | yes   | yes   | yes    |
//!   | Int64 (`5L`)       | no    | yes   | no     |
//!   | Double (`5.0`)     | no    | no    | yes    |
//!
//!   The rule follows the table service as observed through Azure Storage Explorer
//!   (an Int32 clause finds Int64 and Double values; an Int64 clause finds neither Int32
//!   nor Double values) and its documentation ("the constant value must be of the same
//!   data type as the property in order for the filter to return valid results").
//!   Azurite differs: see [Azurite](#azurite).
//! - **Order within a type.**
//!   - String: ordinal, by Unicode code point (Rust's `str` order); no collation, no
//!     case folding.
//!   - Int32, Int64: integer order.
//!   - Double: IEEE order. A comparison with NaN on either side is false for every
//!     operator, `ne` included; `-0.0 eq 0.0` holds.
//!   - Boolean: `false` < `true`.
//!   - DateTime: chronological.
//!   - Guid: by its 16 bytes in order (the order of [`uuid::Uuid`]).
//!   - Binary: lexicographic by bytes (a proper prefix sorts first).
//! - **Logic.** `and` and `or` are two-valued boolean logic; `not` negates its operand,
//!   so `not (Age eq 30)` holds for an entity without `Age`. `true` holds for every
//!   entity, `false` for none.
//!
//! # Azurite
//!
//! The emulator's own `$filter` answers differ from the service's in these cases (the
//! Azure backend filters every result again by the rules above, so they show only with
//! `AzureTableStore::options().result_filtering(false)`; `core/tests/azure_differential.rs`
//! asserts those it can send):
//!
//! - numbers: Int32 and Double values compare with each other both ways (`Age gt 40.5`
//!   holds for the Int32 `41`); an Int32 literal never *equals* an Int64 value, but
//!   orders against Int64 values and numeric-looking Strings by JavaScript coercion
//!   (`N gt 4` holds for the String `'5'`); an Int64 literal against an Int32, Double or
//!   Boolean value fails the request (500);
//! - `ne` holds across types (`N ne 5` holds for the String `'5'` and the Int64 `5`);
//! - a filter without any property is refused (400) unless it is exactly `true` or
//!   `false`: `True`, `not true` and `(true)` are refused;
//! - DateTimes compare to the millisecond; Binary values do not order; `NaN`, `INF` and
//!   `1e10` are not numbers to it;
//! - it reads text this parser refuses or reads otherwise: `"double-quoted"` strings;
//!   `5d`, `5f`, `5.` and `5l` as property names (absent, so `N eq 5l` holds where `N` is
//!   absent, while this parser reads `5l` as the Int64 `5`); one `not` at most before a
//!   comparison (`not not A eq 1` is refused, `not (not (A eq 1))` read).

use std::fmt;

use crate::model::Value;

mod builder;
mod eval;
mod format;
mod parse;
#[cfg(test)]
mod tests;

pub use builder::{Property, literal, partition_key, property_named, row_key, timestamp};
pub(crate) use eval::Fields;

/// The deepest nesting [`Filter::parse`] accepts (see the [module docs](self)).
pub const MAX_NESTING: usize = 100;

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareOp {
    /// `eq`
    Eq,
    /// `ne`
    Ne,
    /// `gt`
    Gt,
    /// `ge`
    Ge,
    /// `lt`
    Lt,
    /// `le`
    Le,
}

/// A filter expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Filter {
    /// `Property op literal`.
    Compare {
        /// The property (or system property `PartitionKey`, `RowKey`, `Timestamp`).
        property: String,
        /// The operator.
        op: CompareOp,
        /// The typed literal.
        value: Value,
    },
    /// Both hold.
    And(Box<Filter>, Box<Filter>),
    /// Either holds.
    Or(Box<Filter>, Box<Filter>),
    /// The operand does not hold.
    Not(Box<Filter>),
    /// `true` (every entity) or `false` (none) as a whole condition.
    Literal(bool),
}

/// A `$filter` string that could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid filter at column {column}: expected {expected}, found {found}")]
pub struct ParseError {
    /// 1-based column (in characters) where the problem starts.
    pub column: usize,
    /// What the parser expected there.
    pub expected: String,
    /// What it found instead.
    pub found: String,
}

impl fmt::Display for CompareOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CompareOp::Eq => "eq",
            CompareOp::Ne => "ne",
            CompareOp::Gt => "gt",
            CompareOp::Ge => "ge",
            CompareOp::Lt => "lt",
            CompareOp::Le => "le",
        })
    }
}
