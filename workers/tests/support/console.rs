//! A console served in the background for the console's tests, and an HTTP client that
//! shows redirects instead of following them.

use std::net::SocketAddr;

use tablekit_core::AnyStore;
use tablekit_workers::console::{self, ConsoleOptions};
use tablekit_workers::queue::AnyQueue;

/// A console serving in the background until dropped (with whatever it must outlive).
pub(crate) struct Served {
    pub(crate) url: String,
    pub(crate) address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _kept: Option<tempfile::TempDir>,
}

impl Served {
    /// Keeps `dir` (the queue's file, say) until the console stops.
    pub(crate) fn keeping(mut self, dir: tempfile::TempDir) -> Self {
        self._kept = Some(dir);
        self
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Binds a console over `store` and `broker` and serves it in the background.
pub(crate) async fn serve(store: AnyStore, broker: AnyQueue, options: ConsoleOptions) -> Served {
    let bound = console::bind(store, broker, options).await.unwrap();
    let address = bound.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(bound.serve(async move {
        let _ = stopped.await;
    }));
    Served {
        url: format!("http://{address}"),
        address,
        stop: Some(stop),
        _kept: None,
    }
}

/// An HTTP client that returns redirects as they are.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}
