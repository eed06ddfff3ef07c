//! The migration in the simulated world: the last writer still runs the previous program
//! (members at version 1) beside the others, a migrator rewrites them under faults and
//! crashes, and the check asserts the migration converges on the quiet store.

use std::rc::Rc;
use std::time::Duration;

use tablekit_core::{IfMatch, random};
use tablekit_patterns::index::{AuditOptions, IndexedTable, WriteOutcome};

use super::written::{Written, chosen, member, member_put, member_updated};
use super::{Store, World, members};
use crate::entities::{LegacyMember, Member};
use crate::model::Effect;

/// The previous program's member: the same entity, keyed and modelled as a `Member`.
impl Written for LegacyMember {
    const NAME: &'static str = "Member";
    super::written::member_update!();
    fn make(world: &World, team: String, id: u32) -> Self {
        let m = member(world, team, id);
        LegacyMember {
            team: m.team,
            id: m.id,
            nick: m.nick,
            city: m.city,
            level: m.level,
            tag: m.tag,
            email: m.email,
            rev: m.rev,
            ends: m.ends,
            photo: m.photo,
        }
    }
    fn rev(&self) -> i64 {
        self.rev
    }
    fn effect(&self) -> Effect {
        member_put(self.rev, self.ends)
    }
    fn updated(&self) -> Effect {
        member_updated(self.rev)
    }
    fn key_of(id: u32) -> String {
        <Member as Written>::key_of(id)
    }
}

/// Rewrites the members stored under version 1, now and then, resuming a stopped pass
/// from its checkpoint.
pub(super) async fn migrator(world: Rc<World>, store: Store) {
    let engine = world.engine(&store).await;
    let members = members(&world, &store, &engine);
    while !world.stopping.get() {
        tokio::time::sleep(Duration::from_secs(3 + random::u64() % 6)).await;
        let busy = world.pass("a migration pass").await;
        let options = AuditOptions {
            job: Some("sim-migrate".into()),
            progress_every: 4,
            ..AuditOptions::default()
        };
        match tablekit_patterns::index::migrate(&members, &options).await {
            Ok(r) => world.log(format!(
                "migrator: {:?}, rewritten {}, conflicts {}",
                r.versions, r.rewritten, r.conflicts
            )),
            Err(e) => world.log(format!("migrator: pass failed: {e}")),
        }
        drop(busy);
    }
}

/// The violations of the migration's convergence (checked last: its writes leave
/// follow-up work the other checks would see).
pub(super) async fn converges(members: &IndexedTable<Member, Store>) -> Vec<String> {
    // The migration converges: on the quiet store one pass rewrites what is left at
    // version 1 without a conflict, and a second finds every member at version 2. (Last:
    // its writes leave follow-up work the checks above would see.)
    let migrated = async {
        let first = tablekit_patterns::index::migrate(members, &AuditOptions::default()).await?;
        let second = tablekit_patterns::index::migrate(members, &AuditOptions::default()).await?;
        Ok::<_, tablekit_patterns::Error>((first, second))
    };
    let mut found = Vec::new();
    match migrated.await {
        Ok((first, second)) => {
            if first.conflicts > 0 || first.unreadable > 0 {
                found.push(format!(
                    "a migration of the quiet store met conflicts: {first:?}"
                ));
            }
            if second.versions.keys().any(|v| *v != 2) || second.rewritten > 0 {
                found.push(format!("the migration did not converge: {second:?}"));
            }
        }
        Err(e) => found.push(format!("the migration failed on the quiet store: {e}")),
    }
    found
}
