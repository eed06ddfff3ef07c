//! The audits in the simulated world: an auditor audits the members every twenty seconds
//! while the run lasts, and the check asserts that the audits of the drained store are
//! clean.

use std::rc::Rc;
use std::time::Duration;

use tablekit_patterns::index::{AuditOptions, IndexedTable};

use super::{Store, World, members};
use crate::entities::{Badge, Member};

pub(super) async fn auditor(world: Rc<World>, store: Store) {
    let engine = world.engine(&store).await;
    let members = members(&world, &store, &engine);
    while !world.stopping.get() {
        tokio::time::sleep(Duration::from_secs(20)).await;
        let options = AuditOptions {
            blobs: Some(world.blobs.clone()),
            ..AuditOptions::default()
        };
        let _ = members.audit(&options).await;
    }
}

/// The audits of members and badges, over the drained store.
pub(super) async fn check(
    world: &World,
    members: &IndexedTable<Member, Store>,
    badges: &IndexedTable<Badge, Store>,
) -> Vec<String> {
    let mut found = Vec::new();
    // The audits are clean.
    let options = || AuditOptions {
        blobs: Some(world.blobs.clone()),
        ..AuditOptions::default()
    };
    for (table, report) in [
        ("Members", members.audit(&options()).await),
        ("Badges", badges.audit(&options()).await),
    ] {
        match report {
            Ok(r) if !r.is_clean() => {
                let mut kinds = std::collections::BTreeMap::<String, usize>::new();
                for f in &r.findings {
                    *kinds
                        .entry(format!("{:?} {}", f.drift, f.index))
                        .or_default() += 1;
                }
                found.push(format!(
                    "the audit of {table} is not clean: {kinds:?}; first: {:?}",
                    r.findings.first()
                ));
            }
            Ok(_) => {}
            Err(e) => found.push(format!("the audit of {table} failed: {e}")),
        }
    }
    found
}
