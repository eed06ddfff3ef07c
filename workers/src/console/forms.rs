//! The forms of the console's actions: their fields, and what their CSRF token and
//! nonce allow.
//!
//! Each rendered action form carries a fresh nonce; an action runs once per nonce, and
//! its outcome is kept: a double click or a reload shows the first outcome and does
//! nothing again.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use axum::http::StatusCode;
use axum::response::Response;

use super::access::random_hex;
use super::view::Outcome;
use super::{Console, html, view};

/// How many action outcomes are kept (the oldest go first).
const KEPT_OUTCOMES: usize = 4096;

/// The nonces of the action forms and what their actions did.
#[derive(Default)]
pub(super) struct Nonces {
    kept: Mutex<Kept>,
}

#[derive(Default)]
struct Kept {
    order: VecDeque<String>,
    by_nonce: HashMap<String, Outcome>,
}

/// What an action's nonce says.
pub(super) enum Once {
    /// The nonce is new: the action runs now.
    First,
    /// The action already ran (a double click, a reload); its outcome is kept.
    Done,
}

impl Nonces {
    /// A fresh nonce for an action form.
    pub(super) fn fresh() -> String {
        random_hex(16)
    }

    /// Whether the action of `nonce` already ran.
    pub(super) fn once(&self, nonce: &str) -> Once {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        match kept.by_nonce.get(nonce) {
            Some(_) => Once::Done,
            None => Once::First,
        }
    }

    /// Claims `nonce` for an action; returns `false` when another request with the same
    /// nonce claimed it first (it ran concurrently: this one must not act).
    pub(super) fn claim(&self, nonce: &str) -> bool {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.by_nonce.contains_key(nonce) {
            return false;
        }
        kept.by_nonce
            .insert(nonce.to_owned(), Outcome::done("in progress"));
        kept.order.push_back(nonce.to_owned());
        while kept.order.len() > KEPT_OUTCOMES {
            if let Some(old) = kept.order.pop_front() {
                kept.by_nonce.remove(&old);
            }
        }
        true
    }

    /// Records what the action of a claimed nonce did.
    pub(super) fn finish(&self, nonce: &str, outcome: Outcome) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = kept.by_nonce.get_mut(nonce) {
            *slot = outcome;
        }
    }

    /// The outcome kept for a nonce.
    pub(super) fn outcome(&self, nonce: &str) -> Option<Outcome> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.by_nonce.get(nonce).cloned()
    }
}

/// A form body's fields, repeated names kept (the selected ids).
pub(super) struct Form(Vec<(String, String)>);

impl Form {
    pub(super) fn parse(body: &[u8]) -> Self {
        Form(
            form_urlencoded::parse(body)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn all(&self, name: &str) -> Vec<&str> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// What a form's CSRF token and nonce allow.
pub(super) enum Admit {
    /// The action runs, under this nonce (not yet claimed).
    Act(String),
    /// The nonce already acted (a double click, a reload): show its result.
    Done(String),
    /// The form is refused with this page.
    Refused(Box<Response>),
}

pub(super) fn admit_action(console: &Console, form: &Form) -> Admit {
    if !console.access.csrf_matches(form.get("csrf")) {
        return Admit::Refused(Box::new(html(
            StatusCode::FORBIDDEN,
            view::page(
                "Refused",
                None,
                view::problem(
                    "This form is not one this console rendered (its CSRF token is missing or stale): reload the page and try again.",
                ),
            ),
        )));
    }
    let Some(nonce) = form
        .get("nonce")
        .filter(|n| n.len() == 32 && n.bytes().all(|b| b.is_ascii_hexdigit()))
    else {
        return Admit::Refused(Box::new(html(
            StatusCode::BAD_REQUEST,
            view::page(
                "Refused",
                None,
                view::problem("The form has no action nonce."),
            ),
        )));
    };
    match console.nonces.once(nonce) {
        Once::Done => Admit::Done(nonce.to_owned()),
        Once::First => Admit::Act(nonce.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_acts_once_and_keeps_its_outcome() {
        let nonces = Nonces::default();
        let nonce = Nonces::fresh();
        assert!(matches!(nonces.once(&nonce), Once::First));
        assert!(nonces.claim(&nonce));
        assert!(!nonces.claim(&nonce), "a second claim");
        nonces.finish(&nonce, Outcome::done("replayed 1"));
        assert!(matches!(nonces.once(&nonce), Once::Done));
        assert_eq!(nonces.outcome(&nonce), Some(Outcome::done("replayed 1")));
    }
}
