//! Signing in to a console with a token, and signing out: the form, the session it opens
//! ([`super::session`]) and the cookie that carries the session's id — never the token.
//! A wrong token waits its turn ([`super::throttle`]).

use axum::body::Bytes;
use axum::extract::{Query as UrlQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

use super::access::{COOKIE, session_id};
use super::forms::Form;
use super::throttle::Verdict;
use super::{Client, Refusal, Shared, html, view};

/// The sign-in page's query: `?failed=1` after a wrong token.
#[derive(serde::Deserialize)]
pub(super) struct LoginQuery {
    failed: Option<String>,
}

/// The sign-in form.
pub(super) async fn login_page(UrlQuery(query): UrlQuery<LoginQuery>) -> Response {
    html(
        StatusCode::OK,
        view::page("Sign in", None, view::login(query.failed.is_some())),
    )
}

/// Signs in with the form's token: a right one opens a session in its role and sets the
/// cookie; a wrong one goes back to the form (at the throttle's pace).
pub(super) async fn login(State(console): State<Shared>, client: Client, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let token = form.get("token").unwrap_or_default();
    match console.access.check_token(token, client.0).await {
        Verdict::Right(role) => {
            let id = console.access.sessions().open(role);
            with_cookie(
                Redirect::to("/").into_response(),
                &cookie(&id, console.access.behind_tls(), false),
            )
        }
        // Answered at the pace of the throttle.
        Verdict::Wrong => Redirect::to("/login?failed=1").into_response(),
        Verdict::Busy => busy(),
    }
}

/// Signs out (a form carrying the console's CSRF token): forgets the session, clears the
/// cookie and goes to the sign-in form.
pub(super) async fn logout(
    State(console): State<Shared>,
    client: Client,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = Form::parse(&body);
    if !console.access.csrf_matches(form.get("csrf")) {
        console.access.refused(Refusal::Csrf, client.0);
        return html(
            StatusCode::FORBIDDEN,
            view::page(
                "Refused",
                None,
                view::problem(
                    "This sign-out form is not one this console rendered (its CSRF token is missing or stale): reload the page and try again.",
                ),
            ),
        );
    }
    if let Some(id) = session_id(&headers) {
        console.access.sessions().close(&id);
    }
    with_cookie(
        Redirect::to("/login").into_response(),
        &cookie("", console.access.behind_tls(), true),
    )
}

/// The sign-in cookie holding `id` (`HttpOnly`, `SameSite=Strict`, `Secure` behind
/// TLS), or clearing it (`Max-Age=0`).
fn cookie(id: &str, secure: bool, clear: bool) -> String {
    let mut cookie = format!("{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/");
    if secure {
        cookie.push_str("; Secure");
    }
    if clear {
        cookie.push_str("; Max-Age=0");
    }
    cookie
}

/// `response` with `cookie` set.
fn with_cookie(mut response: Response, cookie: &str) -> Response {
    if let Ok(value) = HeaderValue::from_str(cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// The answer while too many tokens wait: `429`, try again in a second.
pub(super) fn busy() -> Response {
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, "1")],
        "too many wrong tokens at once: try again in a moment",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_is_http_only_strict_and_secure_only_behind_tls() {
        let plain = cookie("abc", false, false);
        assert_eq!(
            plain,
            "tablekit_console=abc; HttpOnly; SameSite=Strict; Path=/"
        );
        let secure = cookie("abc", true, false);
        assert!(secure.ends_with("; Secure"), "{secure}");
        let cleared = cookie("", false, true);
        assert_eq!(
            cleared,
            "tablekit_console=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
        );
    }
}
