//! The workers return tablekit's one error, [`tablekit_core::Error`]: its queue kinds (a
//! broker that is down or refuses, a queue not declared yet, a setting that is wrong)
//! sit beside the store's and the patterns' failures.

pub use tablekit_core::error::{Error, Result};
