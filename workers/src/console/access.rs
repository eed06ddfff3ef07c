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

use super::throttle::{Throttle, Verdict};
use crate::error::{Error, Result};

/// The cookie that carries the token of a logged-in browser.
pub(super) const COOKIE: &str = "tablekit_console";

/// The shortest token accepted. A token must also have at least [`MIN_TOKEN_DISTINCT`]
/// different characters and no whitespace or control characters (sixteen spaces, or
/// `aaaaaaaaaaaaaaaa`, are refused when the console binds).
pub const MIN_TOKEN_LEN: usize = 16;

/// The fewest different characters a token may have.
pub const MIN_TOKEN_DISTINCT: usize = 8;

/// The console's access rules.
pub(super) struct Access {
    token: Option<String>,
    csrf: String,
    throttle: Throttle,
}

/// Whether a request may be answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Admission {
    /// It carries the token, or names a loopback host on a console without one.
    Admitted,
    /// The console has a token and the request carries none.
    NoToken,
    /// The request carries a wrong token (answered at the throttle's pace).
    WrongToken,
    /// Too many wrong guesses wait: the token was not compared.
    Busy,
    /// A console without a token, asked under a host name that is not loopback.
    ForeignHost,
}

/// Refuses a token that is easy to guess.
fn check_strength(token: &str) -> Result<()> {
    let length = token.chars().count();
    if length < MIN_TOKEN_LEN {
        return Err(Error::Config(format!(
            "the console's token has {length} characters; it needs at least {MIN_TOKEN_LEN}"
        )));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::Config(
            "the console's token holds whitespace or control characters; use printable characters only (a random hex or base64 string)".to_owned(),
        ));
    }
    let distinct = token
        .chars()
        .collect::<std::collections::HashSet<_>>()
        .len();
    if distinct < MIN_TOKEN_DISTINCT {
        return Err(Error::Config(format!(
            "the console's token has {distinct} different characters; it needs at least {MIN_TOKEN_DISTINCT} (a random hex or base64 string)"
        )));
    }
    Ok(())
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
    /// token is weak: shorter than [`MIN_TOKEN_LEN`], with fewer than
    /// [`MIN_TOKEN_DISTINCT`] different characters, or holding whitespace or control
    /// characters.
    pub(super) fn new(bind: SocketAddr, token: Option<String>) -> Result<Self> {
        Self::with_throttle(bind, token, Throttle::default())
    }

    /// [`Access::new`] with its own pace for wrong guesses.
    pub(super) fn with_throttle(
        bind: SocketAddr,
        token: Option<String>,
        throttle: Throttle,
    ) -> Result<Self> {
        let token = token.filter(|t| !t.is_empty());
        match &token {
            None if !bind.ip().is_loopback() => {
                return Err(Error::Config(format!(
                    "the console binds to {bind}, which is not loopback: give it a token (--token or TABLEKIT_CONSOLE_TOKEN, at least {MIN_TOKEN_LEN} characters)"
                )));
            }
            Some(t) => check_strength(t)?,
            None => {}
        }
        Ok(Access {
            token,
            csrf: random_hex(32),
            throttle,
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

    /// What the console says to a token it is shown (the sign-in form's): compared in
    /// constant time, a wrong one answered at the pace of the console's one [`Throttle`].
    pub(super) async fn check_token(&self, given: &str) -> Verdict {
        self.throttle
            .check(|| self.token.as_deref().is_some_and(|t| same_secret(t, given)))
            .await
    }

    /// Whether a request may be answered at all: the token when there is one (a wrong
    /// one is answered at the throttle's pace), a loopback host name when there is none.
    pub(super) async fn admits(&self, headers: &HeaderMap) -> Admission {
        match &self.token {
            Some(_) => match presented_token(headers) {
                None => Admission::NoToken,
                Some(given) => match self.check_token(&given).await {
                    Verdict::Right => Admission::Admitted,
                    Verdict::Wrong => Admission::WrongToken,
                    Verdict::Busy => Admission::Busy,
                },
            },
            None if headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .is_some_and(is_loopback_host) =>
            {
                Admission::Admitted
            }
            None => Admission::ForeignHost,
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

/// Whether a `Host` header names this machine, read strictly: `localhost` or an IPv4
/// loopback address (`127.x.x.x`), or a bracketed IPv6 loopback (`[::1]`), each with an
/// optional port of one to five digits, and nothing else — no user info, no trailing
/// dot, no other name around them.
fn is_loopback_host(host: &str) -> bool {
    let (loopback, port) = match host.strip_prefix('[') {
        Some(rest) => {
            let Some((inside, after)) = rest.split_once(']') else {
                return false;
            };
            let port = match after {
                "" => None,
                _ => match after.strip_prefix(':') {
                    Some(port) => Some(port),
                    None => return false,
                },
            };
            let ip = inside.parse::<std::net::Ipv6Addr>();
            (ip.is_ok_and(|ip| ip.is_loopback()), port)
        }
        None => {
            let (name, port) = match host.split_once(':') {
                Some((name, port)) => (name, Some(port)),
                None => (host, None),
            };
            let ip = name.parse::<std::net::Ipv4Addr>();
            (
                name.eq_ignore_ascii_case("localhost") || ip.is_ok_and(|ip| ip.is_loopback()),
                port,
            )
        }
    };
    loopback
        && port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
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
        let message = Access::new(any, Some(" ".repeat(16)))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(message.contains("whitespace"), "{message}");
        assert!(Access::new(local, None).is_ok());
    }

    #[test]
    fn weak_tokens_are_refused_when_the_console_binds() {
        let any: SocketAddr = "0.0.0.0:9465".parse().expect("an address");
        for weak in [
            " ".repeat(16),
            "\t".repeat(20),
            "abcdefgh ijklmnop".to_owned(),
            "abcdefgh\u{0}ijklmnop".to_owned(),
            "a".repeat(32),
            "abababababababababab".to_owned(),
            "1234567".repeat(3),
        ] {
            let refused = Access::new(any, Some(weak.clone()));
            assert!(matches!(refused, Err(Error::Config(_))), "{weak:?}");
        }
        assert!(Access::new(any, Some("12345678".repeat(2))).is_ok());
    }

    async fn admits(access: &Access, pairs: &[(header::HeaderName, &str)]) -> Admission {
        access.admits(&headers(pairs)).await
    }

    #[tokio::test]
    async fn with_a_token_every_request_must_carry_it() {
        let access = Access::with_throttle(
            "0.0.0.0:1".parse().expect("an address"),
            Some("0123456789abcdef".into()),
            Throttle::new(std::time::Duration::from_millis(1), 16),
        )
        .expect("access");
        assert_eq!(
            admits(&access, &[(header::HOST, "127.0.0.1:1")]).await,
            Admission::NoToken
        );
        assert_eq!(
            admits(
                &access,
                &[(header::AUTHORIZATION, "Bearer 0123456789abcdef")]
            )
            .await,
            Admission::Admitted
        );
        assert_eq!(
            admits(
                &access,
                &[(header::AUTHORIZATION, "Bearer 0123456789abcdeF")]
            )
            .await,
            Admission::WrongToken
        );
        assert_eq!(
            admits(
                &access,
                &[(header::COOKIE, "other=1; tablekit_console=0123456789abcdef")]
            )
            .await,
            Admission::Admitted
        );
        assert_eq!(
            admits(&access, &[(header::COOKIE, "tablekit_console=wrong")]).await,
            Admission::WrongToken
        );
        assert_eq!(access.check_token("wrong").await, Verdict::Wrong);
        assert_eq!(access.check_token("0123456789abcdef").await, Verdict::Right);
    }

    #[tokio::test]
    async fn without_a_token_only_loopback_host_names_are_answered() {
        let access = Access::new("127.0.0.1:1".parse().expect("an address"), None).expect("access");
        for host in [
            "127.0.0.1:9465",
            "127.0.0.1",
            "127.8.9.10:1",
            "localhost:9465",
            "LocalHost",
            "[::1]:9465",
            "[::1]",
            "[0:0:0:0:0:0:0:1]:80",
            "localhost",
        ] {
            assert_eq!(
                admits(&access, &[(header::HOST, host)]).await,
                Admission::Admitted,
                "{host}"
            );
        }
        for host in [
            "evil.example:9465",
            "127.0.0.1.evil.example",
            "[::1].evil.example",
            "[::1]evil.example",
            "[::1]:9465.evil.example",
            "[::1]:",
            "[::1",
            "[::2]:80",
            "[::ffff:127.0.0.1]",
            "localhost:9465@evil.example",
            "user@localhost",
            "localhost.",
            "localhost.:9465",
            "localhost:",
            "localhost:123456",
            "localhost:80:80",
            "localhost:+80",
            "127.1",
            "0x7f.0.0.1",
            "10.0.0.1",
            "::1",
            "",
        ] {
            assert_eq!(
                admits(&access, &[(header::HOST, host)]).await,
                Admission::ForeignHost,
                "{host}"
            );
        }
        assert_eq!(
            access.admits(&HeaderMap::new()).await,
            Admission::ForeignHost
        );
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
