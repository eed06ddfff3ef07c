//! The model every part of the derive shares: error collection, reading attribute values,
//! the fields as stored, key templates, the naming rules, what the keyed declarations check
//! alike and the pieces of generated code they all use. Nothing here knows a particular
//! declaration.

pub(crate) mod attr;
pub(crate) mod budget;
pub(crate) mod case;
pub(crate) mod ctxt;
pub(crate) mod duration;
pub(crate) mod field;
pub(crate) mod handle;
pub(crate) mod keyed;
pub(crate) mod names;
pub(crate) mod open;
pub(crate) mod scope;
pub(crate) mod template;
pub(crate) mod tokens;
