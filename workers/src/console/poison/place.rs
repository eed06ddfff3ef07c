//! Where an operator is in a queue's poison messages ([`Place`]: the filter, the page and
//! its size), what a poison page shows ([`PoisonView`]), and the bounds of a page and of a
//! bulk action: the model the poison pages, their actions and the API share.

use super::super::forms::Form;
use crate::error::Result;
use crate::queue::{PoisonFilter, PoisonPage, PoisonQuery, Queue};

/// How many messages a page lists unless asked.
pub(in crate::console) const DEFAULT_PAGE: usize = 50;
/// The most messages a page lists.
pub(in crate::console) const MAX_PAGE: usize = 100;
/// The most bytes of a body a page shows.
pub(in crate::console) const PREVIEW: usize = 800;
/// The most messages one bulk action takes.
pub(in crate::console) const MAX_SET: usize = 100_000;

/// Where the operator is in a queue's poison messages: the filter, the page and its size.
/// An action returns to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::console) struct Place {
    pub(in crate::console) filter: PoisonFilter,
    /// The cursor of the page (`None`: the first).
    pub(in crate::console) after: Option<String>,
    /// Messages per page.
    pub(in crate::console) limit: usize,
    /// Newest first rather than oldest first.
    pub(in crate::console) newest_first: bool,
    /// Read backwards: the page before the cursor `after` of the other order (the last
    /// page when `after` is `None`).
    pub(in crate::console) backwards: bool,
}

impl Place {
    /// The place a form carries in its hidden fields (`kind`, `fid`, `reason`, `body`,
    /// `after`, `limit`).
    pub(in crate::console) fn of_form(form: &Form) -> Self {
        Place {
            filter: filter_of(
                form.get("kind").unwrap_or_default(),
                form.get("fid").unwrap_or_default(),
                form.get("reason").unwrap_or_default(),
                form.get("body").unwrap_or_default(),
            ),
            after: form
                .get("after")
                .filter(|a| !a.is_empty())
                .map(str::to_owned),
            limit: form
                .get("limit")
                .and_then(|l| l.parse().ok())
                .unwrap_or(DEFAULT_PAGE)
                .clamp(1, MAX_PAGE),
            newest_first: form.get("order") == Some("newest"),
            backwards: form.get("back") == Some("1"),
        }
        .grouped(
            form.get("group").unwrap_or_default(),
            form.get("undecodable") == Some("1"),
        )
    }

    /// The place with the reason group (and undecodable-reasons) parts of its filter.
    pub(in crate::console) fn grouped(mut self, group: &str, undecodable: bool) -> Self {
        self.filter = self.filter.reason_group(group);
        if undecodable {
            self.filter = self.filter.undecodable_reason();
        }
        self
    }

    /// Reads the page this place shows from `queue`'s poison queue, bodies cut to
    /// `preview` bytes: in its order; read backwards from its cursor, or the last page
    /// (one read of the other order's first page) when it has none.
    ///
    /// # Errors
    /// The backend's.
    pub(in crate::console) async fn read(
        &self,
        broker: &impl Queue,
        queue: &str,
        preview: usize,
    ) -> Result<PoisonPage> {
        let query = self.query(preview);
        if self.backwards && self.after.is_none() {
            broker
                .poison_last_page(queue, &query.clone().reversed())
                .await
        } else if self.backwards {
            Ok(broker.poison_page(queue, &query).await?.reversed())
        } else {
            broker.poison_page(queue, &query).await
        }
    }

    /// The query of the page this place shows.
    pub(super) fn query(&self, preview: usize) -> PoisonQuery {
        let query = PoisonQuery::new(self.limit, preview)
            .filter(self.filter.clone())
            .newest_first(self.newest_first);
        if self.backwards {
            query.reversed().after(self.after.clone())
        } else {
            query.after(self.after.clone())
        }
    }
}

/// The filter of a page, a form or an API request: kind, id, reason and body text.
pub(in crate::console) fn filter_of(
    kind: &str,
    id: &str,
    reason: &str,
    body: &str,
) -> PoisonFilter {
    PoisonFilter::new()
        .kind(kind.trim())
        .id(id)
        .reason(reason)
        .body(body)
}

/// What a poison page shows.
pub(super) struct PoisonView {
    pub(super) queue: String,
    /// Messages in the poison queue.
    pub(super) total: u64,
    /// Those the filter passes (the reasons' counts added up).
    pub(super) matching: u64,
    /// Whether the reasons and kinds were counted over the oldest
    /// [`SCAN_BUDGET`](crate::queue::poison_table::SCAN_BUDGET) messages only (a text
    /// filter over a large poison table): `matching` is then a least count.
    pub(super) partial: bool,
    pub(super) place: Place,
    /// The reasons of the messages the filter passes, grouped with digits and ids masked.
    pub(super) groups: Vec<crate::queue::ReasonGroup>,
    /// The operation kinds present among the messages the rest of the filter passes.
    pub(super) kinds: Vec<(Option<String>, u64)>,
    pub(super) page: crate::queue::PoisonPage,
    pub(super) paused: bool,
    /// The queue typed in the "replay there" field before a refusal sent the operator
    /// back (empty: none).
    pub(super) typed_to: String,
    /// The messages ticked before a refusal sent the operator back.
    pub(super) selected: Vec<String>,
    /// The workers' last trims of the queue's poison messages to their retention cap,
    /// newest first (`None`: the broker keeps them, untrimmed).
    pub(super) trims: Option<Vec<crate::queue::poison_table::Trim>>,
}

/// Checks a queue named in a path, and that it is not itself a poison queue.
pub(super) fn checked_queue(queue: &str) -> Result<()> {
    crate::queue::check_queue_name(queue)
}
