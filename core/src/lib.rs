//! tablekit-core: the table-service data model, its limits, filters and queries, the
//! [`TableStore`] trait and its backends.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod error;
pub mod filter;
pub mod limits;
pub mod model;

pub use error::{Error, ErrorKind, Result};
pub use filter::{CompareOp, Filter, ParseError};
pub use limits::Violation;
pub use model::{EdmType, ETag, Entity, IfMatch, Properties, Value};
