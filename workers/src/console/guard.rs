//! The guard every request passes before a handler runs: the token (or a loopback host
//! when there is none), the origin of a POST, and the security headers of every response.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use super::Shared;
use super::access::Access;

/// Every response's security headers; the token (or loopback host) and, for a POST, the
/// origin, checked before any handler runs.
pub(super) async fn guard(State(console): State<Shared>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let is_post = request.method() == axum::http::Method::POST;
    let mut response = if is_post && !Access::same_origin(request.headers()) {
        (StatusCode::FORBIDDEN, "a form of another site").into_response()
    } else if path == "/login" || path.starts_with("/assets/") {
        if console.access.needs_token() || path.starts_with("/assets/") {
            next.run(request).await
        } else {
            Redirect::to("/").into_response()
        }
    } else if console.access.admits(request.headers()) {
        next.run(request).await
    } else if console.access.needs_token() && !is_post {
        Redirect::to("/login").into_response()
    } else {
        (
            StatusCode::FORBIDDEN,
            "the console answers requests that carry its token, or name a loopback host",
        )
            .into_response()
    };
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        // `same-origin`: a form POST then carries its true `Origin` (with `no-referrer`,
        // browsers send `Origin: null`, which the origin check refuses).
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}
