//! Addresses the pattern modules share: an entity's ([`EntityRef`]) and the encoding of
//! keys into blob names.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC};

/// The characters a key keeps in a blob name; the rest are percent-encoded.
pub(crate) const BLOB_NAME_SET: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_');

pub use tablekit_core::EntityRef;
