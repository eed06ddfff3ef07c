//! Signing in to a console with a token: the form, and the cookie it sets.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query as UrlQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

use super::access::COOKIE;
use super::forms::Form;
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

pub(super) async fn login(
    State(console): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let _ = headers;
    let form = Form::parse(&body);
    match form.get("token") {
        Some(token) if console.access.token_matches(token) => {
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
        _ => {
            // A second per wrong guess.
            tokio::time::sleep(Duration::from_secs(1)).await;
            Redirect::to("/login?failed=1").into_response()
        }
    }
}
