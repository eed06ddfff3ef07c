//! What the declarations that are named within the type and keyed by templates
//! (`#[index]`, `#[index_entity]`, `#[unique]`) check alike: a required name, spelt as names
//! are and taken by no other declaration of the type; required key templates, naming fields
//! that can be part of a key; and a table of their own, named as tables are.

use std::collections::HashMap;

use proc_macro2::{Span, TokenStream};
use syn::LitStr;

use crate::internals::attr::{index_span, required};
use crate::internals::ctxt::Ctxt;
use crate::internals::field::FieldModel;
use crate::internals::names::{check_name, check_table};
use crate::internals::template::{CheckedTemplate, checked_template};

/// One attribute of a keyed declaration being checked against the entity's fields.
pub(crate) struct Keyed<'a> {
    cx: &'a Ctxt,
    fields: &'a [FieldModel],
    /// The attribute (`index_entity`), as a missing key's example writes it.
    attribute: &'static str,
    /// A token at the attribute's name, where a missing key is reported.
    at: TokenStream,
}

impl<'a> Keyed<'a> {
    /// The attribute `attribute` whose name is at `span`.
    pub(crate) fn new(
        cx: &'a Ctxt,
        fields: &'a [FieldModel],
        attribute: &'static str,
        span: Span,
    ) -> Self {
        Keyed {
            cx,
            fields,
            attribute,
            at: index_span(span),
        }
    }

    /// The declaration's name: required (`example` is a name to show when it is missing),
    /// spelt as names are and not one of `names`, to which it is added; `what` names the
    /// declaration in those errors (`index entity`).
    pub(crate) fn name<'l>(
        &self,
        lit: Option<&'l LitStr>,
        example: &str,
        what: &str,
        names: &mut HashMap<String, Span>,
    ) -> Option<&'l LitStr> {
        let name = self.required(lit, "name", example);
        if let Some(name) = name {
            check_name(self.cx, name, names, what);
        }
        name
    }

    /// The key template given as `key`: required (`example` is a template to show when it
    /// is missing) and checked against the fields.
    pub(crate) fn template(
        &self,
        key: &str,
        lit: Option<&LitStr>,
        example: &str,
    ) -> Option<CheckedTemplate> {
        self.required(lit, key, example)
            .and_then(|lit| checked_template(self.cx, lit, self.fields))
    }

    /// The declaration's own table, when it names one.
    pub(crate) fn table(&self, lit: Option<&LitStr>) {
        if let Some(table) = lit {
            check_table(self.cx, table);
        }
    }

    /// `key`'s value; its absence is an error at the attribute, showing
    /// `#[attribute(key = "example", …)]`.
    fn required<'l>(
        &self,
        lit: Option<&'l LitStr>,
        key: &str,
        example: &str,
    ) -> Option<&'l LitStr> {
        let shown = format!("#[{}({key} = \"{example}\", …)]", self.attribute);
        required(self.cx, lit, &self.at, key, &shown)
    }
}
