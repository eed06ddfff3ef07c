//! The API's answers when something is wrong, as `application/problem+json` (RFC 9457):
//! `type` (a reference to the problem's kind, listed in the API's description), `title`,
//! `status` and `detail`, with what names the cause — `parameter` for a query parameter
//! that does not parse or is out of range (`422`), `queues` for an unknown queue (`404`),
//! `gone` for handles that left the poison queue (`409`) — and the API's query
//! parameters read strictly: an unknown value or a number out of range is a `422` that
//! names the parameter, never a default chosen silently.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use crate::error::Error;

/// The media type of a problem.
pub(in crate::console) const PROBLEM_JSON: &str = "application/problem+json";

/// The kinds of problem, as their `type` names them (`/api/problems#<kind>`).
pub(in crate::console) const KINDS: &[&str] = &[
    "unauthorized",
    "forbidden",
    "not-found",
    "unknown-queue",
    "method-not-allowed",
    "invalid-parameter",
    "invalid-request",
    "unsupported-media-type",
    "gone",
    "conflict",
    "too-many-requests",
    "unavailable",
    "internal",
];

/// A problem to answer.
#[derive(Debug)]
pub(in crate::console) struct Problem {
    status: StatusCode,
    kind: &'static str,
    detail: String,
    extra: Map<String, Value>,
}

impl Problem {
    /// A problem of `kind` (one of [`KINDS`]) with `status`.
    pub(in crate::console) fn new(
        status: StatusCode,
        kind: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        debug_assert!(KINDS.contains(&kind), "{kind}");
        Problem {
            status,
            kind,
            detail: detail.into(),
            extra: Map::new(),
        }
    }

    /// A member beside the standard ones.
    #[must_use]
    pub(in crate::console) fn with(mut self, name: &str, value: Value) -> Self {
        self.extra.insert(name.to_owned(), value);
        self
    }

    /// What went wrong, in words.
    pub(in crate::console) fn detail(&self) -> &str {
        &self.detail
    }

    /// A parameter that does not parse or is out of range.
    pub(in crate::console) fn parameter(name: &str, detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid-parameter",
            detail,
        )
        .with("parameter", json!(name))
    }

    /// The problem of a failure, by its kind.
    pub(in crate::console) fn of(e: &Error) -> Self {
        let status = super::super::failure_status(e.kind());
        let kind = match status {
            StatusCode::BAD_REQUEST => "invalid-request",
            StatusCode::NOT_FOUND => "not-found",
            StatusCode::FORBIDDEN => "forbidden",
            StatusCode::CONFLICT => "conflict",
            StatusCode::SERVICE_UNAVAILABLE => "unavailable",
            _ => "internal",
        };
        Problem::new(status, kind, e.to_string())
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut body = Map::new();
        body.insert("type".into(), json!(format!("/api/problems#{}", self.kind)));
        body.insert(
            "title".into(),
            json!(self.status.canonical_reason().unwrap_or("Error")),
        );
        body.insert("status".into(), json!(self.status.as_u16()));
        body.insert("detail".into(), json!(self.detail));
        body.extend(self.extra);
        let mut response = (self.status, Value::Object(body).to_string()).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        response
    }
}

/// The prefix of the API's cursors: what follows is the backend's cursor, base64url.
const CURSOR_PREFIX: &str = "c1.";

/// The cursor the API gives out for a backend's `raw` one.
pub(in crate::console) fn cursor(raw: &str) -> String {
    format!(
        "{CURSOR_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
    )
}

/// A query's parameters, read strictly.
pub(in crate::console) struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// The parameters of a raw query string.
    pub(in crate::console) fn of(query: Option<&str>) -> Self {
        Params {
            pairs: form_urlencoded::parse(query.unwrap_or_default().as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        }
    }

    /// The value of `name`, if given (and not empty); a parameter given twice is refused.
    pub(in crate::console) fn text(&self, name: &str) -> Result<Option<String>, Problem> {
        let mut given = self.pairs.iter().filter(|(k, _)| k == name);
        let first = given.next();
        if given.next().is_some() {
            return Err(Problem::parameter(name, format!("`{name}` is given twice")));
        }
        Ok(first.map(|(_, v)| v.clone()).filter(|v| !v.is_empty()))
    }

    /// One of `choices`, if given.
    pub(in crate::console) fn choice(
        &self,
        name: &str,
        choices: &[&'static str],
    ) -> Result<Option<&'static str>, Problem> {
        match self.text(name)? {
            None => Ok(None),
            Some(value) => choices
                .iter()
                .find(|c| **c == value)
                .copied()
                .map(Some)
                .ok_or_else(|| {
                    Problem::parameter(
                        name,
                        format!(
                            "`{name}` is {}: it is one of {}",
                            shown(&value),
                            choices.join(", ")
                        ),
                    )
                    .with("allowed", json!(choices))
                }),
        }
    }

    /// Whether the flag `name` is set (`1` or `true`; `0` or `false` for not).
    pub(in crate::console) fn flag(&self, name: &str) -> Result<bool, Problem> {
        Ok(matches!(
            self.choice(name, &["1", "true", "0", "false"])?,
            Some("1" | "true")
        ))
    }

    /// A whole number from `min` to `max`, if given.
    pub(in crate::console) fn number(
        &self,
        name: &str,
        min: usize,
        max: usize,
    ) -> Result<Option<usize>, Problem> {
        let Some(value) = self.text(name)? else {
            return Ok(None);
        };
        match value.parse::<usize>() {
            Ok(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ => Err(Problem::parameter(
                name,
                format!(
                    "`{name}` is {}: it is a whole number from {min} to {max}",
                    shown(&value)
                ),
            )
            .with("minimum", json!(min))
            .with("maximum", json!(max))),
        }
    }

    /// A time (RFC 3339), if given.
    pub(in crate::console) fn time(&self, name: &str) -> Result<Option<DateTime<Utc>>, Problem> {
        let Some(value) = self.text(name)? else {
            return Ok(None);
        };
        DateTime::parse_from_rfc3339(&value)
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|_| {
                Problem::parameter(
                    name,
                    format!(
                        "`{name}` is {}: it is a time in RFC 3339, as 2026-01-31T12:00:00Z",
                        shown(&value)
                    ),
                )
            })
    }

    /// A cursor the API gave out ([`cursor`]), as the backend's, if given.
    pub(in crate::console) fn cursor(&self, name: &str) -> Result<Option<String>, Problem> {
        let Some(value) = self.text(name)? else {
            return Ok(None);
        };
        value
            .strip_prefix(CURSOR_PREFIX)
            .and_then(|rest| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(rest)
                    .ok()
            })
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .filter(|raw| !raw.is_empty())
            .map(Some)
            .ok_or_else(|| {
                Problem::parameter(
                    name,
                    format!(
                        "`{name}` is {}: give the `next` of an earlier answer, as it was",
                        shown(&value)
                    ),
                )
            })
    }

    /// A text matching `is_valid`, described by `what`, if given.
    pub(in crate::console) fn checked(
        &self,
        name: &str,
        what: &str,
        is_valid: impl Fn(&str) -> bool,
    ) -> Result<Option<String>, Problem> {
        match self.text(name)? {
            Some(value) if !is_valid(&value) => Err(Problem::parameter(
                name,
                format!("`{name}` is {}: it is {what}", shown(&value)),
            )),
            other => Ok(other),
        }
    }
}

/// A value as a message quotes it: at most 40 characters, escaped.
fn shown(value: &str) -> String {
    let cut: String = value.chars().take(40).collect();
    format!("{cut:?}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn detail_of(problem: &Problem) -> (&str, Option<&Value>) {
        (&problem.detail, problem.extra.get("parameter"))
    }

    #[test]
    fn bad_values_name_their_parameter() {
        let params = Params::of(Some(
            "order=sideways&after=zzz&limit=-1&since=yesterday&back=2",
        ));
        let order = params.choice("order", &["oldest", "newest"]).unwrap_err();
        assert_eq!(detail_of(&order).1, Some(&json!("order")));
        assert!(order.detail.contains("oldest, newest"), "{}", order.detail);
        assert!(params.cursor("after").is_err());
        let limit = params.number("limit", 1, 500).unwrap_err();
        assert!(limit.detail.contains("from 1 to 500"), "{}", limit.detail);
        assert!(params.time("since").is_err());
        assert!(params.flag("back").is_err());
        assert_eq!(order.status, StatusCode::UNPROCESSABLE_ENTITY);
    }

    #[test]
    fn good_values_are_read_and_missing_ones_are_none() {
        let given = cursor("17");
        let params = Params::of(Some(&format!(
            "order=newest&after={given}&limit=20&since=2026-01-31T12:00:00Z&back=1&kind="
        )));
        assert_eq!(
            params.choice("order", &["oldest", "newest"]).unwrap(),
            Some("newest")
        );
        assert_eq!(params.cursor("after").unwrap().as_deref(), Some("17"));
        assert_eq!(params.number("limit", 1, 500).unwrap(), Some(20));
        assert!(params.time("since").unwrap().is_some());
        assert!(params.flag("back").unwrap());
        assert_eq!(params.text("kind").unwrap(), None, "empty is not given");
        assert_eq!(params.number("other", 1, 2).unwrap(), None);
        let twice = Params::of(Some("limit=1&limit=2"));
        assert!(twice.number("limit", 1, 5).is_err());
    }
}
