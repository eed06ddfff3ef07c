//! The declaration of a change feed (`#[feed]`) on the write path: each write of the type
//! inserts its change beside the entity, in the write's own entity group transaction, and
//! asks the commit to lease the partition's pending marker, so the relay sequences it into
//! the feed's log (`crate::feed`).

use tablekit_core::{TableStore, WriteOp};

use crate::error::Result;
use crate::feed::log::waiting_entry;
use crate::index::record::{DeclaredLayout, Elsewhere, LaysOut};
use crate::index::write::declaration::{Attempt, Role, Step, WriteSteps, nothing};

/// The change feed.
pub(crate) struct Feed;

/// The feed's share count a declaration names (the derive always writes it).
fn shares(declared: &DeclaredLayout) -> Result<u32> {
    declared.needs::<u32>("shares")
}

impl<S: TableStore + Clone + 'static> WriteSteps<S> for Feed {
    fn plan<'a>(&'a self, attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        let layout = &attempt.writer.layout;
        let Some(declared) = layout.declared("feed", "feed") else {
            return nothing();
        };
        let shares = match shares(declared) {
            Ok(shares) => shares.max(1),
            Err(e) => return Box::pin(std::future::ready(Err(e))),
        };
        let Some(event) = attempt.change_event("") else {
            return nothing();
        };
        Box::pin(async move {
            let entry = waiting_entry(&event, shares)?;
            attempt.plan.push(WriteOp::Insert(entry), Role::of("feed"));
            attempt.plan.keep_pending();
            Ok(())
        })
    }
}

/// How `feed` lays out: no target and no table of its own beside the feed's
/// (`TablekitFeed`); its changes sequenced by the relay.
struct Log;

impl LaysOut for Log {
    fn check(&self, declared: &DeclaredLayout) -> Result<()> {
        shares(declared)?;
        declared.needs::<u64>("retention").map(drop)
    }

    fn tables(&self, _declared: &DeclaredLayout, _table: &str) -> Vec<String> {
        vec![crate::feed::FEED_TABLE.to_owned()]
    }

    fn follow_up(&self, _declared: &DeclaredLayout, _at: &Elsewhere<'_>) -> Option<String> {
        Some(format!(
            "feed: changes sequenced into table `{}` by the relay",
            crate::feed::FEED_TABLE
        ))
    }
}

crate::index::registry::roles::declaration! {
    Feed {
        attribute: "feed",
        steps: [write],
        targets: [],
        operations: [],
        lays_out: Log,
    }
}
