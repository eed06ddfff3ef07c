//! Headless Chromium through chromedriver for the console's browser tests, or a reported
//! skip (a failure under `CI=true`) when either is missing.

// Not every test binary uses every helper.
#![allow(dead_code)]

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

pub(crate) fn screenshots() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
        std::path::PathBuf::from,
    );
    let dir = target.join("console-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Saves a screenshot and checks it is a PNG of a sane size.
pub(crate) async fn screenshot(client: &fantoccini::Client, name: &str) {
    let png = client.screenshot().await.unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
    let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
    assert!(width >= 1000 && height >= 600, "{width}x{height}");
    assert!(
        (15_000..8_000_000).contains(&png.len()),
        "{name}: {} bytes",
        png.len()
    );
    let path = screenshots().join(format!("{name}.png"));
    std::fs::write(&path, &png).unwrap();
    eprintln!("screenshot: {}", path.display());
}

/// Waits for the result banner of the page an action led to to say `expected` (the page
/// before the action may still show the previous result while the form is sent).
pub(crate) async fn banner(client: &fantoccini::Client, expected: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(banner) = client.find(fantoccini::Locator::Css(".banner")).await
            && banner.text().await.is_ok_and(|text| text == expected)
        {
            return;
        }
        if std::time::Instant::now() > deadline {
            panic!(
                "no result banner saying {expected:?} at {}:\n{}",
                client.current_url().await.unwrap(),
                client.source().await.unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the page's source passes `done` (10 s at most).
pub(crate) async fn wait_for(client: &fantoccini::Client, done: impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(source) = client.source().await
            && done(&source)
        {
            return;
        }
        if std::time::Instant::now() > deadline {
            panic!(
                "the page at {} never showed what was awaited:\n{}",
                client.current_url().await.unwrap(),
                client.source().await.unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Clicks the first element `css` finds.
pub(crate) async fn click(client: &fantoccini::Client, css: &str) {
    client
        .find(fantoccini::Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no {css}: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("{css} cannot be clicked: {e}"));
}
