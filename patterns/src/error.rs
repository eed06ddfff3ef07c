//! The pattern modules return tablekit's one error, [`tablekit_core::Error`]: its kinds
//! cover the store's failures and what the patterns add (a taken unique index value,
//! contention that outlasted the retries, a record that does not read).

pub use tablekit_core::error::{Error, Result};

/// JSON text of a record tablekit writes.
pub(crate) fn json<T: serde::Serialize + ?Sized>(what: &str, value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|source| Error::encode(what, source))
}

/// An operation's retry loop spent its attempts: a retryable failure, as
/// [`Error::Contention`] is.
impl From<tablekit_core::retry::Exhausted> for crate::consistency::OperationError {
    fn from(e: tablekit_core::retry::Exhausted) -> Self {
        Error::from(e).into()
    }
}
