//! Stored access policies of a table (`?comp=acl`): up to five named policies that a
//! shared access signature can be bound to (`si`), so that changing or removing a policy
//! changes or revokes every token bound to it. Also the reading of the service's XML
//! error bodies.

use chrono::{DateTime, Utc};
use quick_xml::Reader;
use quick_xml::escape::{escape, resolve_predefined_entity};
use quick_xml::events::Event;
use reqwest::Method;

use super::sas::parse_time;
use super::{AzureTableStore, Credential};
use crate::error::{Error, Result};

/// The most stored access policies a table holds.
pub const MAX_SIGNED_IDENTIFIERS: usize = 5;

/// One stored access policy of a table. The service version this client speaks requires
/// all three of start, expiry and permissions (Azurite refuses a policy without them); a
/// token bound to the policy then carries none of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedIdentifier {
    /// The policy's name, which a token names in `si` (1 to 64 characters).
    pub id: String,
    /// When tokens bound to the policy become valid.
    pub start: DateTime<Utc>,
    /// When they stop being valid.
    pub expiry: DateTime<Utc>,
    /// The permissions granted (`raud`, any order).
    pub permissions: String,
}

impl SignedIdentifier {
    /// A policy granting `permissions` from `start` until `expiry`.
    pub fn new(
        id: impl Into<String>,
        permissions: &str,
        start: DateTime<Utc>,
        expiry: DateTime<Utc>,
    ) -> Self {
        SignedIdentifier {
            id: id.into(),
            start,
            expiry,
            permissions: permissions.to_owned(),
        }
    }
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidSas {
        reason: reason.into(),
    }
}

/// The time format of policies: the service's, with seven fractional digits.
fn policy_time(at: DateTime<Utc>) -> String {
    use chrono::Timelike;
    format!(
        "{}.{:07}Z",
        at.format("%Y-%m-%dT%H:%M:%S"),
        at.nanosecond() % 1_000_000_000 / 100
    )
}

/// The `<SignedIdentifiers>` document for `identifiers`, checked as the service checks it.
pub(crate) fn acl_xml(identifiers: &[SignedIdentifier]) -> Result<String> {
    if identifiers.len() > MAX_SIGNED_IDENTIFIERS {
        return Err(invalid(format!(
            "a table holds at most {MAX_SIGNED_IDENTIFIERS} stored access policies, not {}",
            identifiers.len()
        )));
    }
    let mut xml = String::from(r#"<?xml version="1.0" encoding="utf-8"?><SignedIdentifiers>"#);
    for (i, identifier) in identifiers.iter().enumerate() {
        let length = identifier.id.chars().count();
        if !(1..=64).contains(&length) {
            return Err(invalid(format!(
                "policy identifier `{}` has {length} characters, not 1 to 64",
                identifier.id
            )));
        }
        if identifiers[..i]
            .iter()
            .any(|other| other.id == identifier.id)
        {
            return Err(invalid(format!(
                "policy identifier `{}` appears twice",
                identifier.id
            )));
        }
        if let Some(bad) = identifier
            .permissions
            .chars()
            .find(|c| !"raud".contains(*c))
        {
            return Err(invalid(format!(
                "policy `{}`: permission `{bad}` is not one of `raud`",
                identifier.id
            )));
        }
        if identifier.start >= identifier.expiry {
            return Err(invalid(format!(
                "policy `{}`: the start is not before the expiry",
                identifier.id
            )));
        }
        let permissions: String = "raud"
            .chars()
            .filter(|c| identifier.permissions.contains(*c))
            .collect();
        xml.push_str("<SignedIdentifier><Id>");
        xml.push_str(&escape(identifier.id.as_str()));
        xml.push_str("</Id><AccessPolicy>");
        xml.push_str(&format!(
            "<Start>{}</Start><Expiry>{}</Expiry><Permission>{permissions}</Permission>\
             </AccessPolicy></SignedIdentifier>",
            policy_time(identifier.start),
            policy_time(identifier.expiry)
        ));
    }
    xml.push_str("</SignedIdentifiers>");
    Ok(xml)
}

/// What [`walk`] reports.
enum Node<'a> {
    /// An element opened (its local name).
    Open(&'a str),
    /// An element closed: its local name and text, entities resolved (empty for an
    /// element with children).
    Close(&'a str, &'a str),
}

/// Walks an XML document, reporting each element opened and closed.
fn walk(xml: &str, mut on: impl FnMut(Node<'_>)) -> std::result::Result<(), String> {
    let mut reader = Reader::from_str(xml);
    let mut text = String::new();
    let mut names: Vec<String> = Vec::new();
    loop {
        let event = reader.read_event().map_err(|e| e.to_string())?;
        match event {
            Event::Start(start) => {
                let name = String::from_utf8_lossy(start.local_name().as_ref()).into_owned();
                on(Node::Open(&name));
                names.push(name);
                text.clear();
            }
            Event::Empty(empty) => {
                let name = String::from_utf8_lossy(empty.local_name().as_ref()).into_owned();
                on(Node::Open(&name));
                on(Node::Close(&name, ""));
                text.clear();
            }
            Event::Text(t) => text.push_str(&t.xml_content().map_err(|e| e.to_string())?),
            Event::CData(t) => text.push_str(&t.xml_content().map_err(|e| e.to_string())?),
            Event::GeneralRef(r) => {
                let name = r.decode().map_err(|e| e.to_string())?;
                match r.resolve_char_ref().map_err(|e| e.to_string())? {
                    Some(c) => text.push(c),
                    None => text.push_str(
                        resolve_predefined_entity(&name)
                            .ok_or_else(|| format!("unknown entity `&{name};`"))?,
                    ),
                }
            }
            Event::End(_) => {
                if let Some(name) = names.pop() {
                    on(Node::Close(&name, text.trim()));
                }
                text.clear();
            }
            Event::Eof => return Ok(()),
            _ => {}
        }
    }
}

/// The policies of a `<SignedIdentifiers>` document.
pub(crate) fn parse_acl(xml: &str) -> Result<Vec<SignedIdentifier>> {
    /// A policy as read: id, start, expiry, permissions.
    type Read = (String, Option<String>, Option<String>, String);
    let mut read: Vec<Read> = Vec::new();
    walk(xml, |node| match node {
        Node::Open("SignedIdentifier") => read.push(Default::default()),
        Node::Close(name, text) => {
            if let Some(current) = read.last_mut() {
                match name {
                    "Id" => current.0 = text.to_owned(),
                    "Start" => current.1 = Some(text.to_owned()),
                    "Expiry" => current.2 = Some(text.to_owned()),
                    "Permission" => current.3 = text.to_owned(),
                    _ => {}
                }
            }
        }
        Node::Open(_) => {}
    })
    .map_err(unreadable)?;
    read.into_iter()
        .map(|(id, start, expiry, permissions)| {
            let time = |what: &str, text: Option<String>| {
                let text = text.unwrap_or_default();
                parse_time(&text)
                    .ok_or_else(|| unreadable(format!("policy `{id}`: {what} `{text}`")))
            };
            Ok(SignedIdentifier {
                start: time("start", start)?,
                expiry: time("expiry", expiry)?,
                id,
                permissions,
            })
        })
        .collect()
}

fn unreadable(reason: String) -> Error {
    Error::Backend {
        message: format!("unreadable access policies: {reason}"),
    }
}

/// The `Code` and `Message` of an XML error body (`<Error><Code>…`), if it is one.
pub(crate) fn xml_error(text: &str) -> Option<(String, String)> {
    let (mut code, mut message) = (None, String::new());
    walk(text, |node| match node {
        Node::Close("Code", value) => code = Some(value.to_owned()),
        Node::Close("Message", value) => message = value.to_owned(),
        _ => {}
    })
    .ok()?;
    code.map(|code| (code, message))
}

impl AzureTableStore {
    /// Replaces the stored access policies of `table` (an empty list removes them all,
    /// revoking every token bound to one). The service may take up to 30 seconds to apply
    /// a change; Azurite applies it at once.
    ///
    /// # Errors
    /// [`Error::InvalidSas`] for more than five policies, an identifier that is empty,
    /// over 64 characters or repeated, or a permission other than `raud`;
    /// [`Error::PermissionDenied`] for a store opened with a shared access signature
    /// (policies are set with the account key); `TableNotFound`.
    pub async fn set_table_acl(&self, table: &str, identifiers: &[SignedIdentifier]) -> Result<()> {
        self.check_account_key(table)?;
        let body = acl_xml(identifiers)?;
        self.on_table(table, |name| {
            let body = body.clone();
            async move {
                let response = self
                    .send(
                        Method::PUT,
                        &self.table_url(&name),
                        &[("comp", "acl".to_owned())],
                        &[],
                        Some(("application/xml".to_owned(), body)),
                    )
                    .await?;
                if response.status().is_success() {
                    Ok(())
                } else {
                    Err(Self::error(response, table, None).await)
                }
            }
        })
        .await
    }

    /// The stored access policies of `table`.
    ///
    /// # Errors
    /// [`Error::PermissionDenied`] for a store opened with a shared access signature;
    /// `TableNotFound`; [`Error::Backend`] for a document that does not read.
    pub async fn get_table_acl(&self, table: &str) -> Result<Vec<SignedIdentifier>> {
        self.check_account_key(table)?;
        self.on_table(table, |name| async move {
            let response = self
                .send(
                    Method::GET,
                    &self.table_url(&name),
                    &[("comp", "acl".to_owned())],
                    &[],
                    None,
                )
                .await?;
            if !response.status().is_success() {
                return Err(Self::error(response, table, None).await);
            }
            let text = response
                .text()
                .await
                .map_err(|e| super::table::transient(e.to_string()))?;
            parse_acl(&text)
        })
        .await
    }

    fn check_account_key(&self, table: &str) -> Result<()> {
        match self.config.credential {
            Credential::SharedKey(_) => Ok(()),
            Credential::Sas(_) => Err(Error::permission_denied(
                table,
                "stored access policies are read and set with the account key, not a shared \
                 access signature",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    #[test]
    fn policies_round_trip_through_the_services_document() {
        let at = |h| {
            Utc.with_ymd_and_hms(2026, 11, 22, h, 0, 0)
                .single()
                .expect("a time")
        };
        let policies = vec![
            SignedIdentifier::new("readers & <writers>", "ar", at(9), at(10)),
            SignedIdentifier::new("none", "", at(9), at(11)),
        ];
        let xml = acl_xml(&policies).expect("valid");
        assert!(xml.contains(
            "<SignedIdentifier><Id>readers &amp; &lt;writers&gt;</Id><AccessPolicy>\
             <Start>2026-11-22T09:00:00.0000000Z</Start><Expiry>2026-11-22T10:00:00.0000000Z</Expiry>\
             <Permission>ra</Permission></AccessPolicy></SignedIdentifier>"
        ));
        let mut expected = policies.clone();
        expected[0].permissions = "ra".into();
        assert_eq!(parse_acl(&xml).expect("readable"), expected);
    }

    #[test]
    fn the_services_own_document_reads() {
        let xml = r#"<?xml version="1.0" encoding="utf-8"?>
            <SignedIdentifiers>
              <SignedIdentifier>
                <Id>MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI=</Id>
                <AccessPolicy>
                  <Start>2013-11-26T08:49:37.0000000Z</Start>
                  <Expiry>2013-11-27T08:49:37.0000000Z</Expiry>
                  <Permission>raud</Permission>
                </AccessPolicy>
              </SignedIdentifier>
            </SignedIdentifiers>"#;
        let read = parse_acl(xml).expect("readable");
        assert_eq!(read.len(), 1);
        assert_eq!(read[0].id, "MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI=");
        assert_eq!(read[0].permissions, "raud");
        assert_eq!(read[0].expiry.to_rfc3339(), "2013-11-27T08:49:37+00:00");
        assert!(
            parse_acl("<SignedIdentifiers />")
                .expect("empty")
                .is_empty()
        );
        let without_start = "<SignedIdentifiers><SignedIdentifier><Id>a</Id><AccessPolicy>\
                             <Expiry>2013-11-27T08:49:37Z</Expiry><Permission>r</Permission>\
                             </AccessPolicy></SignedIdentifier></SignedIdentifiers>";
        assert!(matches!(
            parse_acl(without_start),
            Err(Error::Backend { .. })
        ));
    }

    #[test]
    fn documents_the_service_would_refuse_are_refused_here() {
        let now = Utc::now();
        let p = |id: &str, permissions: &str| {
            SignedIdentifier::new(id, permissions, now, now + chrono::Duration::hours(1))
        };
        let six: Vec<_> = (0..6).map(|i| p(&i.to_string(), "r")).collect();
        assert!(matches!(acl_xml(&six), Err(Error::InvalidSas { .. })));
        assert!(matches!(
            acl_xml(&[p("", "r")]),
            Err(Error::InvalidSas { .. })
        ));
        assert!(matches!(
            acl_xml(&[p(&"x".repeat(65), "r")]),
            Err(Error::InvalidSas { .. })
        ));
        assert!(matches!(
            acl_xml(&[p("a", "r"), p("a", "d")]),
            Err(Error::InvalidSas { .. })
        ));
        assert!(matches!(
            acl_xml(&[p("a", "rl")]),
            Err(Error::InvalidSas { .. })
        ));
        let backwards = SignedIdentifier::new("a", "r", now, now);
        assert!(matches!(
            acl_xml(&[backwards]),
            Err(Error::InvalidSas { .. })
        ));
    }

    #[test]
    fn xml_error_bodies_give_their_code() {
        let body = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
            <Error>
              <Code>AuthorizationPermissionMismatch</Code>
              <Message>This request is not authorized to perform this operation using this permission.</Message>
            </Error>"#;
        let (code, message) = xml_error(body).expect("an error body");
        assert_eq!(code, "AuthorizationPermissionMismatch");
        assert!(message.starts_with("This request is not authorized"));
        assert_eq!(xml_error("{\"odata.error\":{}}"), None);
    }
}
