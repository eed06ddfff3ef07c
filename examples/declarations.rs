//! Three declarations on the entity type, kept by `IndexedTable` and the workers:
//!
//! - `#[unique(name = "email", key = "{email}")]`: no two accounts, in any partition,
//!   hold one email; a taken one is refused naming its holder;
//! - `#[entity(changes = "account-changes")]`: every committed insert, update and delete
//!   is published, after its commit and through the outbox, as a typed change event;
//! - `#[entity(ttl = "30m")]` and `#[entity(expires)]`: reads leave expired entities out
//!   and the expiry sweeper deletes them, copies and reservations included.
//!
//! Everything runs on real parts in one process: a SQLite file for the tables, a SQLite
//! queue file for the index work and the change events, an index worker and a change
//! consumer on the worker runtime. The clock is moved by hand to show expiry.
//!
//! `cargo run --example declarations`

#![allow(clippy::print_stdout)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tablekit::core::clock::{Clock, ManualClock};
use tablekit::patterns::index::{AuditOptions, OutboxSink, Sweeper};
use tablekit::prelude::*;
use tablekit::workers::changes::{Change, Changes};
use tablekit::workers::index::{QueueSink, register};
use tablekit::workers::operation::Registry;
use tablekit::workers::queue::sqlite::SqliteQueue;
use tablekit::workers::runtime::{Worker, WorkerConfig};

/// An account: one email per account across every team, its changes published, and a
/// trial that ends.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Accounts",
    kind = "Account",
    partition_key = "{team}",
    row_key = "{login}",
    changes = "account-changes"
)]
#[unique(name = "email", key = "{email}")]
struct Account {
    team: String,
    login: String,
    email: String,
    /// A trial account is gone when its trial ends; `None`: a paying account, kept.
    #[entity(expires)]
    trial_ends: Option<DateTime<Utc>>,
}

/// A sign-in session: gone half an hour after it was last written.
#[derive(Entity, Clone, Debug, PartialEq)]
#[entity(
    table = "Sessions",
    kind = "Session",
    partition_key = "{login}",
    row_key = "{id}",
    ttl = "30m"
)]
struct Session {
    login: String,
    id: String,
}

fn account(team: &str, login: &str, email: &str, trial_ends: Option<DateTime<Utc>>) -> Account {
    Account {
        team: team.into(),
        login: login.into(),
        email: email.into(),
        trial_ends,
    }
}

/// Waits until `done` holds (the workers run beside this code), at most 20 s.
async fn until<F, Fut>(what: &str, mut done: F) -> tablekit::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !done().await {
        if started.elapsed() > Duration::from_secs(20) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("timed out waiting for {what}"),
            )
            .into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

#[tokio::main]
async fn main() -> tablekit::Result<()> {
    let dir = tempfile::tempdir()?;
    let store =
        AnyStore::create(&format!("sqlite:{}", dir.path().join("app.db").display())).await?;
    let queue = SqliteQueue::open(dir.path().join("queue.db")).await?;
    let clock = ManualClock::new(Utc::now());

    // Writers hand their follow-up work to the `index` queue; change events go to the
    // queue their type names.
    let sink: Arc<dyn OutboxSink> = Arc::new(QueueSink::open(queue.clone(), "index").await?);
    let accounts = IndexedTable::<Account, _>::options()
        .sink(sink.clone())
        .clock(clock.shared())
        .open(store.clone())
        .await?;
    let sessions = IndexedTable::<Session, _>::options()
        .sink(sink.clone())
        .clock(clock.shared())
        .open(store.clone())
        .await?;

    // The workers: the index worker applies the follow-up work; the change consumer
    // receives every committed change of an account, typed.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let shutdown = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        let _ = stopped.wait_for(|s| *s).await;
    };
    let index_worker = Worker::new(
        queue.clone(),
        register(Registry::new(), store.clone(), None),
        WorkerConfig::new("index"),
    );
    let index_task = tokio::spawn(index_worker.run(shutdown(stopped.clone())));
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let consumer = {
        let seen = seen.clone();
        Changes::<Account>::consume(queue.clone(), move |change: Change<Account>| {
            let seen = seen.clone();
            async move {
                let line = format!(
                    "{:?} {}/{} v{} email {}",
                    change.change,
                    change.partition_key,
                    change.row_key,
                    change.version,
                    change.value.email
                );
                if let Ok(mut seen) = seen.lock() {
                    seen.push(line);
                }
                Ok(())
            }
        })?
    };
    let changes_task = tokio::spawn(consumer.run(shutdown(stopped.clone())));

    // Unique values: one email per account, across teams.
    let trial = Some(clock.now() + chrono::Duration::days(14));
    accounts
        .insert(&account("sales", "ada", "ada@contoso.com", None))
        .await?;
    match accounts
        .insert(&account("support", "eve", "ada@contoso.com", trial))
        .await
    {
        Err(tablekit::Error::ValueTaken { value, holder, .. }) => {
            println!("unique: `{value}` is taken by {holder}")
        }
        other => panic!("the taken email was not refused: {other:?}"),
    }
    // A changed value is released after the commit, by the index worker.
    accounts
        .upsert(&account("sales", "ada", "ada.l@contoso.com", None))
        .await?;
    until("the old email to be free", || async {
        accounts
            .insert(&account("support", "eve", "ada@contoso.com", trial))
            .await
            .is_ok()
    })
    .await?;
    println!("unique: after ada's change, eve took ada@contoso.com");

    // Expiry: a session half an hour after its last write, a trial when it ends.
    sessions
        .insert(&Session {
            login: "ada".into(),
            id: "s1".into(),
        })
        .await?;
    clock.advance(chrono::Duration::minutes(31));
    println!(
        "expiry: after 31 minutes the session reads as {:?}",
        sessions
            .primary()
            .key("ada")
            .key("s1")
            .get()
            .await?
            .map(|s| s.value.id)
    );
    clock.advance(chrono::Duration::days(14));
    println!(
        "expiry: after the trial eve reads as {:?}, ada (paying) as {:?}",
        accounts
            .primary()
            .key("support")
            .key("eve")
            .get()
            .await?
            .map(|a| a.value.login),
        accounts
            .primary()
            .key("sales")
            .key("ada")
            .get()
            .await?
            .map(|a| a.value.login)
    );
    // The sweeper deletes what expired through the indexed delete; its follow-up work
    // (expiry entries, eve's reservation) goes to the index worker, and eve's delete is
    // a change event like any other. The index worker writes the expiry entries after
    // the commits, so the sweep waits for them.
    let sweeper = Sweeper::options()
        .sink(sink.clone())
        .clock(clock.shared())
        .build(store.clone());
    let (mut deleted, started) = (0, Instant::now());
    while deleted < 2 {
        if started.elapsed() > Duration::from_secs(20) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "timed out waiting for the sweeper",
            )
            .into());
        }
        deleted += sweeper.sweep().await?.deleted;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("expiry: the sweeper deleted {deleted} expired entities");
    until("eve's email to be free", || async {
        accounts
            .insert(&account("marketing", "max", "ada@contoso.com", None))
            .await
            .is_ok()
    })
    .await?;
    println!("unique: eve's email went with her; max took it");

    // Change subscriptions: ada inserted and updated, eve inserted and deleted (expired),
    // max inserted.
    until("five change events", || async {
        seen.lock().map(|s| s.len() >= 5).unwrap_or(false)
    })
    .await?;
    for line in seen.lock().map(|s| s.clone()).unwrap_or_default() {
        println!("change (in arrival order; versions give the order): {line}");
    }

    until("the index worker to finish", || async {
        accounts
            .audit(&AuditOptions::default())
            .await
            .is_ok_and(|r| r.is_clean())
    })
    .await?;
    println!("audit clean: true");
    let _ = stop.send(true);
    index_task.await.map_err(std::io::Error::from)??;
    changes_task.await.map_err(std::io::Error::from)??;
    Ok(())
}
