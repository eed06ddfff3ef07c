//! The declaration of expiry (`#[entity(ttl = …)]` or an `#[entity(expires)]` field) on
//! the write path: a ttl sets the new value's expiry time from the table's clock, and a
//! value with an expiry time has an entry in the expiry index (a copy in the expiry
//! table, planned by the copies' declaration), which the [`Sweeper`](super::Sweeper)
//! reads. Reads leave out what expired ([`ReadSteps::hides`]), and a delete's tombstone
//! (stored as expired since the epoch).

use tablekit_core::typed::{EXPIRES_PROPERTY, is_expired};
use tablekit_core::{Entity, TableStore, Value};

use super::entry::ttl_end;
use crate::error::Result;
use crate::index::record::ExpiryLayout;
use crate::index::write::declaration::{
    Attempt, ReadSteps, Request, Step, WriteSteps, Writer, nothing,
};

/// Expiry.
pub(crate) struct Expiry;

impl<S: TableStore + Clone + 'static> WriteSteps<S> for Expiry {
    fn complete(&self, writer: &Writer<S>, request: &mut Request) -> Result<()> {
        let Some(entity) = request.entity.as_mut() else {
            return Ok(());
        };
        if let Some(ExpiryLayout::Ttl(seconds)) = writer.layout.expiry() {
            let at = ttl_end(writer.clock.now(), seconds);
            entity
                .properties
                .insert(EXPIRES_PROPERTY.to_owned(), Value::DateTime(at));
        }
        request
            .targets
            .extend(writer.layout.expiry_target(&request.source, entity));
        Ok(())
    }

    fn plan<'a>(&'a self, _attempt: &'a mut Attempt<'_, S>) -> Step<'a> {
        nothing()
    }
}

impl<S: TableStore + Clone + 'static> ReadSteps<S> for Expiry {
    fn hides(&self, writer: &Writer<S>, stored: &Entity) -> bool {
        is_expired(stored, writer.clock.now())
    }
}
