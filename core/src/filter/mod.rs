//! Filters: the AST, a typed builder, and the parser and formatter of the table service's
//! OData `$filter` syntax, with the comparison semantics every backend shares.

use std::fmt;

use crate::model::Value;

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
