//! The one signer of Azure Storage requests made with the account key: each service's
//! SharedKey or SharedKeyLite string to sign, computed over the request as it is sent,
//! and the HMAC-SHA256 every storage signature (shared key, shared key lite, SAS) ends in.
//!
//! | service | scheme | string to sign (lines joined by `\n`) |
//! | --- | --- | --- |
//! | table | SharedKeyLite | `x-ms-date`, `/ACCOUNT/path[?comp=…]` |
//! | queue | SharedKeyLite | verb, Content-MD5, Content-Type, Date (empty), the `x-ms-` headers, `/ACCOUNT/path[?comp=…]` |
//! | blob | SharedKey | verb, the eleven standard headers, the `x-ms-` headers, `/ACCOUNT/path` and each query parameter |
//!
//! Written here, not taken from a crate: no maintained Rust crate signs Table and Queue
//! REST requests with an account key (the official `azure_storage_*` crates authenticate
//! with Entra ID tokens, which they refuse over the plain HTTP the emulator is reached by).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use reqwest::header::HeaderMap;
use sha2::Sha256;

use super::account::Service;

/// The base64 HMAC-SHA256 of a string to sign.
pub fn sign(key: &[u8], to_sign: &str) -> String {
    #[allow(clippy::expect_used)]
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(to_sign.as_bytes());
    STANDARD.encode(mac.finalize().into_bytes())
}

/// Now, as the `x-ms-date` header carries it (RFC 1123).
pub fn http_date() -> String {
    chrono::Utc::now()
        .format("%a, %d %b %Y %H:%M:%S GMT")
        .to_string()
}

/// The `Authorization` header of a request to `service` of `account`, signed with `key`.
/// The request carries its `x-ms-date` and `x-ms-version` already.
pub(crate) fn authorization(
    service: Service,
    account: &str,
    key: &[u8],
    request: &reqwest::Request,
) -> String {
    let scheme = match service {
        Service::Table | Service::Queue => "SharedKeyLite",
        Service::Blob => "SharedKey",
    };
    let to_sign = string_to_sign(service, account, request);
    format!("{scheme} {account}:{}", sign(key, &to_sign))
}

/// The string `service` signs for a request (see the [module](self) docs).
pub(crate) fn string_to_sign(
    service: Service,
    account: &str,
    request: &reqwest::Request,
) -> String {
    let url = request.url();
    let headers = request.headers();
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    };
    let lite_resource = || {
        let mut resource = format!("/{account}{}", url.path());
        if let Some((_, comp)) = url.query_pairs().find(|(k, _)| k == "comp") {
            resource.push_str("?comp=");
            resource.push_str(&comp);
        }
        resource
    };
    match service {
        Service::Table => format!("{}\n{}", header("x-ms-date"), lite_resource()),
        Service::Queue => format!(
            "{}\n{}\n{}\n\n{}{}",
            request.method(),
            header("content-md5"),
            header("content-type"),
            ms_headers(headers),
            lite_resource()
        ),
        Service::Blob => {
            let length = request
                .body()
                .and_then(reqwest::Body::as_bytes)
                .map_or(0, <[u8]>::len);
            let mut lines = vec![request.method().to_string()];
            for name in ["content-encoding", "content-language"] {
                lines.push(header(name).to_owned());
            }
            lines.push(if length == 0 {
                String::new()
            } else {
                length.to_string()
            });
            for name in [
                "content-md5",
                "content-type",
                "date",
                "if-modified-since",
                "if-match",
                "if-none-match",
                "if-unmodified-since",
                "range",
            ] {
                lines.push(header(name).to_owned());
            }
            let mut params: Vec<(String, String)> = url
                .query_pairs()
                .map(|(k, v)| (k.to_ascii_lowercase(), v.into_owned()))
                .collect();
            params.sort();
            let mut resource = format!("/{account}{}", url.path());
            for (name, value) in params {
                resource.push_str(&format!("\n{name}:{value}"));
            }
            format!("{}\n{}{resource}", lines.join("\n"), ms_headers(headers))
        }
    }
}

/// The `x-ms-` headers, lower-cased and sorted, each `name:value\n`.
fn ms_headers(headers: &HeaderMap) -> String {
    let mut ms: Vec<(&str, &str)> = headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("x-ms-"))
        .map(|(name, value)| (name.as_str(), value.to_str().unwrap_or_default()))
        .collect();
    ms.sort_unstable();
    ms.into_iter()
        .map(|(name, value)| format!("{name}:{}\n", value.trim()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::azure::account::{DEVELOPMENT_ACCOUNT, DEVELOPMENT_KEY};

    fn request(method: reqwest::Method, url: &str, content_type: Option<&str>) -> reqwest::Request {
        let mut builder = reqwest::Client::new()
            .request(method, url)
            .header("x-ms-version", "2021-08-06")
            .header("x-ms-date", "Sun, 22 Nov 2026 02:53:09 GMT");
        if let Some(content_type) = content_type {
            builder = builder.header("Content-Type", content_type).body("<x/>");
        }
        builder.build().expect("a request")
    }

    #[test]
    fn table_requests_sign_the_date_and_the_resource() {
        // The emulator's account appears twice: once as the account, once in the path.
        let request = request(
            reqwest::Method::GET,
            "http://127.0.0.1:10002/devstoreaccount1/Tables?comp=acl&$top=1",
            None,
        );
        assert_eq!(
            string_to_sign(Service::Table, DEVELOPMENT_ACCOUNT, &request),
            "Sun, 22 Nov 2026 02:53:09 GMT\n/devstoreaccount1/devstoreaccount1/Tables?comp=acl"
        );
        let key = STANDARD.decode(DEVELOPMENT_KEY).expect("base64");
        let mut mac = Hmac::<Sha256>::new_from_slice(&key).expect("any key length");
        mac.update(
            b"Sun, 22 Nov 2026 02:53:09 GMT\n/devstoreaccount1/devstoreaccount1/Tables?comp=acl",
        );
        let expected = STANDARD.encode(mac.finalize().into_bytes());
        assert_eq!(
            authorization(Service::Table, DEVELOPMENT_ACCOUNT, &key, &request),
            format!("SharedKeyLite devstoreaccount1:{expected}")
        );
    }

    #[test]
    fn queue_requests_sign_the_verb_the_content_type_and_the_ms_headers() {
        let request = request(
            reqwest::Method::POST,
            "http://127.0.0.1:10001/devstoreaccount1/orders/messages?messagettl=-1",
            Some("application/xml"),
        );
        assert_eq!(
            string_to_sign(Service::Queue, DEVELOPMENT_ACCOUNT, &request),
            "POST\n\napplication/xml\n\nx-ms-date:Sun, 22 Nov 2026 02:53:09 GMT\n\
             x-ms-version:2021-08-06\n/devstoreaccount1/devstoreaccount1/orders/messages"
        );
    }

    #[test]
    fn blob_requests_sign_every_standard_header_and_query_parameter() {
        let request = request(
            reqwest::Method::PUT,
            "http://127.0.0.1:10000/devstoreaccount1/claims?restype=container",
            None,
        );
        assert_eq!(
            string_to_sign(Service::Blob, DEVELOPMENT_ACCOUNT, &request),
            "PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:Sun, 22 Nov 2026 02:53:09 GMT\n\
             x-ms-version:2021-08-06\n/devstoreaccount1/devstoreaccount1/claims\nrestype:container"
        );
    }
}
