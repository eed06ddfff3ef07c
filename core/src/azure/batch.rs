//! Entity group transactions as the Table service's `$batch`: a `multipart/mixed` request
//! holding one changeset of HTTP sub-requests (with absolute URLs), and its response.

use crate::model::{ETag, IfMatch};
use crate::store::WriteOp;

use super::json::entity_to_json;

/// A sub-request's method, path and body.
pub(crate) struct SubRequest {
    pub(crate) method: &'static str,
    pub(crate) url: String,
    pub(crate) if_match: Option<String>,
    pub(crate) body: Option<String>,
}

pub(crate) fn if_match_header(if_match: &IfMatch) -> String {
    match if_match {
        IfMatch::Any => "*".to_owned(),
        IfMatch::ETag(etag) => etag.as_str().to_owned(),
    }
}

/// The sub-request of one write, against `table_url` (`…/Table`) and `entity_url`
/// (`…/Table(PartitionKey='…',RowKey='…')`).
pub(crate) fn sub_request(op: &WriteOp, table_url: &str, entity_url: &str) -> SubRequest {
    let body = |e| Some(entity_to_json(e).to_string());
    match op {
        WriteOp::Insert(e) => SubRequest {
            method: "POST",
            url: table_url.to_owned(),
            if_match: None,
            body: body(e),
        },
        WriteOp::Replace(e, m) => SubRequest {
            method: "PUT",
            url: entity_url.to_owned(),
            if_match: Some(if_match_header(m)),
            body: body(e),
        },
        WriteOp::Merge(e, m) => SubRequest {
            method: "MERGE",
            url: entity_url.to_owned(),
            if_match: Some(if_match_header(m)),
            body: body(e),
        },
        WriteOp::InsertOrReplace(e) => SubRequest {
            method: "PUT",
            url: entity_url.to_owned(),
            if_match: None,
            body: body(e),
        },
        WriteOp::InsertOrMerge(e) => SubRequest {
            method: "MERGE",
            url: entity_url.to_owned(),
            if_match: None,
            body: body(e),
        },
        WriteOp::Delete { if_match, .. } => SubRequest {
            method: "DELETE",
            url: entity_url.to_owned(),
            if_match: Some(if_match_header(if_match)),
            body: None,
        },
    }
}

/// The `$batch` body and its content type.
pub(crate) fn encode(requests: &[SubRequest]) -> (String, String) {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let (batch, changeset) = (format!("batch_{id}"), format!("changeset_{id}"));
    let mut body = String::new();
    body.push_str(&format!(
        "--{batch}\r\nContent-Type: multipart/mixed; boundary={changeset}\r\n\r\n"
    ));
    for request in requests {
        body.push_str(&format!(
            "--{changeset}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n"
        ));
        body.push_str(&format!("{} {} HTTP/1.1\r\n", request.method, request.url));
        body.push_str("Accept: application/json;odata=minimalmetadata\r\n");
        body.push_str("DataServiceVersion: 3.0;\r\n");
        if let Some(if_match) = &request.if_match {
            body.push_str(&format!("If-Match: {if_match}\r\n"));
        }
        match &request.body {
            Some(json) => {
                body.push_str("Content-Type: application/json\r\n");
                if request.method == "POST" {
                    body.push_str("Prefer: return-no-content\r\n");
                }
                body.push_str(&format!("Content-Length: {}\r\n\r\n{json}\r\n", json.len()));
            }
            None => body.push_str("\r\n"),
        }
    }
    body.push_str(&format!("--{changeset}--\r\n\r\n--{batch}--\r\n"));
    (body, format!("multipart/mixed; boundary={batch}"))
}

/// One sub-response: its status, ETag and body.
#[derive(Debug)]
pub(crate) struct SubResponse {
    pub(crate) status: u16,
    pub(crate) etag: Option<ETag>,
    pub(crate) body: String,
}

/// The sub-responses of a `$batch` response, in order.
pub(crate) fn decode(body: &str) -> Vec<SubResponse> {
    let mut responses = Vec::new();
    let mut rest = body;
    while let Some(at) = rest.find("HTTP/1.1 ") {
        rest = &rest[at + "HTTP/1.1 ".len()..];
        let status = rest.get(..3).and_then(|s| s.parse().ok()).unwrap_or(0u16);
        // Headers until the blank line, then the body until the next boundary.
        let (head, tail) = rest.split_once("\r\n\r\n").unwrap_or((rest, ""));
        let etag = head.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("etag")
                .then(|| ETag::new(value.trim()))
        });
        let end = if tail.starts_with("--") {
            0
        } else {
            tail.find("\r\n--").unwrap_or(tail.len())
        };
        responses.push(SubResponse {
            status,
            etag,
            body: tail[..end].trim().to_owned(),
        });
        rest = &tail[end..];
    }
    responses
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_are_read_in_order_with_their_etags() {
        let body = "--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_2\r\n\r\n\
--changesetresponse_2\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
HTTP/1.1 204 No Content\r\nETag: W/\"a\"\r\n\r\n\r\n\
--changesetresponse_2\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n\
HTTP/1.1 204 No Content\r\n\r\n\r\n--changesetresponse_2--\r\n--batchresponse_1--\r\n";
        let responses = decode(body);
        assert_eq!(responses.len(), 2);
        assert_eq!(responses[0].status, 204);
        assert_eq!(responses[0].etag, Some(ETag::new("W/\"a\"")));
        assert_eq!(responses[1].etag, None);
    }

    #[test]
    fn a_failed_changeset_is_one_error_part() {
        let body = "--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=changesetresponse_2\r\n\r\n\
--changesetresponse_2\r\nContent-Type: application/http\r\n\r\n\
HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n\r\n\
{\"odata.error\":{\"code\":\"EntityAlreadyExists\",\"message\":{\"value\":\"1:The specified entity already exists.\"}}}\r\n\
--changesetresponse_2--\r\n--batchresponse_1--\r\n";
        let responses = decode(body);
        assert_eq!(responses.len(), 1);
        assert_eq!(responses[0].status, 409);
        assert!(responses[0].body.contains("EntityAlreadyExists"));
    }
}
