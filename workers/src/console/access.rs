//! Who may use the console, and which requests may change anything.
//!
//! - **Token.** Bound to loopback, the console may run without one; bound to any other
//!   address it refuses to start without one. With a token, every request carries it (a
//!   `Bearer` header, or the `HttpOnly`, `SameSite=Strict` cookie the login form sets), and
//!   it is compared in constant time.
//! - **Host.** Without a token, only requests that name a loopback host are answered: a
//!   page of another site cannot reach the console through a name that resolves to
//!   127.0.0.1 (DNS rebinding).
//! - **CSRF.** Every action is a POST carrying the console's CSRF token (a random value of
//!   this process, in each form it renders); a POST whose `Origin` is another site is
//!   refused before its form is read. GET never changes anything.
//!
//! Each form acting once (its nonce) is the forms' room: [`super::forms`].

use std::net::SocketAddr;

use axum::http::{HeaderMap, header};
use rand::RngCore;
use subtle::ConstantTimeEq;

use crate::error::{Error, Result};

/// The cookie that carries the token of a logged-in browser.
pub(super) const COOKIE: &str = "tablekit_console";

/// The shortest token accepted.
pub const MIN_TOKEN_LEN: usize = 16;

/// The console's access rules.
pub(super) struct Access {
    token: Option<String>,
    csrf: String,
}

pub(super) fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut buffer);
    buffer.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether two secrets are equal, in time that does not depend on where they differ.
pub(super) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

impl Access {
    /// The rules for a console bound to `bind` with `token`.
    ///
    /// # Errors
    /// [`Error::Config`] when the address is not loopback and there is no token, or the
    /// token is shorter than [`MIN_TOKEN_LEN`].
    pub(super) fn new(bind: SocketAddr, token: Option<String>) -> Result<Self> {
        let token = token.filter(|t| !t.is_empty());
        match &token {
            None if !bind.ip().is_loopback() => {
                return Err(Error::Config(format!(
                    "the console binds to {bind}, which is not loopback: give it a token (--token or TABLEKIT_CONSOLE_TOKEN, at least {MIN_TOKEN_LEN} characters)"
                )));
            }
            Some(t) if t.chars().count() < MIN_TOKEN_LEN => {
                return Err(Error::Config(format!(
                    "the console's token has {} characters; it needs at least {MIN_TOKEN_LEN}",
                    t.chars().count()
                )));
            }
            _ => {}
        }
        Ok(Access {
            token,
            csrf: random_hex(32),
        })
    }

    /// Whether the console asks for a token.
    pub(super) fn needs_token(&self) -> bool {
        self.token.is_some()
    }

    /// The CSRF token the forms carry.
    pub(super) fn csrf(&self) -> &str {
        &self.csrf
    }

    /// Whether `given` is the token (constant time).
    pub(super) fn token_matches(&self, given: &str) -> bool {
        self.token.as_deref().is_some_and(|t| same_secret(t, given))
    }

    /// Whether a request may be answered at all: the token when there is one, a loopback
    /// host name when there is none.
    pub(super) fn admits(&self, headers: &HeaderMap) -> bool {
        match &self.token {
            Some(_) => presented_token(headers).is_some_and(|t| self.token_matches(&t)),
            None => headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .is_some_and(is_loopback_host),
        }
    }

    /// Whether a POST may go on: its `Origin`, when it has one, is this console's host.
    pub(super) fn same_origin(headers: &HeaderMap) -> bool {
        let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) else {
            return true;
        };
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let origin_host = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        matches!((origin_host, host), (Some(o), Some(h)) if o.eq_ignore_ascii_case(h))
    }

    /// Whether `given` is the CSRF token (constant time).
    pub(super) fn csrf_matches(&self, given: Option<&str>) -> bool {
        given.is_some_and(|g| same_secret(&self.csrf, g))
    }
}

/// The token a request presents: `Authorization: Bearer …` or the login cookie.
fn presented_token(headers: &HeaderMap) -> Option<String> {
    if let Some(bearer) = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
    {
        return Some(bearer.trim().to_owned());
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then(|| percent_decode(value))
        })
}

fn percent_decode(value: &str) -> String {
    form_urlencoded::parse(format!("v={value}").as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// Whether a `Host` header names this machine: `localhost`, `127.x.x.x` or `[::1]`, with
/// any port.
fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                name.clone(),
                HeaderValue::from_str(value).expect("a header"),
            );
        }
        map
    }

    #[test]
    fn off_loopback_a_token_is_required_and_must_be_long_enough() {
        let any: SocketAddr = "0.0.0.0:9465".parse().expect("an address");
        let local: SocketAddr = "127.0.0.1:9465".parse().expect("an address");
        assert!(matches!(Access::new(any, None), Err(Error::Config(_))));
        assert!(matches!(
            Access::new(any, Some(String::new())),
            Err(Error::Config(_))
        ));
        assert!(matches!(
            Access::new(any, Some("short".into())),
            Err(Error::Config(_))
        ));
        assert!(Access::new(any, Some("a-token-of-16-chars".into())).is_ok());
        assert!(Access::new(local, None).is_ok());
    }

    #[test]
    fn with_a_token_every_request_must_carry_it() {
        let access = Access::new(
            "0.0.0.0:1".parse().expect("an address"),
            Some("0123456789abcdef".into()),
        )
        .expect("access");
        assert!(!access.admits(&headers(&[(header::HOST, "127.0.0.1:1")])));
        assert!(access.admits(&headers(&[(
            header::AUTHORIZATION,
            "Bearer 0123456789abcdef"
        )])));
        assert!(!access.admits(&headers(&[(
            header::AUTHORIZATION,
            "Bearer 0123456789abcdeF"
        )])));
        assert!(access.admits(&headers(&[(
            header::COOKIE,
            "other=1; tablekit_console=0123456789abcdef"
        )])));
        assert!(!access.admits(&headers(&[(header::COOKIE, "tablekit_console=wrong")])));
    }

    #[test]
    fn without_a_token_only_loopback_host_names_are_answered() {
        let access = Access::new("127.0.0.1:1".parse().expect("an address"), None).expect("access");
        for host in [
            "127.0.0.1:9465",
            "localhost:9465",
            "[::1]:9465",
            "localhost",
        ] {
            assert!(access.admits(&headers(&[(header::HOST, host)])), "{host}");
        }
        for host in ["evil.example:9465", "127.0.0.1.evil.example", ""] {
            assert!(!access.admits(&headers(&[(header::HOST, host)])), "{host}");
        }
        assert!(!access.admits(&HeaderMap::new()));
    }

    #[test]
    fn a_post_from_another_origin_is_refused() {
        assert!(Access::same_origin(&headers(&[(
            header::HOST,
            "127.0.0.1:9"
        )])));
        assert!(Access::same_origin(&headers(&[
            (header::HOST, "127.0.0.1:9"),
            (header::ORIGIN, "http://127.0.0.1:9")
        ])));
        assert!(!Access::same_origin(&headers(&[
            (header::HOST, "127.0.0.1:9"),
            (header::ORIGIN, "http://evil.example")
        ])));
        assert!(!Access::same_origin(&headers(&[
            (header::HOST, "127.0.0.1:9"),
            (header::ORIGIN, "null")
        ])));
    }

    #[test]
    fn the_csrf_token_is_compared_whole() {
        let access = Access::new("127.0.0.1:1".parse().expect("an address"), None).expect("access");
        assert!(access.csrf_matches(Some(access.csrf())));
        assert!(!access.csrf_matches(Some("x")));
        assert!(!access.csrf_matches(None));
    }
}
