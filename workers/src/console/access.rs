//! Who may use the console, in which role, and which requests may change anything.
//!
//! - **Tokens and roles.** Bound to loopback, the console may run without a token (every
//!   request then acts as [`Role::Operator`]); bound to any other address it refuses to
//!   start without one. With a token, every request carries it in a `Bearer` header or
//!   carries a session cookie from the sign-in form ([`super::session`]: the cookie holds
//!   a random session id, never the token). The operator's token grants
//!   [`Role::Operator`]; the optional viewer token grants [`Role::Viewer`], which reads
//!   every page and may not act. Tokens are compared in constant time, at the pace of
//!   [`super::throttle`].
//! - **Host.** Without a token, only requests that name a loopback host are answered: a
//!   page of another site cannot reach the console through a name that resolves to
//!   127.0.0.1 (DNS rebinding). A request with more than one `Host` header is refused
//!   by every console.
//! - **CSRF.** Every action is a POST carrying the console's CSRF token (a random value of
//!   this process, in each form it renders); a POST whose `Origin` is another site is
//!   refused before its form is read. GET never changes anything.
//! - **Refusals** are counted and summarised in the log ([`super::security_log`]).
//!
//! Each form acting once (its nonce) is the forms' room: [`super::forms`].

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::ConsoleOptions;
pub use super::secret::{MAKE_A_TOKEN, MIN_TOKEN_BITS, MIN_TOKEN_DISTINCT, token_bits};
use super::secret::{check_strength, random_hex, same_secret};
pub(crate) use super::security_log::Refusal;
use super::security_log::SecurityLog;
use super::session::Sessions;
use super::throttle::{Throttle, Verdict};
use crate::error::{Error, Result};
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::{Extensions, HeaderMap, header};

/// The cookie that carries the session id of a signed-in browser.
pub(super) const COOKIE: &str = "tablekit_console";

/// What a request may do: the guard puts it in the extensions of every request it lets
/// through to a page or action (read it with `axum::Extension<Role>`). An operator (the
/// operator's token, or any request to a console without a token, on loopback) reads and
/// acts; a viewer (the viewer token) reads only: the guard refuses its POSTs (`403`), but
/// signing out. The same roles as the poison queues' [desk](crate::queue::desk).
pub(crate) use crate::queue::desk::Role;

/// The address of a request's client (its TCP peer), as an extractor: handlers take
/// `client: Client` and pass `client.0` to [`Access::refused`]. Never fails: a request
/// without connection information (not served by the console's server) counts as
/// `0.0.0.0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Client(pub(crate) IpAddr);

impl Client {
    /// The client of a request with these extensions.
    pub(crate) fn of(extensions: &Extensions) -> Self {
        Client(
            extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip()),
        )
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Client {
    type Rejection = Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        _: &S,
    ) -> std::result::Result<Self, Self::Rejection> {
        Ok(Client::of(&parts.extensions))
    }
}

/// The console's access rules.
pub(super) struct Access {
    token: Option<String>,
    viewer_token: Option<String>,
    csrf: String,
    behind_tls: bool,
    throttle: Throttle,
    sessions: Sessions,
    log: SecurityLog,
}

/// Whether a request may be answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Admission {
    /// It carries a token or a live session, or names a loopback host on a console
    /// without a token: in this role.
    Admitted(Role),
    /// The console has a token and the request carries none (or an unknown or expired
    /// session).
    NoToken,
    /// The request carries a wrong token (answered at the throttle's pace).
    WrongToken,
    /// Too many tokens wait: the token was not compared.
    Busy,
    /// A console without a token, asked under a host name that is not loopback.
    ForeignHost,
}

impl Access {
    /// The rules for a console with `options` (its address, tokens and TLS).
    ///
    /// # Errors
    /// [`Error::Config`] when the address is not loopback and there is no token; when a
    /// token is weak: fewer than [`MIN_TOKEN_BITS`] bits ([`token_bits`]), fewer than
    /// [`MIN_TOKEN_DISTINCT`] different characters, or holding whitespace or control
    /// characters; or when the viewer token is given without a token, or equals it.
    pub(super) fn new(options: &ConsoleOptions) -> Result<Self> {
        Self::with_throttle(options, Throttle::default())
    }

    /// [`Access::new`] with its own pace for tokens.
    pub(super) fn with_throttle(options: &ConsoleOptions, throttle: Throttle) -> Result<Self> {
        let bind = options.bind;
        let token = options.token.clone().filter(|t| !t.is_empty());
        let viewer_token = options.viewer_token.clone().filter(|t| !t.is_empty());
        match &token {
            None if !bind.ip().is_loopback() => {
                return Err(Error::Config(format!(
                    "the console binds to {bind}, which is not loopback: give it a token (--token or TABLEKIT_CONSOLE_TOKEN, at least {MIN_TOKEN_BITS} bits): {MAKE_A_TOKEN}"
                )));
            }
            Some(t) => check_strength("token", t)?,
            None => {}
        }
        if let Some(viewer) = &viewer_token {
            let Some(token) = &token else {
                return Err(Error::Config(
                    "the console has a viewer token but no token: give it a token too (--token or TABLEKIT_CONSOLE_TOKEN), the operator's".to_owned(),
                ));
            };
            check_strength("viewer token", viewer)?;
            if same_secret(token, viewer) {
                return Err(Error::Config(
                    "the console's viewer token is its token: give the viewers a different one"
                        .to_owned(),
                ));
            }
        }
        Ok(Access {
            token,
            viewer_token,
            csrf: random_hex(32),
            behind_tls: options.behind_tls,
            throttle,
            sessions: Sessions::default(),
            log: SecurityLog::default(),
        })
    }

    /// Whether the console asks for a token.
    pub(super) fn needs_token(&self) -> bool {
        self.token.is_some()
    }

    /// Whether the console is reached through HTTPS (its cookie is then `Secure`).
    pub(super) fn behind_tls(&self) -> bool {
        self.behind_tls
    }

    /// The CSRF token the forms carry.
    pub(super) fn csrf(&self) -> &str {
        &self.csrf
    }

    /// The sessions of signed-in browsers.
    pub(super) fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Counts a refused request of `client` for the log's summaries (a form with a
    /// missing or stale CSRF token: `refused(Refusal::Csrf, client.0)`).
    pub(crate) fn refused(&self, refusal: Refusal, client: IpAddr) {
        self.log.refused(refusal, client);
    }

    /// The role a token grants, compared with both tokens in constant time.
    fn role_of(&self, given: &str) -> Option<Role> {
        let operator = self.token.as_deref().is_some_and(|t| same_secret(t, given));
        let viewer = self
            .viewer_token
            .as_deref()
            .is_some_and(|t| same_secret(t, given));
        match (operator, viewer) {
            (true, _) => Some(Role::Operator),
            (false, true) => Some(Role::Viewer),
            (false, false) => None,
        }
    }

    /// What the console says to a token `client` shows (the sign-in form's or a
    /// `Bearer` header's), at the pace of the console's one [`Throttle`]; a wrong one and
    /// a `429` are counted for the log.
    pub(super) async fn check_token(&self, given: &str, client: IpAddr) -> Verdict<Role> {
        let verdict = self.throttle.check(client, || self.role_of(given)).await;
        match verdict {
            Verdict::Right(_) => {}
            Verdict::Wrong => self.refused(Refusal::WrongToken, client),
            Verdict::Busy => self.refused(Refusal::TooMany, client),
        }
        verdict
    }

    /// Whether a request of `client` may be answered, and in which role: a `Bearer`
    /// token (a wrong one answered at the throttle's pace) or a live session when the
    /// console has a token, a loopback host name when it has none.
    pub(super) async fn admits(&self, headers: &HeaderMap, client: IpAddr) -> Admission {
        if self.token.is_none() {
            return if headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .is_some_and(is_loopback_host)
            {
                Admission::Admitted(Role::Operator)
            } else {
                self.refused(Refusal::Host, client);
                Admission::ForeignHost
            };
        }
        if let Some(given) = bearer(headers) {
            return match self.check_token(&given, client).await {
                Verdict::Right(role) => Admission::Admitted(role),
                Verdict::Wrong => Admission::WrongToken,
                Verdict::Busy => Admission::Busy,
            };
        }
        match session_id(headers).and_then(|id| self.sessions.role(&id)) {
            Some(role) => Admission::Admitted(role),
            None => Admission::NoToken,
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

/// Whether a request has more than one `Host` header (refused by every console).
pub(super) fn has_several_hosts(headers: &HeaderMap) -> bool {
    headers.get_all(header::HOST).iter().nth(1).is_some()
}

/// The token of an `Authorization: Bearer …` header.
fn bearer(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(|t| t.trim().to_owned())
}

/// The session id of the sign-in cookie.
pub(super) fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|h| h.to_str().ok())
        .flat_map(|h| h.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then(|| value.trim().to_owned())
        })
}

/// Whether a `Host` header names this machine, read strictly: `localhost` or an IPv4
/// loopback address (`127.x.x.x`), or a bracketed IPv6 loopback (`[::1]`), each with an
/// optional port (one to five digits, 1 to 65535), and nothing else — no user info, no
/// trailing dot, no sign, no other name around them.
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
    loopback && port.is_none_or(is_port)
}

/// Whether `port` is a TCP port written plainly: one to five digits, 1 to 65535.
fn is_port(port: &str) -> bool {
    (1..=5).contains(&port.len())
        && port.bytes().all(|b| b.is_ascii_digit())
        && port.parse::<u16>().is_ok_and(|p| p != 0)
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

    fn options(bind: &str, token: Option<&str>, viewer: Option<&str>) -> ConsoleOptions {
        let mut options =
            ConsoleOptions::new(bind.parse().expect("an address"), token.map(str::to_owned));
        options.viewer_token = viewer.map(str::to_owned);
        options
    }

    fn access(bind: &str, token: Option<&str>) -> Result<Access> {
        Access::new(&options(bind, token, None))
    }

    const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));

    #[test]
    fn off_loopback_a_token_is_required_and_must_be_long_enough() {
        let any = "0.0.0.0:9465";
        assert!(matches!(access(any, None), Err(Error::Config(_))));
        assert!(matches!(access(any, Some("")), Err(Error::Config(_))));
        assert!(matches!(access(any, Some("short")), Err(Error::Config(_))));
        let message = access(any, Some("a-token-of-19-chars"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            message.contains("116 bits") && message.contains("openssl rand -hex 32"),
            "{message}"
        );
        assert!(access(any, Some("a-token-of-twenty-two-chars")).is_ok());
        let message = access(any, Some(&" ".repeat(16)))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(message.contains("whitespace"), "{message}");
        assert!(access("127.0.0.1:9465", None).is_ok());
    }

    #[test]
    fn weak_tokens_are_refused_when_the_console_binds() {
        let any = "0.0.0.0:9465";
        for weak in [
            " ".repeat(16),
            "\t".repeat(20),
            "abcdefgh ijklmnop".to_owned(),
            "abcdefgh\u{0}ijklmnop".to_owned(),
            "a".repeat(32),
            "abababababababababab".to_owned(),
            "1234567".repeat(3),
        ] {
            let refused = access(any, Some(&weak));
            assert!(matches!(refused, Err(Error::Config(_))), "{weak:?}");
            // The same rules for the viewer token.
            let refused = Access::new(&options(
                any,
                Some("0123456789abcdef0123456789abcdef"),
                Some(&weak),
            ));
            let message = refused.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(message.contains("viewer token"), "{weak:?}: {message}");
        }
        assert!(access(any, Some(&"12345678".repeat(2))).is_err(), "53 bits");
        assert!(access(any, Some(&"12345678".repeat(5))).is_ok(), "132 bits");
    }

    #[test]
    fn the_viewer_token_needs_a_token_and_must_differ_from_it() {
        let any = "0.0.0.0:9465";
        let local = "127.0.0.1:9465";
        let token = "0123456789abcdef0123456789abcdef";
        for (bind, token, viewer, says) in [
            (local, None, "fedcba9876543210fedcba9876543210", "no token"),
            (any, Some(token), token, "different"),
        ] {
            let message = Access::new(&options(bind, token, Some(viewer)))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(message.contains(says), "{message}");
        }
        assert!(
            Access::new(&options(
                any,
                Some(token),
                Some("fedcba9876543210fedcba9876543210")
            ))
            .is_ok()
        );
    }

    async fn admits(access: &Access, pairs: &[(header::HeaderName, &str)]) -> Admission {
        access.admits(&headers(pairs), CLIENT).await
    }

    #[tokio::test]
    async fn with_a_token_every_request_carries_it_or_a_session_and_gets_its_role() {
        let quick = super::super::throttle::Pace {
            client_interval: std::time::Duration::from_millis(1),
            global_interval: std::time::Duration::from_millis(1),
            ..Default::default()
        };
        let access = Access::with_throttle(
            &options(
                "0.0.0.0:1",
                Some("0123456789abcdef0123456789abcdef"),
                Some("viewer-0123456789-abcdefgh"),
            ),
            Throttle::new(quick),
        )
        .expect("access");
        assert_eq!(
            admits(&access, &[(header::HOST, "127.0.0.1:1")]).await,
            Admission::NoToken
        );
        assert_eq!(
            admits(
                &access,
                &[(
                    header::AUTHORIZATION,
                    "Bearer 0123456789abcdef0123456789abcdef"
                )]
            )
            .await,
            Admission::Admitted(Role::Operator)
        );
        assert_eq!(
            admits(
                &access,
                &[(header::AUTHORIZATION, "Bearer viewer-0123456789-abcdefgh")]
            )
            .await,
            Admission::Admitted(Role::Viewer)
        );
        assert_eq!(
            admits(
                &access,
                &[(
                    header::AUTHORIZATION,
                    "Bearer 0123456789abcdef0123456789abcdeF"
                )]
            )
            .await,
            Admission::WrongToken
        );
        // The cookie holds a session id, never the token: the token there is no session.
        assert_eq!(
            admits(
                &access,
                &[(
                    header::COOKIE,
                    "tablekit_console=0123456789abcdef0123456789abcdef"
                )]
            )
            .await,
            Admission::NoToken
        );
        let viewer = access.sessions().open(Role::Viewer);
        assert_eq!(
            admits(
                &access,
                &[(
                    header::COOKIE,
                    &format!("other=1; tablekit_console={viewer}")
                )]
            )
            .await,
            Admission::Admitted(Role::Viewer)
        );
        assert!(access.sessions().close(&viewer));
        assert_eq!(
            admits(
                &access,
                &[(header::COOKIE, &format!("tablekit_console={viewer}"))]
            )
            .await,
            Admission::NoToken
        );
        assert_eq!(access.check_token("wrong", CLIENT).await, Verdict::Wrong);
        assert_eq!(
            access
                .check_token("0123456789abcdef0123456789abcdef", CLIENT)
                .await,
            Verdict::Right(Role::Operator)
        );
    }

    #[tokio::test]
    async fn without_a_token_only_loopback_host_names_are_answered() {
        let access = access("127.0.0.1:1", None).expect("access");
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
            "localhost:1",
            "localhost:65535",
            "[::1]:65535",
        ] {
            assert_eq!(
                admits(&access, &[(header::HOST, host)]).await,
                Admission::Admitted(Role::Operator),
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
            "localhost:99999",
            "localhost:65536",
            "localhost:0",
            "localhost:00000",
            "[::1]:99999",
            "127.0.0.1:70000",
            "localhost:80:80",
            "localhost:+80",
            "localhost:+8080",
            "localhost:-1",
            "localhost: 80",
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
            access.admits(&HeaderMap::new(), CLIENT).await,
            Admission::ForeignHost
        );
    }

    #[test]
    fn a_request_with_two_host_headers_is_recognised() {
        assert!(!has_several_hosts(&headers(&[(header::HOST, "localhost")])));
        assert!(!has_several_hosts(&HeaderMap::new()));
        assert!(has_several_hosts(&headers(&[
            (header::HOST, "localhost"),
            (header::HOST, "evil.example")
        ])));
        assert!(has_several_hosts(&headers(&[
            (header::HOST, "localhost"),
            (header::HOST, "localhost")
        ])));
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
        let access = access("127.0.0.1:1", None).expect("access");
        assert!(access.csrf_matches(Some(access.csrf())));
        assert!(!access.csrf_matches(Some("x")));
        assert!(!access.csrf_matches(None));
    }

    #[test]
    fn roles_have_names_and_only_the_operator_acts() {
        assert_eq!(Role::Operator.name(), "operator");
        assert_eq!(Role::Viewer.name(), "viewer");
        assert!(Role::Operator.may_act());
        assert!(!Role::Viewer.may_act());
    }

    #[test]
    fn a_request_without_connection_information_counts_as_unspecified() {
        let mut extensions = Extensions::new();
        assert_eq!(
            Client::of(&extensions),
            Client(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
        );
        extensions.insert(ConnectInfo(SocketAddr::from(([192, 0, 2, 7], 5000))));
        assert_eq!(
            Client::of(&extensions),
            Client(IpAddr::from([192, 0, 2, 7]))
        );
    }
}
