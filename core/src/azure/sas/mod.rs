//! Service shared access signatures (SAS): tokens scoped to one table (with a key range),
//! one queue, or one blob container or blob, signed with the account key.
//!
//! A token is the query string to append to a resource URL, or to put after
//! `SharedAccessSignature=` in a connection string. Every builder signs service version
//! [`SAS_VERSION`]; the string to sign is the one the service defines for that version:
//!
//! | service | string to sign (lines joined by `\n`) |
//! | --- | --- |
//! | table | `sp`, `st`, `se`, `/table/ACCOUNT/table-lower-case`, `si`, `sip`, `spr`, `sv`, `spk`, `srk`, `epk`, `erk` |
//! | queue | `sp`, `st`, `se`, `/queue/ACCOUNT/queue`, `si`, `sip`, `spr`, `sv` |
//! | blob | `sp`, `st`, `se`, `/blob/ACCOUNT/container[/blob]`, `si`, `sip`, `spr`, `sv`, `sr`, snapshot time, `rscc`, `rscd`, `rsce`, `rscl`, `rsct` |
//!
//! Absent fields are empty lines; values are signed as they are, not percent-encoded.
//!
//! [`SasToken`] reads a token back, for every service: what it allows is checked before
//! any request, with the one [`SAS_CLOCK_SKEW`].

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use chrono::{DateTime, Utc};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::error::{Error, Result};
use crate::store::KeyOrder;

mod token;

pub use token::{KeyBound, SAS_CLOCK_SKEW, SasToken, parse_time};

/// The service version every builder here signs (accepted by Azure and by Azurite).
pub const SAS_VERSION: &str = "2019-02-02";

/// Characters escaped in token values: everything but unreserved characters.
const VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The time format of `st` and `se`.
pub(crate) fn sas_time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidSas {
        reason: reason.into(),
    }
}

/// The protocols a token may be used over (`spr`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SasProtocol {
    /// HTTPS only (`https`).
    Https,
    /// HTTPS or HTTP (`https,http`), the service's default.
    #[default]
    HttpsAndHttp,
}

impl SasProtocol {
    fn as_str(self) -> &'static str {
        match self {
            SasProtocol::Https => "https",
            SasProtocol::HttpsAndHttp => "https,http",
        }
    }
}

/// What every service SAS carries.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Common {
    permissions: String,
    start: Option<DateTime<Utc>>,
    expiry: Option<DateTime<Utc>>,
    identifier: Option<String>,
    ip: Option<String>,
    protocol: Option<SasProtocol>,
}

impl Common {
    /// The permissions in the service's order (`allowed` lists it), or the first letter
    /// the service does not know for this resource.
    fn ordered_permissions(&self, allowed: &str) -> Result<String> {
        if let Some(bad) = self.permissions.chars().find(|c| !allowed.contains(*c)) {
            return Err(invalid(format!(
                "permission `{bad}` is not one of `{allowed}` for this resource"
            )));
        }
        Ok(allowed
            .chars()
            .filter(|c| self.permissions.contains(*c))
            .collect())
    }

    /// Checks what the service requires: permissions and an expiry, unless a stored
    /// access policy (`si`) supplies them; a start before the expiry.
    fn check(&self) -> Result<()> {
        if self.identifier.is_none() && (self.permissions.is_empty() || self.expiry.is_none()) {
            return Err(invalid(
                "a token without a stored access policy needs permissions and an expiry",
            ));
        }
        if let (Some(start), Some(expiry)) = (self.start, self.expiry)
            && start >= expiry
        {
            return Err(invalid(format!(
                "the start {} is not before the expiry {}",
                sas_time(start),
                sas_time(expiry)
            )));
        }
        if let Some(id) = &self.identifier
            && (id.is_empty() || id.chars().count() > 64)
        {
            return Err(invalid(
                "a stored access policy identifier has 1 to 64 characters",
            ));
        }
        Ok(())
    }

    /// The first string-to-sign lines up to the resource, then `si`, `sip`, `spr`, `sv`.
    fn lines(&self, permissions: &str, resource: String) -> Vec<String> {
        vec![
            permissions.to_owned(),
            self.start.map(sas_time).unwrap_or_default(),
            self.expiry.map(sas_time).unwrap_or_default(),
            resource,
            self.identifier.clone().unwrap_or_default(),
            self.ip.clone().unwrap_or_default(),
            self.protocol
                .map(|p| p.as_str().to_owned())
                .unwrap_or_default(),
            SAS_VERSION.to_owned(),
        ]
    }

    /// The query parameters, `sv` first, in the order the services document.
    fn params(&self, permissions: &str) -> Vec<(&'static str, String)> {
        let mut params = vec![("sv", SAS_VERSION.to_owned())];
        if !permissions.is_empty() {
            params.push(("sp", permissions.to_owned()));
        }
        if let Some(start) = self.start {
            params.push(("st", sas_time(start)));
        }
        if let Some(expiry) = self.expiry {
            params.push(("se", sas_time(expiry)));
        }
        if let Some(ip) = &self.ip {
            params.push(("sip", ip.clone()));
        }
        if let Some(protocol) = self.protocol {
            params.push(("spr", protocol.as_str().to_owned()));
        }
        if let Some(id) = &self.identifier {
            params.push(("si", id.clone()));
        }
        params
    }
}

fn decode_key(key_base64: &str) -> Result<Vec<u8>> {
    STANDARD
        .decode(key_base64)
        .map_err(|_| invalid("the account key is not base64"))
}

/// The token: the parameters percent-encoded, then `sig`.
fn token(params: Vec<(&'static str, String)>, key: &[u8], to_sign: &str) -> String {
    let signature = super::signer::sign(key, to_sign);
    params
        .into_iter()
        .chain([("sig", signature)])
        .map(|(name, value)| format!("{name}={}", utf8_percent_encode(&value, VALUE)))
        .collect::<Vec<_>>()
        .join("&")
}

macro_rules! common_setters {
    ($letters:literal) => {
        #[doc = concat!("The permissions granted, as the service's letters (`", $letters, "`), in any order.")]
        pub fn permissions(mut self, letters: &str) -> Self {
            self.common.permissions = letters.to_owned();
            self
        }

        /// When the token becomes valid (`st`); without it, at once.
        pub fn start(mut self, at: DateTime<Utc>) -> Self {
            self.common.start = Some(at);
            self
        }

        /// When the token stops being valid (`se`).
        pub fn expiry(mut self, at: DateTime<Utc>) -> Self {
            self.common.expiry = Some(at);
            self
        }

        /// Binds the token to a stored access policy of the resource (`si`): what the
        /// token leaves out (permissions, start, expiry) is the policy's, and removing
        /// the policy revokes the token.
        pub fn policy(mut self, identifier: impl Into<String>) -> Self {
            self.common.identifier = Some(identifier.into());
            self
        }

        /// The IP address or range (`168.1.5.60-168.1.5.70`) requests must come from
        /// (`sip`).
        pub fn ip(mut self, address_or_range: impl Into<String>) -> Self {
            self.common.ip = Some(address_or_range.into());
            self
        }

        /// The protocols the token may be used over (`spr`).
        pub fn protocol(mut self, protocol: SasProtocol) -> Self {
            self.common.protocol = Some(protocol);
            self
        }
    };
}

/// A service SAS for one table, optionally limited to a key range.
///
/// ```
/// use chrono::{Duration, Utc};
/// use tablekit_core::azure::{DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY, sas::TableSas};
///
/// // Read and write one tenant's partition for an hour.
/// let token = TableSas::new("Orders")
///     .permissions("raud")
///     .partitions("tenant42", "tenant42")
///     .expiry(Utc::now() + Duration::hours(1))
///     .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)?;
/// assert!(token.contains("tn=Orders") && token.contains("spk=tenant42"));
/// # Ok::<_, tablekit_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSas {
    table: String,
    common: Common,
    start_key: Option<(String, Option<String>)>,
    end_key: Option<(String, Option<String>)>,
}

impl TableSas {
    /// A token for `table`, its name on the service (with any table prefix).
    pub fn new(table: impl Into<String>) -> Self {
        TableSas {
            table: table.into(),
            common: Common::default(),
            start_key: None,
            end_key: None,
        }
    }

    common_setters!("raud");

    /// Limits the token to the partitions from `first` to `last`, both included (`spk`,
    /// `epk`): every row of each.
    pub fn partitions(mut self, first: impl Into<String>, last: impl Into<String>) -> Self {
        self.start_key = Some((first.into(), None));
        self.end_key = Some((last.into(), None));
        self
    }

    /// The first key the token reaches (`spk`, `srk`), included. Keys are compared as the
    /// service orders them: by PartitionKey, then RowKey.
    pub fn start_key(
        mut self,
        partition_key: impl Into<String>,
        row_key: impl Into<String>,
    ) -> Self {
        self.start_key = Some((partition_key.into(), Some(row_key.into())));
        self
    }

    /// The last key the token reaches (`epk`, `erk`), included.
    pub fn end_key(mut self, partition_key: impl Into<String>, row_key: impl Into<String>) -> Self {
        self.end_key = Some((partition_key.into(), Some(row_key.into())));
        self
    }

    /// The table the token is for.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// The string the service signs for this token (see the [module](self) docs).
    ///
    /// # Errors
    /// [`Error::InvalidSas`] for a permission other than `raud`, a token with neither a
    /// stored policy nor permissions and an expiry, or a start key after the end key.
    pub fn string_to_sign(&self, account: &str) -> Result<String> {
        Ok(self.parts(account)?.1.join("\n"))
    }

    #[allow(clippy::type_complexity)]
    fn parts(&self, account: &str) -> Result<(Vec<(&'static str, String)>, Vec<String>)> {
        self.common.check()?;
        crate::limits::check_table_name(&self.table)
            .map_err(|e| invalid(format!("table `{}`: {e}", self.table)))?;
        if let (Some((spk, srk)), Some((epk, erk))) = (&self.start_key, &self.end_key) {
            let order = KeyOrder::Utf16;
            let after = order.compare(spk, epk).then_with(|| match (srk, erk) {
                (Some(s), Some(e)) => order.compare(s, e),
                _ => std::cmp::Ordering::Equal,
            });
            if after.is_gt() {
                return Err(invalid("the start key is after the end key"));
            }
        }
        let permissions = self.common.ordered_permissions("raud")?;
        let mut lines = self.common.lines(
            &permissions,
            format!("/table/{account}/{}", self.table.to_ascii_lowercase()),
        );
        let (spk, srk) = split(&self.start_key);
        let (epk, erk) = split(&self.end_key);
        lines.extend([&spk, &srk, &epk, &erk].map(|v| v.clone().unwrap_or_default()));
        let mut params = self.common.params(&permissions);
        params.insert(1, ("tn", self.table.clone()));
        for (name, value) in [("spk", spk), ("srk", srk), ("epk", epk), ("erk", erk)] {
            if let Some(value) = value {
                params.push((name, value));
            }
        }
        Ok((params, lines))
    }

    /// The signed token (without `?`).
    ///
    /// # Errors
    /// As [`string_to_sign`](Self::string_to_sign); [`Error::InvalidSas`] when the key
    /// is not base64.
    pub fn sign(&self, account: &str, key_base64: &str) -> Result<String> {
        self.sign_with(account, &decode_key(key_base64)?)
    }

    pub(crate) fn sign_with(&self, account: &str, key: &[u8]) -> Result<String> {
        let (params, lines) = self.parts(account)?;
        Ok(token(params, key, &lines.join("\n")))
    }
}

fn split(bound: &Option<(String, Option<String>)>) -> (Option<String>, Option<String>) {
    match bound {
        Some((pk, rk)) => (Some(pk.clone()), rk.clone()),
        None => (None, None),
    }
}

/// A service SAS for one queue (`r` peek, `a` add, `u` update, `p` get and delete
/// messages).
///
/// ```
/// use chrono::{Duration, Utc};
/// use tablekit_core::azure::{DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY, sas::QueueSas};
///
/// let token = QueueSas::new("orders")
///     .permissions("ap")
///     .expiry(Utc::now() + Duration::hours(1))
///     .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)?;
/// assert!(token.contains("sp=ap"));
/// # Ok::<_, tablekit_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueSas {
    queue: String,
    common: Common,
}

impl QueueSas {
    /// A token for `queue`.
    pub fn new(queue: impl Into<String>) -> Self {
        QueueSas {
            queue: queue.into(),
            common: Common::default(),
        }
    }

    common_setters!("raup");

    /// The string the service signs for this token (see the [module](self) docs).
    ///
    /// # Errors
    /// [`Error::InvalidSas`] for a permission other than `raup`, or a token with neither
    /// a stored policy nor permissions and an expiry.
    pub fn string_to_sign(&self, account: &str) -> Result<String> {
        Ok(self.parts(account)?.1.join("\n"))
    }

    #[allow(clippy::type_complexity)]
    fn parts(&self, account: &str) -> Result<(Vec<(&'static str, String)>, Vec<String>)> {
        self.common.check()?;
        if self.queue.is_empty() {
            return Err(invalid("the queue name is empty"));
        }
        let permissions = self.common.ordered_permissions("raup")?;
        let lines = self
            .common
            .lines(&permissions, format!("/queue/{account}/{}", self.queue));
        Ok((self.common.params(&permissions), lines))
    }

    /// The signed token (without `?`).
    ///
    /// # Errors
    /// As [`string_to_sign`](Self::string_to_sign); [`Error::InvalidSas`] when the key
    /// is not base64.
    pub fn sign(&self, account: &str, key_base64: &str) -> Result<String> {
        let (params, lines) = self.parts(account)?;
        Ok(token(params, &decode_key(key_base64)?, &lines.join("\n")))
    }
}

/// A service SAS for a blob container (`sr=c`: `r` read, `a` add, `c` create, `w` write,
/// `d` delete, `l` list) or one blob (`sr=b`: the same less `l`).
///
/// ```
/// use chrono::{Duration, Utc};
/// use tablekit_core::azure::{DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY, sas::BlobSas};
///
/// let token = BlobSas::container("archive")
///     .permissions("rl")
///     .expiry(Utc::now() + Duration::hours(1))
///     .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)?;
/// assert!(token.contains("sr=c"));
/// # Ok::<_, tablekit_core::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobSas {
    container: String,
    blob: Option<String>,
    common: Common,
}

impl BlobSas {
    /// A token for a whole container.
    pub fn container(container: impl Into<String>) -> Self {
        BlobSas {
            container: container.into(),
            blob: None,
            common: Common::default(),
        }
    }

    /// A token for one blob of a container (its name as stored, not percent-encoded).
    pub fn blob(container: impl Into<String>, blob: impl Into<String>) -> Self {
        BlobSas {
            container: container.into(),
            blob: Some(blob.into()),
            common: Common::default(),
        }
    }

    common_setters!("racwdl");

    /// The string the service signs for this token (see the [module](self) docs).
    ///
    /// # Errors
    /// [`Error::InvalidSas`] for a permission the resource does not take (`l` on a blob),
    /// or a token with neither a stored policy nor permissions and an expiry.
    pub fn string_to_sign(&self, account: &str) -> Result<String> {
        Ok(self.parts(account)?.1.join("\n"))
    }

    #[allow(clippy::type_complexity)]
    fn parts(&self, account: &str) -> Result<(Vec<(&'static str, String)>, Vec<String>)> {
        self.common.check()?;
        if self.container.is_empty() {
            return Err(invalid("the container name is empty"));
        }
        let (allowed, resource, signed_resource) = match &self.blob {
            Some(blob) => (
                "racwd",
                format!("/blob/{account}/{}/{blob}", self.container),
                "b",
            ),
            None => ("racwdl", format!("/blob/{account}/{}", self.container), "c"),
        };
        let permissions = self.common.ordered_permissions(allowed)?;
        let mut lines = self.common.lines(&permissions, resource);
        // sr, the snapshot time, then the five response headers (none overridden).
        lines.push(signed_resource.to_owned());
        lines.extend(std::iter::repeat_n(String::new(), 6));
        let mut params = self.common.params(&permissions);
        params.insert(1, ("sr", signed_resource.to_owned()));
        Ok((params, lines))
    }

    /// The signed token (without `?`).
    ///
    /// # Errors
    /// As [`string_to_sign`](Self::string_to_sign); [`Error::InvalidSas`] when the key
    /// is not base64.
    pub fn sign(&self, account: &str, key_base64: &str) -> Result<String> {
        let (params, lines) = self.parts(account)?;
        Ok(token(params, &decode_key(key_base64)?, &lines.join("\n")))
    }
}

/// An account shared access signature for the Table service, signed with the account
/// key: the query string a `SharedAccessSignature=` connection string carries. `permissions`
/// are the service's letters (`r` read, `a` add, `u` update, `d` delete, `l` list, `w`,
/// `c`), valid from now until `expiry`, over HTTP and HTTPS.
///
/// # Errors
/// [`Error::InvalidSas`] when the key is not base64.
pub fn account_sas(
    account: &str,
    key_base64: &str,
    permissions: &str,
    expiry: DateTime<Utc>,
) -> Result<String> {
    let key = decode_key(key_base64)?;
    let expiry = sas_time(expiry);
    let to_sign =
        format!("{account}\n{permissions}\nt\nsco\n\n{expiry}\n\nhttps,http\n{SAS_VERSION}\n");
    let signature = super::signer::sign(&key, &to_sign);
    let encode = |s: &str| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
    Ok(format!(
        "sv={SAS_VERSION}&ss=t&srt=sco&sp={permissions}&se={}&spr=https,http&sig={}",
        encode(&expiry),
        encode(&signature)
    ))
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use hmac::{Hmac, Mac};
    use sha2::Sha256;

    use super::*;
    use crate::azure::{DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY};

    fn at(h: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 22, h, 30, 0)
            .single()
            .expect("a time")
    }

    /// The HMAC-SHA256 of `to_sign` with the emulator's key, percent-encoded as in a
    /// query string: computed here independently of the builders.
    fn expected_sig(to_sign: &str) -> String {
        let key = STANDARD.decode(DEVELOPMENT_KEY).expect("base64");
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("any key length");
        mac.update(to_sign.as_bytes());
        let sig = STANDARD.encode(mac.finalize().into_bytes());
        sig.replace('+', "%2B")
            .replace('/', "%2F")
            .replace('=', "%3D")
    }

    fn sig_of(token: &str) -> &str {
        token
            .split('&')
            .find_map(|p| p.strip_prefix("sig="))
            .expect("a sig")
    }

    #[test]
    fn a_table_token_signs_the_documented_string_with_its_key_range() {
        let sas = TableSas::new("Orders")
            .permissions("dura")
            .start(at(9))
            .expiry(at(10))
            .start_key("tenant 42", "a")
            .end_key("tenant 42", "m")
            .protocol(SasProtocol::Https)
            .ip("127.0.0.1");
        let documented = "raud\n2026-11-22T09:30:00Z\n2026-11-22T10:30:00Z\n\
                          /table/devstoreaccount1/orders\n\n127.0.0.1\nhttps\n2019-02-02\n\
                          tenant 42\na\ntenant 42\nm";
        assert_eq!(
            sas.string_to_sign(DEVELOPMENT_ACCOUNT).expect("valid"),
            documented
        );
        let token = sas
            .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)
            .expect("valid");
        assert_eq!(sig_of(&token), expected_sig(documented));
        assert_eq!(
            token.split("&sig=").next(),
            Some(
                "sv=2019-02-02&tn=Orders&sp=raud&st=2026-11-22T09%3A30%3A00Z\
                 &se=2026-11-22T10%3A30%3A00Z&sip=127.0.0.1&spr=https\
                 &spk=tenant%2042&srk=a&epk=tenant%2042&erk=m"
            )
        );
    }

    #[test]
    fn a_table_token_bound_to_a_policy_leaves_the_policys_fields_empty() {
        let sas = TableSas::new("Orders")
            .policy("readers")
            .partitions("p", "q");
        let documented = "\n\n\n/table/devstoreaccount1/orders\nreaders\n\n\n2019-02-02\np\n\nq\n";
        assert_eq!(
            sas.string_to_sign(DEVELOPMENT_ACCOUNT).expect("valid"),
            documented
        );
        let token = sas
            .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)
            .expect("valid");
        assert_eq!(sig_of(&token), expected_sig(documented));
        assert!(token.starts_with("sv=2019-02-02&tn=Orders&si=readers&spk=p&epk=q&sig="));
    }

    #[test]
    fn a_queue_token_signs_the_documented_string() {
        let sas = QueueSas::new("orders")
            .permissions("pa")
            .expiry(at(10))
            .policy("workers");
        let documented =
            "ap\n\n2026-11-22T10:30:00Z\n/queue/devstoreaccount1/orders\nworkers\n\n\n2019-02-02";
        assert_eq!(
            sas.string_to_sign(DEVELOPMENT_ACCOUNT).expect("valid"),
            documented
        );
        let token = sas
            .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)
            .expect("valid");
        assert_eq!(sig_of(&token), expected_sig(documented));
        assert!(
            token.starts_with("sv=2019-02-02&sp=ap&se=2026-11-22T10%3A30%3A00Z&si=workers&sig=")
        );
    }

    #[test]
    fn blob_tokens_sign_the_documented_string_for_containers_and_blobs() {
        let container = BlobSas::container("archive")
            .permissions("lr")
            .start(at(9))
            .expiry(at(10));
        let documented = "rl\n2026-11-22T09:30:00Z\n2026-11-22T10:30:00Z\n\
                          /blob/devstoreaccount1/archive\n\n\n\n2019-02-02\nc\n\n\n\n\n\n";
        assert_eq!(
            container
                .string_to_sign(DEVELOPMENT_ACCOUNT)
                .expect("valid"),
            documented
        );
        let token = container
            .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)
            .expect("valid");
        assert_eq!(sig_of(&token), expected_sig(documented));
        assert!(token.starts_with("sv=2019-02-02&sr=c&sp=rl&"));

        let blob = BlobSas::blob("archive", "cold/Logs 1.jsonl")
            .permissions("r")
            .expiry(at(10));
        let documented = "r\n\n2026-11-22T10:30:00Z\n\
                          /blob/devstoreaccount1/archive/cold/Logs 1.jsonl\n\n\n\n2019-02-02\nb\n\n\n\n\n\n";
        assert_eq!(
            blob.string_to_sign(DEVELOPMENT_ACCOUNT).expect("valid"),
            documented
        );
        let token = blob
            .sign(DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY)
            .expect("valid");
        assert_eq!(sig_of(&token), expected_sig(documented));
    }

    #[test]
    fn builders_refuse_what_the_service_would() {
        let refused = |r: Result<String>| match r {
            Err(Error::InvalidSas { reason }) => reason,
            other => panic!("expected InvalidSas, got {other:?}"),
        };
        let reason = refused(
            TableSas::new("Orders")
                .permissions("rl")
                .expiry(at(10))
                .string_to_sign("a"),
        );
        assert!(reason.contains("`l`"), "{reason}");
        assert!(
            refused(
                BlobSas::blob("c", "b")
                    .permissions("l")
                    .expiry(at(10))
                    .string_to_sign("a")
            )
            .contains("`l`")
        );
        let reason = refused(TableSas::new("Orders").permissions("r").string_to_sign("a"));
        assert!(reason.contains("expiry"), "{reason}");
        let reason = refused(
            TableSas::new("Orders")
                .permissions("r")
                .expiry(at(10))
                .start_key("b", "")
                .end_key("a", "")
                .string_to_sign("a"),
        );
        assert!(reason.contains("after the end key"), "{reason}");
        let reason = refused(
            QueueSas::new("q")
                .permissions("r")
                .start(at(10))
                .expiry(at(9))
                .string_to_sign("a"),
        );
        assert!(reason.contains("not before the expiry"), "{reason}");
        let reason = refused(
            TableSas::new("Orders")
                .permissions("r")
                .expiry(at(10))
                .sign("a", "not base64!"),
        );
        assert!(reason.contains("base64"), "{reason}");
    }
}
