//! Headless Chromium through chromedriver for the console's browser tests, or a reported
//! skip (a failure under `CI=true`) when either is missing.

use std::time::Duration;

/// A Chromium session; its chromedriver is stopped when dropped.
pub(crate) struct Browser {
    driver: std::process::Child,
    pub(crate) client: fantoccini::Client,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn find_program(names: &[&str]) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// A headless Chromium of `width` × `height` pixels, or `None` after reporting the skip.
pub(crate) async fn browser(width: u32, height: u32) -> Option<Browser> {
    let (Some(driver), Some(chromium)) = (
        find_program(&["chromedriver"]),
        find_program(&["chromium", "chromium-browser", "google-chrome"]),
    ) else {
        crate::support::service_missing(
            "no Chromium: scripts/services.sh installs Debian's chromium and chromium-driver",
        );
        return None;
    };
    let port = crate::support::free_port();
    let driver = std::process::Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": chromium,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", format!("--window-size={width},{height}"),
                     "--force-color-profile=srgb", "--hide-scrollbars"]
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let client = loop {
        match fantoccini::ClientBuilder::new(connector.clone())
            .capabilities(capabilities.clone())
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        {
            Ok(client) => break client,
            Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("chromedriver did not start a session: {e}"),
        }
    };
    Some(Browser { driver, client })
}
