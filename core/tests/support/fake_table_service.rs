//! A table service on loopback that answers only the table requests (create, delete,
//! list) and can keep a deleted table "being deleted" for a number of create attempts,
//! as the real service does for a while after a delete: the fault the retrying create is
//! tested against. Every request is counted.

#![allow(dead_code)]

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

#[derive(Default)]
struct State {
    tables: BTreeSet<String>,
    /// Create attempts still answered `TableBeingDeleted`, by table.
    being_deleted: HashMap<String, usize>,
    /// How many create attempts a delete leaves answered `TableBeingDeleted`.
    deleting_lasts: usize,
    /// Every request, as `METHOD /path`.
    requests: Vec<String>,
}

/// The fake service; it stops with the test's runtime.
pub(crate) struct FakeTableService {
    port: u16,
    state: Arc<Mutex<State>>,
}

const ACCOUNT: &str = "fake";

impl FakeTableService {
    /// A service where every delete leaves the table being deleted for `deleting_lasts`
    /// create attempts.
    pub(crate) async fn start(deleting_lasts: usize) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
        let port = listener.local_addr().expect("an address").port();
        let state = Arc::new(Mutex::new(State {
            deleting_lasts,
            ..State::default()
        }));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, shared.clone()));
            }
        });
        FakeTableService { port, state }
    }

    /// A shared-key connection string for the service (not the emulator's account, so
    /// no emulator workaround sends other requests).
    pub(crate) fn connection_string(&self) -> String {
        format!(
            "DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey=a2V5;TableEndpoint=http://127.0.0.1:{}/{ACCOUNT}",
            self.port
        )
    }

    /// Makes `table` answer `TableBeingDeleted` to the next `attempts` creates.
    pub(crate) fn being_deleted(&self, table: &str, attempts: usize) {
        let mut state = self.state.lock().expect("the state");
        state.tables.remove(table);
        state.being_deleted.insert(table.to_owned(), attempts);
    }

    /// How many create requests (`POST /Tables`) arrived.
    pub(crate) fn creates(&self) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.starts_with("POST ") && r.ends_with("/Tables"))
            .count()
    }

    /// Every request so far, as `METHOD /path`.
    pub(crate) fn requests(&self) -> Vec<String> {
        self.state.lock().expect("the state").requests.clone()
    }

    /// The tables that exist.
    pub(crate) fn tables(&self) -> Vec<String> {
        let state = self.state.lock().expect("the state");
        state.tables.iter().cloned().collect()
    }
}

async fn serve(stream: TcpStream, state: Arc<Mutex<State>>) {
    let mut stream = BufReader::new(stream);
    loop {
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            match stream.read_line(&mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => head.push(line.trim_end().to_owned()),
            }
        }
        let Some((method, path)) = head.first().and_then(|l| {
            let mut parts = l.split(' ');
            Some((parts.next()?.to_owned(), parts.next()?.to_owned()))
        }) else {
            return;
        };
        let length = head
            .iter()
            .filter_map(|h| h.split_once(':'))
            .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if stream.read_exact(&mut body).await.is_err() {
            return;
        }
        let (status, text) = answer(&state, &method, &path, &body);
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json;odata=minimalmetadata\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        if stream
            .get_mut()
            .write_all(response.as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

fn error(status: &str, code: &str) -> (String, String) {
    let body = format!(
        r#"{{"odata.error":{{"code":"{code}","message":{{"lang":"en-US","value":"{code}"}}}}}}"#
    );
    (status.to_owned(), body)
}

fn answer(state: &Mutex<State>, method: &str, path: &str, body: &[u8]) -> (String, String) {
    let mut state = state.lock().expect("the state");
    let path = path.split('?').next().unwrap_or(path);
    state.requests.push(format!("{method} {path}"));
    let tables = format!("/{ACCOUNT}/Tables");
    match method {
        "POST" if path == tables => {
            let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
            let name = json["TableName"].as_str().unwrap_or_default().to_owned();
            if let Some(left) = state.being_deleted.get_mut(&name)
                && *left > 0
            {
                *left -= 1;
                return error("409 Conflict", "TableBeingDeleted");
            }
            if !state.tables.insert(name) {
                return error("409 Conflict", "TableAlreadyExists");
            }
            ("204 No Content".to_owned(), String::new())
        }
        "GET" if path == tables => {
            let value: Vec<_> = state
                .tables
                .iter()
                .map(|t| serde_json::json!({ "TableName": t }))
                .collect();
            (
                "200 OK".to_owned(),
                serde_json::json!({ "value": value }).to_string(),
            )
        }
        "DELETE" => {
            let name = path
                .strip_prefix(&format!("{tables}('"))
                .and_then(|rest| rest.strip_suffix("')"))
                .unwrap_or_default()
                .to_owned();
            if !state.tables.remove(&name) {
                return error("404 Not Found", "TableNotFound");
            }
            let lasts = state.deleting_lasts;
            state.being_deleted.insert(name, lasts);
            ("204 No Content".to_owned(), String::new())
        }
        _ => error("501 Not Implemented", "NotImplemented"),
    }
}
