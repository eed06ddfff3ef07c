//! The entity types the writers write ([`Written`]): how the seed makes a value of each,
//! and what a write of it does in the model.

use chrono::{DateTime, Utc};
use tablekit_core::{ErrorKind, IfMatch, random};
use tablekit_patterns::index::{IndexedTable, WriteOutcome};

use super::{EMAILS, IDS, Store, World};
use crate::entities::{Badge, City, Member};
use crate::model::{Answer, Effect};

pub(super) fn pick<'a>(choices: &[&'a str]) -> &'a str {
    choices[(random::u64() % choices.len() as u64) as usize]
}

pub(super) fn member(world: &World, team: String, id: u32) -> Member {
    Member {
        team,
        id,
        nick: pick(&["ann", "bo", "cy", "di"]).to_owned(),
        city: [City::Oslo, City::Lima, City::Pune][(random::u64() % 3) as usize],
        level: (random::u64() % 3) as u32,
        tag: pick(&["red", "blue", "green"]).to_owned(),
        email: format!("e{}", random::u64() % u64::from(EMAILS)),
        rev: world.rev(),
        ends: (random::u64() % 100 < 15)
            .then(|| world.now() + chrono::Duration::minutes((random::u64() % 90) as i64)),
        photo: (random::u64().is_multiple_of(2))
            .then(|| format!("photo {}", world.next_rev.get()).into_bytes()),
    }
}

pub(super) fn badge(world: &World, team: String, id: u32) -> Badge {
    Badge {
        team,
        id,
        code: pick(&["x", "y", "z"]).to_owned(),
        holder: (random::u64() % u64::from(IDS)) as u32,
        holder_email: None,
        rev: world.rev(),
        note: (random::u64().is_multiple_of(3))
            .then(|| format!("note {}", world.next_rev.get()).into_bytes()),
    }
}

pub(super) fn answer_of(error: &tablekit_patterns::Error) -> Answer {
    match error.kind() {
        ErrorKind::AlreadyExists | ErrorKind::PreconditionFailed | ErrorKind::NotFound => {
            Answer::Refused(error.to_string())
        }
        _ => Answer::Unknown(error.to_string()),
    }
}

/// One typed entity type the writers write.
pub(super) trait Written:
    tablekit_core::typed::EntityType + Clone + Send + Sync + 'static
{
    const NAME: &'static str;
    fn make(world: &World, team: String, id: u32) -> Self;
    fn rev(&self) -> i64;
    fn effect(&self) -> Effect;
    /// The effect of a partial update with this value (fields it leaves keep theirs).
    fn updated(&self) -> Effect {
        self.effect()
    }
    fn key_of(id: u32) -> String;
    /// A typed partial update of the stored entity with this value's keys: `rev` and a
    /// random choice of the other fields a partial update may set, to this value's.
    fn update<'t>(
        &'t self,
        table: &'t IndexedTable<Self, Store>,
        if_match: IfMatch,
    ) -> impl Future<Output = tablekit_patterns::Result<WriteOutcome>> + 't;
}

/// Whether a partial update sets one more field (a coin toss of the seed).
pub(super) fn chosen() -> bool {
    random::u64().is_multiple_of(2)
}

/// A member's typed partial update (either program's type: both declare the same
/// fields): `rev` and a random choice of the others, to this value's.
macro_rules! member_update {
    () => {
        fn update<'t>(
            &'t self,
            table: &'t IndexedTable<Self, Store>,
            if_match: IfMatch,
        ) -> impl Future<Output = tablekit_patterns::Result<WriteOutcome>> + 't {
            let f = Self::fields();
            let mut update = table
                .primary()
                .key(&self.team)
                .key(self.id)
                .update()
                .set(f.rev, self.rev);
            if chosen() {
                update = update.set(f.nick, &self.nick);
            }
            if chosen() {
                update = update.set(f.city, self.city);
            }
            if chosen() {
                update = update.set(f.level, self.level);
            }
            if chosen() {
                update = update.set(f.tag, &self.tag);
            }
            if chosen() {
                update = update.set(f.email, &self.email);
            }
            if chosen() {
                update = update.set(f.photo, self.photo.clone());
            }
            update.apply(if_match)
        }
    };
}
pub(super) use member_update;

impl Written for Member {
    const NAME: &'static str = "Member";
    member_update!();
    fn make(world: &World, team: String, id: u32) -> Self {
        member(world, team, id)
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
        format!("m_{id:02}")
    }
}

/// A member write's effect (either program's).
pub(super) fn member_put(rev: i64, ends: Option<DateTime<Utc>>) -> Effect {
    Effect::Put {
        rev,
        expires: ends,
        ttl: None,
        unknown_expiry: false,
    }
}

/// A member update's effect: `ends` is not among the fields an update sets, so the
/// stored one stays.
pub(super) fn member_updated(rev: i64) -> Effect {
    Effect::Put {
        rev,
        expires: None,
        ttl: None,
        unknown_expiry: true,
    }
}

impl Written for Badge {
    const NAME: &'static str = "Badge";
    fn update<'t>(
        &'t self,
        table: &'t IndexedTable<Self, Store>,
        if_match: IfMatch,
    ) -> impl Future<Output = tablekit_patterns::Result<WriteOutcome>> + 't {
        let f = Badge::fields();
        let mut update = table
            .primary()
            .key(&self.team)
            .key(self.id)
            .update()
            .set(f.rev, self.rev);
        if chosen() {
            update = update.set(f.code, &self.code);
        }
        if chosen() {
            update = update.set(f.holder, self.holder);
        }
        if chosen() {
            update = update.set(f.note, self.note.clone());
        }
        update.apply(if_match)
    }
    fn make(world: &World, team: String, id: u32) -> Self {
        badge(world, team, id)
    }
    fn rev(&self) -> i64 {
        self.rev
    }
    fn effect(&self) -> Effect {
        Effect::Put {
            rev: self.rev,
            expires: None,
            ttl: Some(chrono::Duration::hours(1)),
            unknown_expiry: false,
        }
    }
    fn key_of(id: u32) -> String {
        format!("b_{id:02}")
    }
}
