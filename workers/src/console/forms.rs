//! The forms of the console's actions: their fields, and what their CSRF token and
//! nonce allow.
//!
//! **A nonce per form, bound to what it does.** Every action button carries its own
//! nonce, issued for one action on one target (a message's handle, the messages a page
//! listed, a dry run's set, a queue to pause): `<issued>.<random>.<mac>`, the MAC an
//! HMAC-SHA256 under a key of this console process over the time, the random part, the
//! action and the target. A form whose nonce was issued for another action or target,
//! forged, or older than [`VALID_FOR`] is refused; nothing is stored per page rendered.
//!
//! **Taken once.** An action runs once per nonce and its outcome is kept: a double click,
//! a reload, or the same form on a page the browser restored from its back-forward cache
//! shows the first outcome, marked as already done, and does nothing again. The used
//! nonces are kept for as long as they are valid, up to [`KEPT_OUTCOMES`] (the oldest go
//! first: only more actions than that within [`VALID_FOR`] could make one act twice).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::Response;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use super::secret::random_hex;
use super::view::{IssueNonce, Outcome};
use super::{Console, html, view};

/// How many action outcomes are kept (the oldest go first).
const KEPT_OUTCOMES: usize = 65_536;

/// How long a rendered form may act: a page older than this is reloaded first.
pub(super) const VALID_FOR: Duration = Duration::from_secs(4 * 3600);

/// The nonces of the action forms and what their actions did.
pub(super) struct Nonces {
    key: [u8; 32],
    kept: Mutex<Kept>,
}

impl Default for Nonces {
    fn default() -> Self {
        let mut key = [0u8; 32];
        rand::rng().fill_bytes(&mut key);
        Nonces {
            key,
            kept: Mutex::default(),
        }
    }
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
    /// The action already ran (a double click, a reload, a restored page); its outcome is
    /// kept.
    Done,
}

/// Why a nonce does not allow its action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stale {
    /// Not a nonce this console issued, or issued for another action or target.
    Foreign,
    /// Issued longer than [`VALID_FOR`] ago.
    Expired,
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Nonces {
    fn mac(&self, issued: &str, random: &str, action: &str, target: &str) -> Hmac<Sha256> {
        // The key is 32 bytes: HMAC takes a key of any length.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
        for part in [issued, random, action, target] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part.as_bytes());
        }
        mac
    }

    /// A fresh nonce for a form doing `action` on `target`.
    pub(super) fn issue(&self, action: &str, target: &str) -> String {
        let issued = format!("{:x}", now_secs());
        let random = random_hex(8);
        let mac = self.mac(&issued, &random, action, target).finalize();
        let tag: String = mac
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!("{issued}.{random}.{tag}")
    }

    /// Whether `nonce` was issued by this console for `action` on `target`, and not too
    /// long ago (the MAC compared in constant time).
    pub(super) fn verify(&self, nonce: &str, action: &str, target: &str) -> Result<(), Stale> {
        let mut parts = nonce.split('.');
        let (Some(issued), Some(random), Some(tag), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Stale::Foreign);
        };
        let Some(tag) = hex_bytes(tag) else {
            return Err(Stale::Foreign);
        };
        self.mac(issued, random, action, target)
            .verify_slice(&tag)
            .map_err(|_| Stale::Foreign)?;
        let issued = u64::from_str_radix(issued, 16).map_err(|_| Stale::Foreign)?;
        if now_secs().saturating_sub(issued) > VALID_FOR.as_secs() {
            return Err(Stale::Expired);
        }
        Ok(())
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

impl IssueNonce for Nonces {
    fn issue(&self, action: &str, target: &str) -> String {
        Nonces::issue(self, action, target)
    }
}

fn hex_bytes(hex: &str) -> Option<Vec<u8>> {
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect()
}

/// A form body's fields, repeated names kept (the selected handles).
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
    /// The nonce already acted (a double click, a reload, a restored page): show its
    /// result, marked as earlier.
    Done(String),
    /// The form is refused with this page.
    Refused(Box<Response>),
}

/// A refusal page.
pub(super) fn refusal(status: StatusCode, message: &str) -> Response {
    html(status, view::page("Refused", None, view::problem(message)))
}

/// The refusal (`400`) of a page's address whose query has a value the page does not
/// know: read as strictly as the API reads its own ([`Params`](super::api::problem::Params)),
/// the problem names the parameter; a value is never read as another.
pub(super) fn query_refused(problem: &super::api::problem::Problem) -> Response {
    refusal(
        StatusCode::BAD_REQUEST,
        &format!("The page's address: {}.", problem.detail()),
    )
}

/// A refusal whose page links `back` to where the form came from, what was typed and
/// ticked there kept.
pub(super) fn refusal_back(status: StatusCode, message: &str, back: &str) -> Response {
    html(
        status,
        view::page("Refused", None, view::problem_back(message, back)),
    )
}

/// Whether the form's CSRF token is this console's (the refusal recorded when not).
pub(super) fn check_csrf(
    console: &Console,
    form: &Form,
    client: std::net::SocketAddr,
) -> Result<(), Box<Response>> {
    if console.access.csrf_matches(form.get("csrf")) {
        return Ok(());
    }
    console
        .access
        .refused(super::security_log::Refusal::Csrf, client.ip());
    Err(Box::new(refusal(
        StatusCode::FORBIDDEN,
        "This form is not one this console rendered (its CSRF token is missing or stale): reload the page and try again.",
    )))
}

/// What a form may do: its CSRF token checked, then its `nonce` against the `action` and
/// `target` it claims.
pub(super) fn admit_action(
    console: &Console,
    form: &Form,
    client: std::net::SocketAddr,
    nonce: Option<&str>,
    action: &str,
    target: &str,
) -> Admit {
    if let Err(refused) = check_csrf(console, form, client) {
        return Admit::Refused(refused);
    }
    let Some(nonce) = nonce.filter(|n| !n.is_empty()) else {
        return Admit::Refused(Box::new(refusal(
            StatusCode::BAD_REQUEST,
            "The form has no action nonce: reload the page and try again.",
        )));
    };
    match console.nonces.verify(nonce, action, target) {
        Ok(()) => {}
        Err(Stale::Expired) => {
            return Admit::Refused(Box::new(refusal(
                StatusCode::BAD_REQUEST,
                "This page is older than the console lets a form act (4 hours): reload it and try again. Nothing was done.",
            )));
        }
        Err(Stale::Foreign) => {
            return Admit::Refused(Box::new(refusal(
                StatusCode::BAD_REQUEST,
                "This form's nonce was not issued by this console for this action (the console restarted since, or the form was altered): reload the page and try again. Nothing was done.",
            )));
        }
    }
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
        let nonce = nonces.issue("discard-one", "q\n7");
        assert!(matches!(nonces.once(&nonce), Once::First));
        assert!(nonces.claim(&nonce));
        assert!(!nonces.claim(&nonce), "a second claim");
        nonces.finish(&nonce, Outcome::done("replayed 1"));
        assert!(matches!(nonces.once(&nonce), Once::Done));
        assert_eq!(nonces.outcome(&nonce), Some(Outcome::done("replayed 1")));
    }

    #[test]
    fn a_nonce_allows_only_the_action_and_target_it_was_issued_for() {
        let nonces = Nonces::default();
        let nonce = nonces.issue("discard-one", "q\n7");
        assert_eq!(nonces.verify(&nonce, "discard-one", "q\n7"), Ok(()));
        assert_eq!(
            nonces.verify(&nonce, "discard-one", "q\n8"),
            Err(Stale::Foreign),
            "another message"
        );
        assert_eq!(
            nonces.verify(&nonce, "replay-one", "q\n7"),
            Err(Stale::Foreign),
            "another action"
        );
        assert_eq!(
            Nonces::default().verify(&nonce, "discard-one", "q\n7"),
            Err(Stale::Foreign),
            "another console process"
        );
        for forged in ["", "a.b.c", "0.0.0.0", &nonce.replace('.', "")] {
            assert_eq!(
                nonces.verify(forged, "discard-one", "q\n7"),
                Err(Stale::Foreign)
            );
        }
        // An old one, signed right, is refused as expired.
        let issued = format!("{:x}", now_secs() - VALID_FOR.as_secs() - 5);
        let tag: String = nonces
            .mac(&issued, "00", "discard-one", "q\n7")
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            nonces.verify(&format!("{issued}.00.{tag}"), "discard-one", "q\n7"),
            Err(Stale::Expired)
        );
    }

    #[test]
    fn two_nonces_for_the_same_action_differ() {
        let nonces = Nonces::default();
        assert_ne!(nonces.issue("a", "t"), nonces.issue("a", "t"));
    }
}
