//! How the worker applies denormalised fields' follow-up work: links put and removed
//! beside their sources (never one a pending write of its dependent puts), a dependent's
//! copy of a source's value brought up to date, and its own copies refreshed.

use tablekit_core::{Entity, ErrorKind, IfMatch, TableStore, WriteOp};

use super::record::DenormalizedTarget;
use super::record::{RemoveLink, SyncDenormalized, SyncNewDependents};
use crate::error::Result;
use crate::index::operation::{Applied, IndexApplier};
use crate::index::record::{EntityRef, IndexRecord, Target, copy_source};
use crate::index::stored::get_or_none;
use crate::index::upkeep::{Applies, Applying};

impl<S: TableStore + Clone + 'static> Applies<S> for SyncDenormalized {
    fn apply<'a>(&'a self, applier: &'a IndexApplier<S>) -> Applying<'a> {
        Box::pin(applier.sync_denormalized(
            &self.dependent,
            &self.property,
            &self.source,
            &self.source_property,
        ))
    }
}

impl<S: TableStore + Clone + 'static> Applies<S> for SyncNewDependents {
    fn apply<'a>(&'a self, applier: &'a IndexApplier<S>) -> Applying<'a> {
        Box::pin(applier.sync_new_dependents(&self.source, &self.properties, &self.seen))
    }
}

impl<S: TableStore + Clone + 'static> Applies<S> for RemoveLink {
    fn apply<'a>(&'a self, applier: &'a IndexApplier<S>) -> Applying<'a> {
        Box::pin(applier.remove_link(
            &self.dependent,
            &self.property,
            &self.source,
            &self.source_property,
        ))
    }
}
impl<S: TableStore> IndexApplier<S> {
    /// Deletes the link of `dependent`'s `property` to `source`, unless the dependent
    /// claims it (a late or repeated removal never undoes a newer claim).
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn remove_link(
        &self,
        dependent: &EntityRef,
        property: &str,
        source: &EntityRef,
        source_property: &str,
    ) -> Result<Applied> {
        self.remove_link_of(dependent, property, source, source_property, None)
            .await
    }

    /// As [`remove_link`](Self::remove_link), run by the undoing of the write whose intent
    /// is `intent` (that write is not counted among those in flight).
    ///
    /// # Errors
    /// The store's errors; [`Error::Contention`](crate::Error::Contention).
    pub(crate) async fn remove_link_of(
        &self,
        dependent: &EntityRef,
        property: &str,
        source: &EntityRef,
        source_property: &str,
        intent: Option<&str>,
    ) -> Result<Applied> {
        let claim = Target::from(DenormalizedTarget {
            property: property.to_owned(),
            source: source.clone(),
            source_property: source_property.to_owned(),
        });
        let link = crate::index::decl::denormalized::link_ref(dependent, property, source);
        let mut retry = self.retry.start();
        loop {
            retry
                .next(|| format!("link of `{property}` of {dependent}"))
                .await?;
            let Some(found) = get_or_none(&self.store, &link).await? else {
                return Ok(Applied::Unchanged);
            };
            if self
                .link_wanted_in_flight(dependent, property, source, intent)
                .await?
            {
                // A write of the dependent that puts this link has not committed yet:
                // its commit claims the link, or its undoing decides again.
                return Ok(Applied::Superseded);
            }
            let claimed = match get_or_none(&self.store, dependent).await? {
                Some(d) => IndexRecord::read(&d)?.is_some_and(|r| r.targets.contains(&claim)),
                None => false,
            };
            if claimed {
                return Ok(Applied::Superseded);
            }
            let if_match = found.etag.map_or(IfMatch::Any, IfMatch::ETag);
            match self
                .store
                .delete(&link.table, &link.partition_key, &link.row_key, if_match)
                .await
            {
                Ok(()) => return Ok(Applied::Changed),
                Err(e) if e.kind() == ErrorKind::PreconditionFailed => {}
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Applied::Unchanged),
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether a write of `dependent` other than `undoing_id`'s is pending (its intent
    /// recorded, neither committed nor undone) and puts the link of `property` to
    /// `source`: it may yet commit and claim it. Read after the link and before the
    /// dependent, so a write that commits in between is seen claiming it. Reads the
    /// dependent partition's outbox entries (its pending work, not its entities).
    async fn link_wanted_in_flight(
        &self,
        dependent: &EntityRef,
        property: &str,
        source: &EntityRef,
        undoing_id: Option<&str>,
    ) -> Result<bool> {
        Ok(
            crate::index::reclaim::pending_writes(&self.store, dependent)
                .await?
                .iter()
                .any(|(_, undoing)| {
                    Some(undoing.id.as_str()) != undoing_id
                        && undoing
                            .links
                            .iter()
                            .any(|(p, from, _)| p == property && from == source)
                }),
        )
    }

    /// Writes the link of a denormalised field beside its source (idempotent).
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn put_link(
        &self,
        dependent: &EntityRef,
        property: &str,
        source: &EntityRef,
        source_property: &str,
    ) -> Result<()> {
        self.put_link_for(dependent, property, source, source_property, None)
            .await
    }

    /// As [`put_link`](Self::put_link), for a write that recorded the intent `intent`
    /// (its id): the link names it, so only that intent's undoing removes it.
    ///
    /// # Errors
    /// The store's errors.
    pub(crate) async fn put_link_for(
        &self,
        dependent: &EntityRef,
        property: &str,
        source: &EntityRef,
        source_property: &str,
        intent: Option<&str>,
    ) -> Result<()> {
        let mut link = crate::index::decl::denormalized::link_entity(
            dependent,
            property,
            source,
            source_property,
        )?;
        if let Some(intent) = intent {
            link.properties.insert(
                crate::index::decl::denormalized::INTENT_PROPERTY.to_owned(),
                tablekit_core::Value::String(intent.to_owned()),
            );
        }
        match self
            .store
            .insert_or_replace(&source.table, link.clone())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.kind() == ErrorKind::TableNotFound => {
                self.store.create_table_if_not_exists(&source.table).await?;
                self.store.insert_or_replace(&source.table, link).await?;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Copies `source`'s property into `dependent`'s, if the dependent still declares
    /// that source; again when the source changed meanwhile, so the last run leaves the
    /// source's latest value.
    ///
    /// # Errors
    /// The store's errors; [`Error::Contention`](crate::Error::Contention).
    pub(crate) async fn sync_denormalized(
        &self,
        dependent: &EntityRef,
        property: &str,
        source: &EntityRef,
        source_property: &str,
    ) -> Result<Applied> {
        let claim = Target::from(DenormalizedTarget {
            property: property.to_owned(),
            source: source.clone(),
            source_property: source_property.to_owned(),
        });
        let mut retry = self.retry.start();
        loop {
            retry
                .next(|| format!("denormalised `{property}` of {dependent}"))
                .await?;
            // The source and the dependent, read at once: the dependent's merge is
            // conditional on its ETag and the source is read again after it, so the order
            // of the two reads does not matter.
            let (from, current) = tokio::join!(
                get_or_none(&self.store, source),
                get_or_none(&self.store, dependent)
            );
            let (from, current) = (from?, current?);
            let Some(from) = from else {
                // An earlier delivery may have merged the field and stopped before the
                // dependent's copies.
                self.refresh_copies(dependent, property, Some(current))
                    .await?;
                return Ok(Applied::Unchanged);
            };
            let Some(current) = current else {
                return Ok(Applied::Superseded);
            };
            let claims = IndexRecord::read(&current)?.is_some_and(|r| r.targets.contains(&claim));
            if !claims {
                return Ok(Applied::Superseded);
            }
            let value = from.properties.get(source_property);
            if current.properties.get(property) == value {
                // A delivery after a crash finds the field up to date: its copies may
                // not be yet.
                self.refresh_copies(dependent, property, Some(Some(current)))
                    .await?;
                return Ok(Applied::Unchanged);
            }
            let if_match = current.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
            let op = match value {
                Some(value) => {
                    let mut patch = Entity::new(&dependent.partition_key, &dependent.row_key);
                    patch.properties.insert(property.to_owned(), value.clone());
                    WriteOp::Merge(patch, if_match)
                }
                None => {
                    let mut whole = current.clone();
                    whole.properties.shift_remove(property);
                    WriteOp::Replace(whole, if_match)
                }
            };
            match self.store.execute(&dependent.table, op).await {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::PreconditionFailed => continue,
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Applied::Superseded),
                Err(e) => return Err(e),
            }
            // The source may have changed while the copy was written: copy again. The
            // dependent is read beside it, for its copies.
            let (again, now) = tokio::join!(
                get_or_none(&self.store, source),
                get_or_none(&self.store, dependent)
            );
            if again?.and_then(|a| a.etag) == from.etag {
                self.refresh_copies(dependent, property, Some(now?)).await?;
                return Ok(Applied::Changed);
            }
        }
    }

    /// Reads the links of `source` again after its write committed and brings up to date
    /// each dependent copying one of `properties` whose link is not among `seen` (those
    /// the write read before its commit).
    ///
    /// # Errors
    /// The store's errors; [`Error::Contention`](crate::Error::Contention).
    pub(crate) async fn sync_new_dependents(
        &self,
        source: &EntityRef,
        properties: &[String],
        seen: &[String],
    ) -> Result<Applied> {
        let mut applied = Applied::Unchanged;
        for link in super::links_of(&self.store, source).await? {
            if link.dependent == *source
                || !properties.contains(&link.source_property)
                || seen.contains(&link.at.row_key)
            {
                continue;
            }
            let synced = self
                .sync_denormalized(
                    &link.dependent,
                    &link.property,
                    source,
                    &link.source_property,
                )
                .await?;
            if synced == Applied::Changed {
                applied = Applied::Changed;
            }
        }
        Ok(applied)
    }

    /// Brings `property` of the dependent's index copies (those that carry it) to the
    /// dependent's current value: a denormalised field changed by its source's write
    /// changes the copies too, at the dependent's unchanged version.
    /// `read` is the dependent as just read, if it was: the first pass starts from it.
    async fn refresh_copies(
        &self,
        dependent: &EntityRef,
        property: &str,
        mut read: Option<Option<Entity>>,
    ) -> Result<()> {
        let mut retry = self.retry.start();
        'again: loop {
            retry
                .next(|| format!("the copies of `{property}` of {dependent}"))
                .await?;
            let current = match read.take() {
                Some(current) => current,
                None => get_or_none(&self.store, dependent).await?,
            };
            let Some(current) = current else {
                return Ok(());
            };
            let Some(record) = IndexRecord::read(&current)? else {
                return Ok(());
            };
            let value = current.properties.get(property);
            let mut wrote = false;
            for target in &record.targets {
                let Some(at) = target.carries(property) else {
                    continue;
                };
                let Some(copy) = get_or_none(&self.store, at).await? else {
                    continue;
                };
                let ours = copy_source(&copy)
                    .is_some_and(|(owner, v)| owner == *dependent && v == record.version);
                if !ours || copy.properties.get(property) == value {
                    continue;
                }
                let if_match = copy.etag.clone().map_or(IfMatch::Any, IfMatch::ETag);
                let mut whole = copy;
                match value {
                    Some(v) => {
                        whole.properties.insert(property.to_owned(), v.clone());
                    }
                    None => {
                        whole.properties.shift_remove(property);
                    }
                }
                match self
                    .store
                    .execute(&at.table, WriteOp::Replace(whole, if_match))
                    .await
                {
                    Ok(_) => wrote = true,
                    // The copy changed or went meanwhile: read everything again.
                    Err(e)
                        if matches!(
                            e.kind(),
                            ErrorKind::PreconditionFailed | ErrorKind::NotFound
                        ) =>
                    {
                        continue 'again;
                    }
                    Err(e) => return Err(e),
                }
            }
            // A copy written here carries the value read above: if the dependent changed
            // meanwhile (another delivery copied another value of its source), that copy
            // may be behind it — read everything again. A pass that wrote nothing left
            // the copies to whoever changed the dependent.
            if !wrote {
                return Ok(());
            }
            let after = get_or_none(&self.store, dependent).await?;
            if after.and_then(|a| a.etag) != current.etag {
                continue 'again;
            }
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use tablekit_core::{MemoryStore, TableStore};

    use crate::consistency::Engine;
    use crate::index::decl::denormalized::link_ref;
    use crate::index::operation::{Applied, IndexApplier};
    use crate::index::reclaim::Reclaim;
    use crate::index::record::EntityRef;

    async fn store_with(tables: &[&str]) -> MemoryStore {
        let store = MemoryStore::new();
        for table in tables {
            store
                .create_table_if_not_exists(table)
                .await
                .expect("table");
        }
        store
    }

    /// A badge deleted, then inserted again with the same holder: the delete's late link
    /// removal ran between the new write's link and its commit, read the badge before the
    /// commit (not claiming the link) and deleted the new link. And two writes of a badge
    /// putting the same link: the one that failed removed the link the other, still in
    /// flight, needed. A link a pending write of its dependent puts is left to that write
    /// (its commit claims it, its undoing decides again).
    #[tokio::test]
    async fn a_link_removal_leaves_the_link_of_a_write_in_flight() {
        let store = store_with(&["Badges", "Members"]).await;
        let engine = Engine::new(store.clone());
        let applier = IndexApplier::new(store.clone());
        let badge = EntityRef::new("Badges", "t1", "b_03");
        let holder = EntityRef::new("Members", "t1", "m_04");
        let mut intents = Vec::new();
        for _ in 0..2 {
            let undoing = Reclaim {
                id: uuid::Uuid::new_v4().simple().to_string(),
                source: badge.clone(),
                reservations: Vec::new(),
                links: vec![("holder_email".into(), holder.clone(), "email".into())],
                blob_nonce: None,
            };
            let intent = engine
                .record_intent("Badges", "t1", undoing.envelope().expect("envelope"))
                .await
                .expect("intent");
            applier
                .put_link_for(&badge, "holder_email", &holder, "email", Some(&intent.id()))
                .await
                .expect("link");
            intents.push(intent);
        }
        let link = link_ref(&badge, "holder_email", &holder);
        let exists = || async {
            store
                .get(&link.table, &link.partition_key, &link.row_key, None)
                .await
                .expect("get")
                .is_some()
        };
        // The earlier delete's removal arrives: writes are in flight, the link stays.
        assert_eq!(
            applier
                .remove_link(&badge, "holder_email", &holder, "email")
                .await
                .expect("remove"),
            Applied::Superseded
        );
        assert!(exists().await, "the in-flight write's link was removed");
        // The second write fails and is undone: the first is still in flight.
        engine.abandon(&intents[1]).await;
        let second = intents[1].id();
        assert_eq!(
            applier
                .remove_link_of(&badge, "holder_email", &holder, "email", Some(&second))
                .await
                .expect("undo"),
            Applied::Superseded
        );
        assert!(
            exists().await,
            "a failed write removed the link another needs"
        );
        // The first fails too: now nothing claims the link.
        engine.abandon(&intents[0]).await;
        let first = intents[0].id();
        assert_eq!(
            applier
                .remove_link_of(&badge, "holder_email", &holder, "email", Some(&first))
                .await
                .expect("undo"),
            Applied::Changed
        );
        assert!(!exists().await);
    }
}
