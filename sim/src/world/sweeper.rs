//! The expiry sweeper of the simulated world: a pass every five seconds until the run
//! stops.

use std::rc::Rc;
use std::time::Duration;

use tablekit_patterns::index::Sweeper;

use super::{Store, World};

pub(super) async fn sweeper(world: Rc<World>, store: Store) {
    let engine = world.engine(&store).await;
    let sweeper = Sweeper::options()
        .engine(engine)
        .blobs(world.blobs.clone())
        .build(store);
    while !world.stopping.get() {
        let busy = world.pass("a sweep").await;
        if let Err(e) = sweeper.sweep().await {
            world.log(format!("sweeper: pass failed: {e}"));
        }
        drop(busy);
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}
