//! Signing in to a console with a token: the form, and the cookie it sets. A wrong token
//! waits its turn with every other wrong guess ([`super::throttle`]).

use axum::body::Bytes;
use axum::extract::{Query as UrlQuery, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

use super::access::COOKIE;
use super::forms::Form;
use super::throttle::Verdict;
use super::{Shared, html, view};

#[derive(serde::Deserialize)]
pub(super) struct LoginQuery {
    failed: Option<String>,
}

pub(super) async fn login_page(UrlQuery(query): UrlQuery<LoginQuery>) -> Response {
    html(
        StatusCode::OK,
        view::page("Sign in", None, view::login(query.failed.is_some())),
    )
}

pub(super) async fn login(State(console): State<Shared>, body: Bytes) -> Response {
    let form = Form::parse(&body);
    let token = form.get("token").unwrap_or_default();
    match console.access.check_token(token).await {
        Verdict::Right => {
            let cookie = format!(
                "{COOKIE}={}; HttpOnly; SameSite=Strict; Path=/",
                form_urlencoded::byte_serialize(token.as_bytes()).collect::<String>()
            );
            let mut response = Redirect::to("/").into_response();
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        // Answered at the pace of every wrong guess together.
        Verdict::Wrong => Redirect::to("/login?failed=1").into_response(),
        Verdict::Busy => busy(),
    }
}

/// The answer while too many wrong guesses wait: `429`, try again in a second.
pub(super) fn busy() -> Response {
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, "1")],
        "too many wrong tokens at once: try again in a moment",
    )
        .into_response()
}
