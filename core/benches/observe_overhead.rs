//! What observability costs a store call when it is off, in one run: the median time of a
//! SQLite point get (`SqliteStore::get`, which runs inside `observe::call`), next to the
//! cost of `observe::call` itself around an empty call, with no `tracing` subscriber and
//! metrics off (the default), and with metrics on but no recorder installed. The
//! overhead is the wrapper's time over the bare empty call, as a share of the point get
//! (target: at most 2 %).
//!
//! `cargo bench -p tablekit-core --bench observe_overhead` (`BENCH_ITERATIONS`, default
//! 200000; `BENCH_ROUNDS`, default 15).

#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout
)]

use std::hint::black_box;
use std::time::Instant;

use tablekit_core::observe::{self, system};
use tablekit_core::{Entity, SqliteStore, TableStore};

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Nanoseconds per iteration of `body`, `n` times.
async fn per_call<F, Fut>(n: usize, mut body: F) -> f64
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let started = Instant::now();
    for _ in 0..n {
        body().await;
    }
    started.elapsed().as_secs_f64() * 1e9 / n as f64
}

/// An empty store call, observed.
async fn wrapped_empty_call() {
    let call = async { Ok::<u32, tablekit_core::Error>(7) };
    black_box(
        observe::call(system::SQLITE, "get", "Bench", Some("p"), call)
            .await
            .unwrap(),
    );
}

fn main() {
    let n = env_usize("BENCH_ITERATIONS", 200_000);
    let rounds = env_usize("BENCH_ROUNDS", 15).max(1);
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = SqliteStore::create(dir.path().join("b.db")).await.unwrap();
        store.create_table("Bench").await.unwrap();
        for i in 0..1000 {
            store
                .insert_or_replace("Bench", Entity::new("p", format!("r{i:04}")).with("N", i))
                .await
                .unwrap();
        }
        let gets = n / 20;
        let (mut get, mut bare, mut off, mut on) = (vec![], vec![], vec![], vec![]);
        for round in 0..rounds {
            observe::disable();
            get.push(
                per_call(gets, || {
                    let store = &store;
                    async move {
                        black_box(store.get("Bench", "p", "r0500", None).await.unwrap());
                    }
                })
                .await,
            );
            bare.push(
                per_call(n, || async {
                    black_box(async { Ok::<u32, tablekit_core::Error>(7) }.await.unwrap());
                })
                .await,
            );
            off.push(per_call(n, wrapped_empty_call).await);
            observe::enable();
            on.push(per_call(n, wrapped_empty_call).await);
            observe::disable();
            if round == 0 {
                println!("round 1 done");
            }
        }
        let (get, bare, off, on) = (median(get), median(bare), median(off), median(on));
        println!("observability off by default ({rounds} rounds, medians):");
        println!("  SQLite point get (observed, off): {get:.0} ns");
        println!(
            "  observe::call around an empty call: off {:.1} ns, metrics on without a recorder {:.1} ns; the empty call alone {:.1} ns",
            off, on, bare
        );
        println!(
            "  overhead when off: {:.1} ns = {:.2} % of a point get (target at most 2 %)",
            off - bare,
            (off - bare) / get * 100.0
        );
    });
}
