//! The Table service's error answers mapped onto the core's error kinds.

use serde_json::Value as Json;

use super::acl;
use super::table::{AzureTableStore, transient};
use crate::error::Error;

impl AzureTableStore {
    /// Maps an unsuccessful response onto the core's errors.
    pub(super) async fn error(
        response: reqwest::Response,
        table: &str,
        key: Option<(&str, &str)>,
    ) -> Error {
        let status = response.status();
        let header_code = response
            .headers()
            .get("x-ms-error-code")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = response.text().await.unwrap_or_default();
        match header_code {
            // A body without a code of its own (a HEAD, a proxy's page): the header's.
            Some(code) if error_parts(&text).0.is_empty() => {
                let body = serde_json::json!({
                    "odata.error": { "code": code, "message": { "value": text } }
                });
                service_error(status.as_u16(), &body.to_string(), table, key)
            }
            _ => service_error(status.as_u16(), &text, table, key),
        }
    }
}

/// The service's error code and message from an error body (JSON, or XML for the
/// service's authorization failures).
pub(super) fn error_parts(text: &str) -> (String, String) {
    if let Some(parts) = acl::xml_error(text) {
        return parts;
    }
    let json: Json = serde_json::from_str(text).unwrap_or(Json::Null);
    let error = &json["odata.error"];
    let code = error["code"].as_str().unwrap_or_default().to_owned();
    let message = error["message"]["value"]
        .as_str()
        .unwrap_or(text)
        .to_owned();
    (code, message)
}

pub(super) fn service_error(
    status: u16,
    text: &str,
    table: &str,
    key: Option<(&str, &str)>,
) -> Error {
    let (code, message) = error_parts(text);
    let (pk, rk) = key.unwrap_or(("", ""));
    match code.as_str() {
        "TableNotFound" => Error::table_not_found(table),
        "TableAlreadyExists" => Error::TableAlreadyExists {
            table: table.to_owned(),
        },
        "TableBeingDeleted" => Error::TableBeingDeleted {
            table: table.to_owned(),
        },
        "EntityAlreadyExists" => Error::already_exists(table, pk, rk),
        "ResourceNotFound" => Error::not_found(table, pk, rk),
        "UpdateConditionNotSatisfied" | "ConditionNotMet" => {
            Error::precondition_failed(table, pk, rk)
        }
        "ServerBusy" | "OperationTimedOut" | "InternalError" => {
            transient(format!("{code}: {message}"))
        }
        _ if status == 403 => Error::PermissionDenied {
            table: table.to_owned(),
            reason: if code.is_empty() {
                format!("HTTP 403: {message}")
            } else {
                format!("the service refused the request ({code}): {message}")
            },
            service_code: (!code.is_empty()).then_some(code),
        },
        _ => match status {
            404 if key.is_some() => Error::not_found(table, pk, rk),
            404 => Error::table_not_found(table),
            409 => Error::already_exists(table, pk, rk),
            412 => Error::precondition_failed(table, pk, rk),
            408 | 500..=599 => transient(format!("HTTP {status} {code}: {message}")),
            _ => Error::Backend {
                message: format!("HTTP {status} {code}: {message}"),
            },
        },
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn odata(code: &str) -> String {
        serde_json::json!({ "odata.error": { "code": code, "message": { "value": "said" } } })
            .to_string()
    }

    #[test]
    fn a_table_being_deleted_is_its_own_retryable_kind() {
        let error = service_error(409, &odata("TableBeingDeleted"), "Logs20261122", None);
        assert!(
            matches!(&error, Error::TableBeingDeleted { table } if table == "Logs20261122"),
            "{error:?}"
        );
        assert_eq!(error.kind(), ErrorKind::TableBeingDeleted);
        assert!(error.is_retryable());
        let exists = service_error(409, &odata("TableAlreadyExists"), "Logs20261122", None);
        assert_eq!(exists.kind(), ErrorKind::TableAlreadyExists);
        assert!(!exists.is_retryable());
    }

    #[test]
    fn every_403_is_permission_denied_with_the_services_code() {
        let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error>\
                   <Code>AuthorizationPermissionMismatch</Code>\
                   <Message>This request is not authorized.</Message></Error>";
        for (body, code) in [
            (xml.to_owned(), Some("AuthorizationPermissionMismatch")),
            (odata("AuthorizationFailure"), Some("AuthorizationFailure")),
            (odata("AuthenticationFailed"), Some("AuthenticationFailed")),
            (String::new(), None),
        ] {
            let error = service_error(403, &body, "Orders", Some(("p", "r")));
            assert_eq!(error.kind(), ErrorKind::PermissionDenied, "{error:?}");
            assert!(!error.is_retryable());
            match error {
                Error::PermissionDenied {
                    table,
                    service_code,
                    reason,
                } => {
                    assert_eq!(table, "Orders");
                    assert_eq!(service_code.as_deref(), code);
                    if let Some(code) = code {
                        assert!(reason.contains(code), "{reason}");
                    }
                }
                other => panic!("{other:?}"),
            }
        }
    }
}
