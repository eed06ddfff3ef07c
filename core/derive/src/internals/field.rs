//! The fields of a struct as tablekit stores them: each field's property, its storage and
//! its default; and the field a declaration names.

use syn::{Ident, LitStr, Path, Type};

use crate::internals::ctxt::{Ctxt, one_of};

/// How a field is stored.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Storage {
    Property,
    Json,
    Blob,
    /// Spread over many properties (a `#[wide]` map, a series' points).
    Spread,
    Skipped,
}

/// `default` or `default = "path"`.
#[derive(Clone)]
pub(crate) enum DefaultAttr {
    Trait,
    Path(Path),
}

/// A field of the struct: its name, type, property and storage.
pub(crate) struct FieldModel {
    pub(crate) ident: Ident,
    pub(crate) name: String,
    pub(crate) ty: Type,
    pub(crate) property: String,
    pub(crate) storage: Storage,
    pub(crate) default: Option<DefaultAttr>,
}

/// Whether a field's type is an `Option`.
pub(crate) fn is_option(ty: &Type) -> bool {
    match ty {
        Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "Option"),
        _ => false,
    }
}

/// The field a declaration names at `at`, in its `place` (`key template`, `` `properties` ``);
/// a name no field has is an error there that lists the fields.
pub(crate) fn named<'a>(
    cx: &Ctxt,
    fields: &'a [FieldModel],
    name: &str,
    at: &LitStr,
    place: &str,
) -> Option<&'a FieldModel> {
    let found = fields.iter().find(|f| f.name == name);
    if found.is_none() {
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        cx.error_spanned(
            at,
            format!(
                "unknown field `{name}` in {place}, expected one of {}",
                one_of(&names)
            ),
        );
    }
    found
}
