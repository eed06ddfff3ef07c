//! The drain: the faults stop, and the director sweeps round after round until nothing is
//! left to do and no pass or delivery is under way; then the processes stop.

use std::time::Duration;

use tablekit_patterns::index::Sweeper;

use super::{World, documents, feed};

/// Stops the faults, drains, and stops the processes; what it finds is a drain that did
/// not end.
pub(super) async fn run(world: &World) -> Vec<String> {
    // Faults stop; everything drains: the relay, workers, sweeper, leases lapse.
    world.log("director: faults stop, draining".into());
    world.chaos.set_rates(None);
    world.queue.set_faults(None);
    // The director sweeps too, each round: drained means the sweeper found nothing left
    // to delete (over SQLite a sweeper pass can outlast the quiet rounds).
    let sweeper = {
        let store = world.chaos.clone();
        let engine = world.engine(&store).await;
        Sweeper::options()
            .engine(engine)
            .blobs(world.blobs.clone())
            .build(store)
    };
    // The drain lasts 400 rounds, and at least as long (in the simulation's time) as an
    // entity written at the end of the workload takes to expire, be swept and have its
    // tombstone buried: a badge lives an hour, a tombstone five minutes, a marker one
    // more. Over SQLite the rounds are longer than 5 s (the paused clock moves on while
    // the store's thread works), so expiries fall inside the drain and keep it busy
    // until they are done.
    let patience = Duration::from_secs(75 * 60);
    let draining = tokio::time::Instant::now();
    let mut quiet = 0;
    let mut rounds = 0;
    while quiet < 3 && (rounds < 400 || draining.elapsed() < patience) && rounds < 4_000 {
        tokio::time::sleep(Duration::from_secs(5)).await;
        rounds += 1;
        let swept_at = world.now();
        let swept = sweeper.sweep().await.map(|r| r.deleted);
        let orphans = documents::sweep(world, &world.chaos).await;
        let caught_up = feed::caught_up(world).await;
        let backlog = tablekit_patterns::consistency::backlog(world.chaos.inner()).await;
        // Read last, with no await after it: no pass or delivery is under way when the
        // drain ends and the processes stop.
        let workless =
            |backlog: &tablekit_patterns::Result<tablekit_patterns::consistency::Backlog>| {
                world.queue.pending_total() == 0
                    && backlog
                        .as_ref()
                        .is_ok_and(|b| b.entries == 0 && b.markers == 0)
            };
        let mut idle = swept.as_ref().is_ok_and(|deleted| *deleted == 0)
            && orphans.as_ref().is_ok_and(|deleted| *deleted == 0)
            && caught_up
            && workless(&backlog);
        if idle && world.busy.get() > 0 {
            // Nothing to do, but a periodic pass is under way (over SQLite a pass spans
            // the paused clock's jumps, so one is often under way at any instant): hold
            // new passes, let the ones under way end, and look again.
            world.held.set(true);
            for _ in 0..3_000 {
                if world.busy.get() == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let caught_up = feed::caught_up(world).await;
            let again = tablekit_patterns::consistency::backlog(world.chaos.inner()).await;
            // Time passed while the passes ended (a stalled relay's pass lasts up to 25
            // s): what expired meanwhile is the next round's to sweep.
            let waited =
                world.busy.get() > 0 || world.now() > swept_at + chrono::Duration::seconds(1);
            idle = caught_up && workless(&again) && !waited;
        }
        // Read last, with no await after it: no pass or delivery is under way when the
        // drain ends and the processes stop.
        idle = idle && world.busy.get() == 0;
        quiet = if idle { quiet + 1 } else { 0 };
        // Passes stay held once the drain ends.
        if quiet < 3 {
            world.held.set(false);
        }
        if !idle && rounds % 50 == 0 {
            // What keeps the drain going, for the trace of a seed that does not drain.
            world.log(format!(
                "director: round {rounds} not quiet: swept {swept:?}, orphans {orphans:?}, \
                 queued {}, backlog {:?}, under way {:?}",
                world.queue.pending_total(),
                backlog.as_ref().map(|b| (b.entries, b.markers, b.delayed)),
                world.under_way.borrow()
            ));
        }
    }
    world.stopping.set(true);
    world.queue.stop();
    world.sim_clock.freeze();
    world.log(format!("director: drained after {rounds} rounds"));
    let mut found = Vec::new();
    if quiet < 3 {
        found.push(format!(
            "the system did not drain in {rounds} rounds ({} min)",
            draining.elapsed().as_secs() / 60
        ));
    }
    found
}
