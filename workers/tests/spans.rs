//! One write followed by its operation id from the writer's commit to the copy the
//! worker wrote, through captured spans: the commit records the operation's id, the
//! publish carries it, the worker handles the message in a span with that id, and the
//! copy's store write runs inside it with OpenTelemetry's database fields; an audit
//! checks its pages in spans of their own, and a relay pass reads in its span. (One test
//! per binary: the capturing subscriber is the process's global one.)

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tablekit_core::{AnyStore, TableStore};
use tablekit_derive::Entity;
use tablekit_patterns::index::IndexedTable;
use tablekit_workers::WorkerConfig;
use tablekit_workers::index::{QueueSink, register};
use tablekit_workers::operation::Registry;
use tablekit_workers::queue::sqlite::SqliteQueue;
use tablekit_workers::runtime::Worker;
use tracing::span::{Attributes, Id, Record};
use tracing::{Subscriber, field::Field, field::Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Employees",
    kind = "Employee",
    partition_key = "{department}",
    row_key = "empid_{id:06}",
    crate = "tablekit_core"
)]
#[index(
    name = "by_email",
    table = "EmployeesByEmail",
    partition_key = "email_{department}",
    row_key = "{email}"
)]
struct Employee {
    department: String,
    id: u32,
    email: String,
}

/// A span as captured: its name, fields and parent (by capture number).
#[derive(Clone, Debug)]
struct Captured {
    name: &'static str,
    parent: Option<usize>,
    fields: HashMap<String, String>,
}

/// A layer keeping every span with its fields; spans are numbered in creation order
/// (the subscriber's ids are reused after a span closes).
#[derive(Clone, Default)]
struct Capture {
    spans: Arc<Mutex<Vec<Captured>>>,
    live: Arc<Mutex<HashMap<u64, usize>>>,
}

struct Fields<'a>(&'a mut HashMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = HashMap::new();
        attrs.record(&mut Fields(&mut fields));
        let parent_id = attrs
            .parent()
            .cloned()
            .or_else(|| ctx.current_span().id().cloned());
        let mut live = self.live.lock().unwrap();
        let parent = parent_id.and_then(|p| live.get(&p.into_u64()).copied());
        let mut spans = self.spans.lock().unwrap();
        spans.push(Captured {
            name: attrs.metadata().name(),
            parent,
            fields,
        });
        live.insert(id.into_u64(), spans.len() - 1);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, _: Context<'_, S>) {
        let live = self.live.lock().unwrap();
        if let Some(&at) = live.get(&id.into_u64()) {
            values.record(&mut Fields(&mut self.spans.lock().unwrap()[at].fields));
        }
    }

    fn on_close(&self, id: Id, _: Context<'_, S>) {
        self.live.lock().unwrap().remove(&id.into_u64());
    }
}

/// Whether span `at` descends from span `ancestor`.
fn descends(spans: &[Captured], mut at: usize, ancestor: usize) -> bool {
    while let Some(parent) = spans[at].parent {
        if parent == ancestor {
            return true;
        }
        at = parent;
    }
    false
}

/// One write's chain: the commit records the operation's id, the publish carries it, the
/// worker handles it in a span with the same id, and the copy's store write happens
/// inside that span, with the database fields.
#[tokio::test]
async fn one_write_is_followed_from_its_commit_to_the_copy_by_its_operation_id() {
    let capture = Capture::default();
    let subscriber = tracing_subscriber::registry().with(
        capture.clone().with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target("tablekit_core", tracing::Level::DEBUG)
                .with_target("tablekit_patterns", tracing::Level::DEBUG)
                .with_target("tablekit_workers", tracing::Level::DEBUG),
        ),
    );
    // The only test of this binary: the subscriber is the process's.
    tracing::subscriber::set_global_default(subscriber).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let store = AnyStore::create(&format!("sqlite:{}", dir.path().join("s.db").display()))
        .await
        .unwrap();
    let queue = SqliteQueue::open(dir.path().join("q.db")).await.unwrap();
    let sink = QueueSink::open(queue.clone(), "index").await.unwrap();
    let employees = IndexedTable::<Employee, _>::options()
        .sink(Arc::new(sink))
        .build(store.clone())
        .unwrap();
    employees.create().await.unwrap();
    let ann = Employee {
        department: "Sales".into(),
        id: 1,
        email: "e1@contoso.com".into(),
    };
    employees.insert(&ann).await.unwrap();

    let worker = Worker::new(
        queue,
        register(Registry::new(), store.clone(), None),
        WorkerConfig::new("index"),
    );
    let copied = {
        let store = store.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(30);
            while store
                .get("EmployeesByEmail", "email_Sales", "e1@contoso.com", None)
                .await
                .unwrap()
                .is_none()
                && Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    worker.run(copied).await.unwrap();

    let spans = capture.spans.lock().unwrap().clone();
    let commit = spans
        .iter()
        .position(|s| {
            s.name == "tablekit.commit" && s.fields.contains_key("tablekit.operation.ids")
        })
        .unwrap_or_else(|| panic!("no commit span with operation ids: {spans:#?}"));
    let id = spans[commit].fields["tablekit.operation.ids"].clone();
    assert!(!id.contains(','), "one operation: {id}");
    assert!(
        spans
            .iter()
            .enumerate()
            .any(|(at, s)| s.name == "tablekit.publish"
                && s.fields.get("tablekit.operation.id") == Some(&id)
                && descends(&spans, at, commit)),
        "the publish runs in the commit, with the operation's id"
    );
    let handle = spans
        .iter()
        .position(|s| {
            s.name == "tablekit.handle" && s.fields.get("tablekit.operation.id") == Some(&id)
        })
        .unwrap_or_else(|| panic!("no handle span for operation {id}: {spans:#?}"));
    let copy_write = spans.iter().enumerate().find(|(at, s)| {
        s.name == "tablekit.store"
            && s.fields.get("db.collection.name").map(String::as_str) == Some("EmployeesByEmail")
            && s.fields.get("db.operation").map(String::as_str) == Some("execute")
            && descends(&spans, *at, handle)
    });
    let (_, copy_write) =
        copy_write.unwrap_or_else(|| panic!("no copy write under the handle span: {spans:#?}"));
    assert_eq!(copy_write.fields["db.system"], "sqlite");
    assert_eq!(copy_write.fields["tablekit.partition_key"], "email_Sales");
    // The primary's own write is a store call inside the commit.
    assert!(
        spans
            .iter()
            .enumerate()
            .any(|(at, s)| s.name == "tablekit.store"
                && s.fields.get("db.operation").map(String::as_str) == Some("submit_batch")
                && s.fields.get("db.collection.name").map(String::as_str) == Some("Employees")
                && descends(&spans, at, commit))
    );

    // An audit checks its pages in spans under its own, with the copies' reads inside.
    let audit = employees
        .audit(&tablekit_patterns::index::AuditOptions {
            progress_every: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(audit.is_clean(), "{audit:?}");
    // A relay pass with nothing left to publish.
    let relay = tablekit_patterns::index::Relay::new(
        store.clone(),
        Arc::new(tablekit_patterns::index::InlineSink::new(
            tablekit_patterns::index::handlers(store.clone(), None),
        )),
    )
    .run_once()
    .await
    .unwrap();
    assert_eq!(relay.published, 0);

    let spans = capture.spans.lock().unwrap().clone();
    let audit = spans
        .iter()
        .position(|s| {
            s.name == "tablekit.audit"
                && s.fields.get("db.collection.name").map(String::as_str) == Some("Employees")
        })
        .unwrap_or_else(|| panic!("no audit span: {spans:#?}"));
    let page = spans
        .iter()
        .enumerate()
        .position(|(at, s)| {
            s.name == "tablekit.audit_page"
                && s.fields.get("tablekit.first_key").map(String::as_str)
                    == Some("Sales/empid_000001")
                && descends(&spans, at, audit)
        })
        .unwrap_or_else(|| panic!("no audit page under the audit: {spans:#?}"));
    assert_eq!(spans[page].fields["tablekit.entities"], "1");
    assert!(
        spans
            .iter()
            .enumerate()
            .any(|(at, s)| s.name == "tablekit.store"
                && s.fields.get("db.collection.name").map(String::as_str)
                    == Some("EmployeesByEmail")
                && s.fields.get("db.operation").map(String::as_str) == Some("get")
                && descends(&spans, at, page)),
        "the page reads the copy: {spans:#?}"
    );
    let pass = spans
        .iter()
        .position(|s| s.name == "tablekit.relay_pass")
        .unwrap_or_else(|| panic!("no relay pass span: {spans:#?}"));
    assert_eq!(spans[pass].fields["tablekit.published"], "0");
    assert!(
        spans
            .iter()
            .enumerate()
            .any(|(at, s)| s.name == "tablekit.store"
                && s.fields.get("db.operation").map(String::as_str) == Some("query")
                && descends(&spans, at, pass)),
        "the pass reads the pending markers: {spans:#?}"
    );
}
