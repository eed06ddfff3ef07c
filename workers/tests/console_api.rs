//! The console's JSON API answers JSON, errors included, with the right status: `401`
//! without a right token (never a redirect), `403` for a viewer's action, `404` for an
//! unknown path or queue, `405`, `409` for a set whose messages are gone, `415`, `422`
//! for a query parameter that does not parse or is out of range, naming it — each an
//! RFC 9457 problem — and its OpenAPI description matches what the router answers.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use support::console::{Served, client, seed_poison};

use tablekit_core::AnyStore;
use tablekit_workers::console::ConsoleOptions;

const OPERATOR: &str = "api-operator-token-0123456789";
const VIEWER: &str = "api-viewer-token-9876543210";
const QUEUE: &str = "billing";

/// A console with both tokens over a SQLite queue `billing` holding two poison messages.
async fn serve() -> Served {
    let store = AnyStore::create("memory:").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let queue = support::console::sqlite_queue(&dir).await;
    seed_poison(
        &queue,
        QUEUE,
        &[
            ("m-1", b"{}".to_vec(), "timeout after 30 s"),
            ("m-2", b"{}".to_vec(), "timeout after 31 s"),
        ],
    )
    .await;
    let mut options = ConsoleOptions::new("127.0.0.1:0".parse().unwrap(), Some(OPERATOR.into()));
    options.viewer_token = Some(VIEWER.into());
    options.queues = vec![QUEUE.to_owned()];
    support::console::serve(store, queue, options)
        .await
        .keeping(dir)
}

/// A request's status, content type and body as JSON (a body that is not JSON fails).
async fn answer(request: reqwest::RequestBuilder) -> (u16, String, Value) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{status} {kind}: not JSON ({e}): {text:?}"));
    (status, kind, body)
}

/// Asserts a problem with `status` whose `type` ends with `kind`: its body.
fn assert_problem(answer: &(u16, String, Value), status: u16, kind: &str) -> Value {
    let (got, content_type, body) = answer;
    assert_eq!(*got, status, "{body}");
    assert_eq!(content_type, "application/problem+json", "{body}");
    assert_eq!(body["status"], status, "{body}");
    assert_eq!(body["type"], format!("/api/problems#{kind}"), "{body}");
    assert!(
        body["title"].is_string() && body["detail"].is_string(),
        "{body}"
    );
    body.clone()
}

#[tokio::test]
async fn a_missing_or_wrong_token_is_a_401_problem_never_a_redirect() {
    let running = serve().await;
    let url = format!("{}/api/status", running.url);
    let missing = answer(client().get(&url)).await;
    assert_problem(&missing, 401, "unauthorized");
    let wrong = answer(
        client()
            .get(&url)
            .bearer_auth("api-operator-token-012345678X"),
    )
    .await;
    assert_problem(&wrong, 401, "unauthorized");
    let response = client().get(&url).send().await.unwrap();
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    // An unknown path without a token is refused the same way (nothing is told of it).
    let unknown = answer(client().get(format!("{}/api/nothing", running.url))).await;
    assert_problem(&unknown, 401, "unauthorized");
    let (status, kind, _) = answer(client().get(&url).bearer_auth(VIEWER)).await;
    assert_eq!((status, kind.as_str()), (200, "application/json"));
}

#[tokio::test]
async fn a_viewers_action_is_a_403_problem() {
    let running = serve().await;
    let refused = answer(
        client()
            .post(format!("{}/api/poison/{QUEUE}/sets", running.url))
            .bearer_auth(VIEWER)
            .header("content-type", "application/json")
            .body(json!({"action": "discard"}).to_string()),
    )
    .await;
    let body = assert_problem(&refused, 403, "forbidden");
    assert!(
        body["detail"].as_str().unwrap().contains("viewer"),
        "{body}"
    );
}

#[tokio::test]
async fn unknown_paths_and_queues_are_404_and_wrong_methods_405() {
    let running = serve().await;
    let api = format!("{}/api", running.url);
    for path in ["/nothing", "/poison", "/poison/billing/other", "/"] {
        let unknown = answer(client().get(format!("{api}{path}")).bearer_auth(VIEWER)).await;
        assert_problem(&unknown, 404, "not-found");
    }
    for path in [
        "/poison/jbos",
        "/queues/jbos/history",
        "/queues/jbos/waiting",
        "/poison/billing-poison",
        "/poison/amq.gen",
    ] {
        let unknown = answer(client().get(format!("{api}{path}")).bearer_auth(VIEWER)).await;
        let body = assert_problem(&unknown, 404, "unknown-queue");
        assert_eq!(body["queues"], json!([QUEUE]), "{path}: {body}");
    }
    let dry_run = answer(
        client()
            .post(format!("{api}/poison/jbos/sets"))
            .bearer_auth(OPERATOR)
            .header("content-type", "application/json")
            .body(json!({"action": "discard"}).to_string()),
    )
    .await;
    assert_problem(&dry_run, 404, "unknown-queue");
    let wrong_method = answer(client().post(format!("{api}/status")).bearer_auth(OPERATOR)).await;
    assert_problem(&wrong_method, 405, "method-not-allowed");
    let wrong_method = answer(
        client()
            .delete(format!("{api}/poison/{QUEUE}"))
            .bearer_auth(OPERATOR),
    )
    .await;
    assert_problem(&wrong_method, 405, "method-not-allowed");
}

#[tokio::test]
async fn a_parameter_that_does_not_parse_or_is_out_of_range_is_a_422_naming_it() {
    let running = serve().await;
    let api = format!("{}/api", running.url);
    for (path, parameter) in [
        (format!("/poison/{QUEUE}?order=sideways"), "order"),
        (format!("/poison/{QUEUE}?after=zzz"), "after"),
        (format!("/poison/{QUEUE}?limit=-1"), "limit"),
        (format!("/poison/{QUEUE}?limit=0"), "limit"),
        (format!("/poison/{QUEUE}?limit=101"), "limit"),
        (format!("/poison/{QUEUE}?back=2"), "back"),
        (format!("/poison/{QUEUE}?undecodable=yes"), "undecodable"),
        (format!("/poison/{QUEUE}?limit=1&limit=2"), "limit"),
        (format!("/queues/{QUEUE}/waiting?order=sideways"), "order"),
        (format!("/queues/{QUEUE}/waiting?limit=1000"), "limit"),
        (format!("/queues/{QUEUE}/history?since=yesterday"), "since"),
        (
            format!(
                "/queues/{QUEUE}/history?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z"
            ),
            "since",
        ),
        ("/actions?after=zzz".to_owned(), "after"),
        ("/actions?limit=-1".to_owned(), "limit"),
    ] {
        let refused = answer(client().get(format!("{api}{path}")).bearer_auth(VIEWER)).await;
        let body = assert_problem(&refused, 422, "invalid-parameter");
        assert_eq!(body["parameter"], parameter, "{path}: {body}");
        assert!(
            body["detail"].as_str().unwrap().contains(parameter),
            "{path}: {body}"
        );
    }
    // A cursor the API gave out is read back.
    let (status, _, first) = answer(
        client()
            .get(format!("{api}/poison/{QUEUE}?limit=1"))
            .bearer_auth(VIEWER),
    )
    .await;
    assert_eq!(status, 200, "{first}");
    let next = first["next"].as_str().expect("a next page").to_owned();
    let (status, _, second) = answer(
        client()
            .get(format!("{api}/poison/{QUEUE}?limit=1&after={next}"))
            .bearer_auth(VIEWER),
    )
    .await;
    assert_eq!(status, 200, "{second}");
    assert_ne!(first["messages"][0]["id"], second["messages"][0]["id"]);
}

#[tokio::test]
async fn a_set_over_messages_that_are_gone_is_a_409_naming_them() {
    let running = serve().await;
    let sets = format!("{}/api/poison/{QUEUE}/sets", running.url);
    let post = |url: String, body: Value| {
        client()
            .post(url)
            .bearer_auth(OPERATOR)
            .header("content-type", "application/json")
            .body(body.to_string())
    };
    let gone = answer(post(
        sets.clone(),
        json!({"action": "discard", "handles": ["nope-1", "nope-2"]}),
    ))
    .await;
    let body = assert_problem(&gone, 409, "gone");
    assert_eq!(body["gone"], json!(["nope-1", "nope-2"]), "{body}");
    // A set made while its messages were there, confirmed after they left: 409.
    let (status, _, listed) = answer(
        client()
            .get(format!("{}/api/poison/{QUEUE}", running.url))
            .bearer_auth(OPERATOR),
    )
    .await;
    assert_eq!(status, 200);
    let handles: Vec<String> = listed["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["handle"].as_str().unwrap().to_owned())
        .collect();
    let (status, _, first) = answer(post(
        sets.clone(),
        json!({"action": "discard", "handles": handles}),
    ))
    .await;
    assert_eq!(status, 201, "{first}");
    let (status, _, second) = answer(post(
        sets.clone(),
        json!({"action": "discard", "handles": handles}),
    ))
    .await;
    assert_eq!(status, 201, "{second}");
    let confirm = |set: &Value| {
        post(
            format!("{sets}/{}/confirm", set["token"].as_str().unwrap()),
            json!({}),
        )
    };
    let (status, _, done) = answer(confirm(&first)).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["taken"].as_array().unwrap().len(), 2, "{done}");
    let again = answer(confirm(&second)).await;
    let body = assert_problem(&again, 409, "gone");
    assert_eq!(body["gone"].as_array().unwrap().len(), 2, "{body}");
    // A body that is not JSON, and an unknown action.
    let not_json = answer(
        client()
            .post(sets.clone())
            .bearer_auth(OPERATOR)
            .header("content-type", "text/plain")
            .body("{}"),
    )
    .await;
    assert_problem(&not_json, 415, "unsupported-media-type");
    let unknown = answer(post(sets, json!({"action": "explode"}))).await;
    assert_problem(&unknown, 422, "invalid-request");
}

/// Every path and method the description lists is answered by a handler (not the
/// API's 404 or 405), every other method of those paths is a 405, and each documented
/// query parameter with a type or a set of values is read by its handler: a bad value
/// is a 422 naming it.
#[tokio::test]
async fn the_openapi_description_matches_what_the_handlers_answer() {
    let running = serve().await;
    let (status, _, doc) = answer(
        client()
            .get(format!("{}/api/openapi.json", running.url))
            .bearer_auth(VIEWER),
    )
    .await;
    assert_eq!(status, 200, "{doc}");
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 12, "{} paths", paths.len());
    for (path, item) in paths {
        let concrete = path
            .replace("{queue}", QUEUE)
            .replace("{handle}", "no-such-handle")
            .replace("{token}", "no-such-token");
        let url = format!("{}{concrete}", running.url);
        let documented: Vec<&str> = item
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for method in ["get", "post", "put", "delete", "patch"] {
            let request = client()
                .request(method.to_uppercase().parse().unwrap(), &url)
                .bearer_auth(OPERATOR)
                .header("content-type", "application/json")
                .body("{}");
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let text = response.text().await.unwrap();
            if documented.contains(&method) {
                assert_ne!(status, 405, "{method} {path}: {text}");
                assert!(
                    !text.contains("/api/problems#not-found")
                        || text.contains("no longer")
                        || text.contains("no such set"),
                    "{method} {path} is not routed: {text}"
                );
                let answers = item[method]["responses"].as_object().unwrap();
                assert!(
                    answers.contains_key(&status.to_string()),
                    "{method} {path} answered {status}, undocumented: {text}"
                );
            } else {
                assert_eq!(status, 405, "{method} {path}: {text}");
            }
        }
        for (method, operation) in item.as_object().unwrap() {
            if method != "get" {
                continue;
            }
            for parameter in operation["parameters"].as_array().into_iter().flatten() {
                if parameter["in"] != "query" {
                    continue;
                }
                let schema = &parameter["schema"];
                let name = parameter["name"].as_str().unwrap();
                let bad = if schema["enum"].is_array() || schema["type"] == "integer" {
                    "not-a-value"
                } else if schema["format"] == "date-time" || schema["pattern"].is_string() {
                    "zzz"
                } else {
                    continue;
                };
                let refused = answer(
                    client()
                        .get(format!("{url}?{name}={bad}"))
                        .bearer_auth(VIEWER),
                )
                .await;
                let body = assert_problem(&refused, 422, "invalid-parameter");
                assert_eq!(body["parameter"], name, "{path}: {body}");
            }
        }
    }
}
