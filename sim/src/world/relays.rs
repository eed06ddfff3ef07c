//! The relays of the simulated world: two processes that divide the pending partitions by
//! leased shares and publish through the fence, and the check that each stayed behind it.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use tablekit_patterns::consistency::Relay;

use super::{Store, World, fence};

pub(super) async fn relay(world: Rc<World>, store: Store, n: u32) {
    let Some(sink) = world.sink().await else {
        return;
    };
    let sink = Arc::new(fence::FencedSink {
        inner: sink,
        relay: format!("relay{n}"),
        store: world.chaos.inner().clone(),
        unfenced: world.unfenced.clone(),
        published: world.relay_published.clone(),
    });
    // Now and then the relay's process stalls for longer than its share lease (10 s)
    // after reading a page of entries (see `fence`).
    let store = fence::Stalling {
        inner: store,
        chance: 0.02,
        longest: Duration::from_secs(25),
    };
    let relay = Relay::options()
        .id(format!("relay{n}"))
        .share_lease(Duration::from_secs(10))
        .build(store, sink);
    while !world.stopping.get() {
        let busy = world.pass("a relay pass").await;
        if let Err(e) = relay.step().await {
            world.log(format!("relay: pass failed: {e}"));
        }
        drop(busy);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// What the relays published past the fence.
pub(super) fn check(world: &World) -> Vec<String> {
    let mut found = Vec::new();
    // Each relay published only what its shares' leases covered.
    if let Ok(unfenced) = world.unfenced.lock() {
        found.extend(unfenced.iter().cloned());
    }
    found
}
