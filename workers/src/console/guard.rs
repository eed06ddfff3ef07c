//! The guard every request passes before a handler runs: one `Host` header, the origin
//! of a POST, the token or session (or a loopback host when there is no token), the role
//! (a viewer may not act), and the security headers of every response.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use super::access::{Access, Admission, has_several_hosts};
use super::api::problem::Problem;
use super::{Client, Refusal, Shared, forwarded, signin, view};

/// The header the console's script sets on its own requests: a request with it is not a
/// page the browser shows, so it is answered `401` rather than sent to the sign-in form.
pub(super) const FETCH_HEADER: &str = "x-tablekit-fetch";

/// The header on every answer of `/live`: the script pastes an answer into the page only
/// when it carries it.
pub(super) const LIVE_HEADER: &str = "x-tablekit-live";

/// Every response's security headers; one `Host` header, then for a POST its origin,
/// then the token or session (or loopback host), checked before any handler runs. An
/// admitted request carries its [`Role`](super::Role) in its extensions (and, for the
/// pages' frame, in [`view::VIEWER`] while its handler runs); a viewer's POST is refused
/// `403`. A request without a right token or live session is sent to the sign-in form
/// when it is a page the browser shows, and answered `401` when it is the script's
/// refresh (`/live`, or any request with [`FETCH_HEADER`]). The sign-in form and signing
/// out (`/login`, `/logout`) and the assets are answered without a session. Under
/// `/api/` every refusal is a problem (JSON): `401` without a right token, never a
/// redirect.
pub(super) async fn guard(
    State(console): State<Shared>,
    mut request: Request,
    next: Next,
) -> Response {
    // Behind a trusted proxy, the client is the address it forwards: every handler, log
    // and record after this sees that one.
    if !console.options.trusted_proxies.is_empty()
        && let Some(ConnectInfo(peer)) = request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .copied()
    {
        let client = forwarded::client(peer, request.headers(), &console.options.trusted_proxies);
        request.extensions_mut().insert(ConnectInfo(client));
    }
    let Client(client) = Client::of(request.extensions());
    let path = request.uri().path().to_owned();
    let is_post = request.method() == Method::POST;
    let is_api = path == "/api" || path.starts_with("/api/");
    let is_fetch = path == "/live" || request.headers().contains_key(FETCH_HEADER);
    let access = &console.access;
    // The API answers its refusals as problems (JSON), the pages as text or a redirect.
    let refuse = |status: StatusCode, kind: &'static str, text: String| {
        if is_api {
            Problem::new(status, kind, text).into_response()
        } else {
            (status, text).into_response()
        }
    };
    let mut response = if has_several_hosts(request.headers()) {
        access.refused(Refusal::Host, client);
        refuse(
            StatusCode::BAD_REQUEST,
            "invalid-request",
            "more than one Host header".to_owned(),
        )
    } else if is_post && !Access::same_origin(request.headers()) {
        access.refused(Refusal::Origin, client);
        refuse(
            StatusCode::FORBIDDEN,
            "forbidden",
            "a form of another site".to_owned(),
        )
    } else if path.starts_with("/assets/") {
        next.run(request).await
    } else if path == "/login" || path == "/logout" {
        if access.needs_token() {
            next.run(request).await
        } else {
            Redirect::to("/").into_response()
        }
    } else {
        match access.admits(request.headers(), client).await {
            Admission::Admitted(role) if is_post && !role.may_act() => refuse(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!(
                    "signed in as {}, who reads the console but may not act: sign in with the operator's token to do this",
                    role.name()
                ),
            ),
            Admission::Admitted(role) => {
                request.extensions_mut().insert(role);
                let viewer = view::Viewer {
                    role,
                    sign_out: access.needs_token().then(|| access.csrf().to_owned()),
                };
                view::VIEWER.scope(viewer, next.run(request)).await
            }
            Admission::Busy if is_api => {
                let mut busy = Problem::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too-many-requests",
                    "too many wrong tokens at once: try again in a moment",
                )
                .into_response();
                busy.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
                busy
            }
            Admission::Busy => signin::busy(),
            Admission::NoToken | Admission::WrongToken if is_api => {
                let mut unauthorized = Problem::new(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "send the console's token: Authorization: Bearer <token>",
                )
                .into_response();
                unauthorized
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                unauthorized
            }
            Admission::NoToken | Admission::WrongToken if is_fetch => (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "signed out: sign in again at /login",
            )
                .into_response(),
            Admission::NoToken | Admission::WrongToken if !is_post => {
                Redirect::to("/login").into_response()
            }
            Admission::NoToken | Admission::WrongToken | Admission::ForeignHost => refuse(
                StatusCode::FORBIDDEN,
                "forbidden",
                "the console answers requests that carry its token, or name a loopback host"
                    .to_owned(),
            ),
        }
    };
    if path == "/live" && response.status().is_success() {
        response
            .headers_mut()
            .insert(LIVE_HEADER, HeaderValue::from_static("1"));
    }
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
