//! What a queue's shared access signature allows, as far as the token itself says (read
//! by the core's one [`SasToken`] reader, with its one clock skew): checked before each
//! request so a call outside it fails with a typed error and sends nothing. A token bound
//! to a stored access policy (`si`) without its own permissions or expiry leaves those to
//! the service (a 403 maps to the same error).

use chrono::Utc;
use tablekit_core::azure::sas::SasToken;

use crate::error::{Error, Result};

/// The token a queue was opened with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct QueueAccess {
    token: SasToken,
}

impl QueueAccess {
    /// Reads a token.
    ///
    /// # Errors
    /// The core's `InvalidSas` when a time or the encoding does not read.
    pub(super) fn parse(token: &str) -> tablekit_core::Result<Self> {
        SasToken::parse(token).map(|token| QueueAccess { token })
    }

    /// Whether it is an account SAS (which may create queues), not one queue's.
    pub(super) fn is_account_sas(&self) -> bool {
        self.token.is_account_sas()
    }

    /// Checks one call: `letters` are the permissions any of which allows it (service SAS
    /// letters `raup`; account SAS letters `rwdlacup`).
    pub(super) fn check(&self, queue: &str, letters: &str, what: &str) -> Result<()> {
        let denied = |reason: String| {
            Err(Error::QueuePermissionDenied {
                queue: queue.to_owned(),
                reason,
            })
        };
        if let Err(reason) = self.token.check_time(Utc::now()) {
            return denied(reason);
        }
        if let Some(services) = &self.token.services
            && !services.contains('q')
        {
            return denied(format!(
                "the account access signature covers services `{services}`, not queues"
            ));
        }
        if let Some(permissions) = &self.token.permissions
            && !permissions.contains(|c| letters.contains(c))
        {
            return denied(format!(
                "{what} needs permission `{}`; the access signature allows `{permissions}`",
                letters
                    .chars()
                    .map(String::from)
                    .collect::<Vec<_>>()
                    .join("` or `")
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_whose_expiry_does_not_read_is_refused_not_ignored() {
        assert!(matches!(
            QueueAccess::parse("sv=2021-08-06&sp=a&se=next-week&sig=x"),
            Err(tablekit_core::Error::InvalidSas { .. })
        ));
    }

    #[test]
    fn calls_outside_the_token_are_refused_with_the_reason() {
        let access = QueueAccess::parse("sp=a&se=2999-01-01").expect("reads");
        assert!(access.check("q", "a", "sending a message").is_ok());
        let refused = access
            .check("q", "p", "receiving messages")
            .expect_err("no p");
        assert!(
            refused.to_string().contains("needs permission `p`"),
            "{refused}"
        );
        let expired = QueueAccess::parse("sp=a&se=2020-01-01").expect("reads");
        let refused = expired.check("q", "a", "sending").expect_err("expired");
        assert!(refused.to_string().contains("expired at"), "{refused}");
        let tables_only = QueueAccess::parse("ss=t&srt=sco&sp=a&se=2999-01-01").expect("reads");
        assert!(tables_only.is_account_sas());
        assert!(tables_only.check("q", "a", "sending").is_err());
    }
}
