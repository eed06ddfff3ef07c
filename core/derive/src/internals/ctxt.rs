//! Error collection: every check records its errors and carries on, so one compile shows
//! every mistake in a declaration.

use std::cell::RefCell;
use std::fmt::Display;

use proc_macro2::TokenStream;
use quote::ToTokens;

/// The errors found so far.
#[derive(Default)]
pub(crate) struct Ctxt {
    errors: RefCell<Vec<syn::Error>>,
}

impl Ctxt {
    /// Records an error on the tokens of `at`.
    pub(crate) fn error_spanned(&self, at: impl ToTokens, message: impl Display) {
        self.errors
            .borrow_mut()
            .push(syn::Error::new_spanned(at.into_token_stream(), message));
    }

    /// Records an error.
    pub(crate) fn syn_error(&self, error: syn::Error) {
        self.errors.borrow_mut().push(error);
    }

    /// `Ok` when no error was recorded, else all of them as one compile error.
    pub(crate) fn check(self) -> Result<(), TokenStream> {
        let errors = self.errors.into_inner();
        let mut iter = errors.into_iter();
        match iter.next() {
            None => Ok(()),
            Some(mut first) => {
                for error in iter {
                    first.combine(error);
                }
                Err(first.to_compile_error())
            }
        }
    }
}

/// `` `a`, `b` or `c` ``.
pub(crate) fn one_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}
