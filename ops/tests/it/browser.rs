//! Headless Chromium (Debian's `chromium`) over WebDriver (`chromedriver`, with the
//! `fantoccini` client), shared by the browser suites (`checkout_browser`, `dashboard_browser`):
//! a session with the flags this closed network needs, screenshots, axe-core, keyboard.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};
use testkit::fleet::free_port;
use testkit::serve::KillOnDrop;

/// Where a suite's screenshots go: `target/<name>-screenshots/` (or `$<NAME>_SCREENSHOTS`).
fn screenshots_dir(name: &str) -> PathBuf {
    let var = format!("{}_SCREENSHOTS", name.to_uppercase());
    let dir = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../target/{name}-screenshots")));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The screenshots kept in the repository (one per state, language and width), refreshed when
/// `<NAME>_SCREENSHOTS_DOCS=1`: a plain run (CI's) leaves the repository's files as they are.
fn docs_screenshots_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(format!("{}_SCREENSHOTS_DOCS", name.to_uppercase())).filter(|v| v == "1")?;
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("../docs/{name}-screenshots"));
    std::fs::create_dir_all(&dir).unwrap();
    Some(dir)
}

/// axe-core's source, from `$AXE_CORE_JS`: missing is a failure, never a skip.
pub fn axe_source() -> String {
    let path = std::env::var("AXE_CORE_JS").unwrap_or_else(|_| {
        panic!("AXE_CORE_JS is not set: point it at axe-core's axe.min.js (`.ci/run` installs it with ensure_axe_core)")
    });
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("AXE_CORE_JS={path} cannot be read: {e}"))
}

/// Text as WebDriver reads it, no-break spaces (Intl's "49,90 €") as spaces.
pub fn plain(s: &str) -> String {
    s.replace(['\u{a0}', '\u{202f}'], " ")
}

/// The two widths every state is checked at: (name, width, height).
pub const WIDTHS: [(&str, u32, u32); 2] = [("desktop", 1280, 900), ("phone", 390, 844)];

/// The element was swapped out of the page (a re-render, or the next page replacing this one).
fn replaced(e: &fantoccini::error::CmdError) -> bool {
    e.is_stale_element_reference() || e.to_string().contains("does not belong to the document")
}

pub struct Browser {
    pub client: Client,
    pub shots: PathBuf,
    /// The suite's name: `checkout` or `dashboard` (its screenshot directories).
    suite: &'static str,
    /// Where Chromium saves downloads (the dashboard's CSV exports).
    pub downloads: tempfile::TempDir,
    _driver: KillOnDrop,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// chromedriver on a free port, and a headless Chromium session with the flags this
    /// closed network needs (no background connections).
    pub async fn start(suite: &'static str) -> Browser {
        let port = free_port();
        let driver = Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start /usr/bin/chromedriver (Debian package chromium-driver)");
        let driver = KillOnDrop(driver);
        let url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while http.get(format!("{url}/status")).send().await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver never answered");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let downloads = tempfile::tempdir().unwrap();
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=420,1100",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([format!("--user-data-dir={}", profile.path().display())])
        .collect::<Vec<_>>();
        let mut caps = serde_json::Map::new();
        let prefs = json!({"download.default_directory": downloads.path().display().to_string(), "download.prompt_for_download": false});
        caps.insert("goog:chromeOptions".into(), json!({"binary": "/usr/bin/chromium", "args": args, "prefs": prefs}));
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector).capabilities(caps).connect(&url).await.expect("a Chromium session");
        Browser { client, shots: screenshots_dir(suite), suite, downloads, _driver: driver, _profile: profile }
    }

    pub async fn shot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
    }

    /// Runs `op` on the element `css` finds, finding it again when the page replaced it between
    /// the two steps (the checkout re-renders its panel on every status poll): what a person
    /// sees is the element now on the page, never a node that was swapped out.
    pub async fn on<T, F, Fut>(&self, css: &str, op: F) -> T
    where
        F: Fn(fantoccini::elements::Element) -> Fut,
        Fut: std::future::Future<Output = Result<T, fantoccini::error::CmdError>>,
    {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let found = self.client.find(Locator::Css(css)).await;
            match found {
                Ok(el) => match op(el).await {
                    Ok(v) => return v,
                    Err(e) if replaced(&e) && Instant::now() < deadline => {}
                    Err(e) => panic!("{css}: {e}"),
                },
                // A page being replaced by the next one (after a form post) has no such element
                // yet: looked for again until the deadline.
                Err(e) if (e.is_no_such_element() || replaced(&e)) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("{css}: {e}"),
            }
        }
    }

    pub async fn text(&self, css: &str) -> String {
        self.on(css, |el| async move { el.text().await }).await
    }

    pub async fn visible(&self, css: &str) -> bool {
        self.on(css, |el| async move { el.is_displayed().await }).await
    }

    pub async fn click(&self, css: &str) {
        self.on(css, |el| async move { el.click().await }).await
    }

    /// Waits until the text of `css` contains `want`.
    pub async fn wait_text(&self, css: &str, want: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let got = plain(&self.text(css).await);
            if got.contains(want) {
                return got;
            }
            assert!(Instant::now() < deadline, "{css} never showed {want:?}; it shows {got:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn js(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.unwrap()
    }

    /// Runs axe-core on the page as it is now and fails on any serious or critical violation,
    /// listing them.
    pub async fn axe(&self, what: &str) {
        if self.js("return typeof window.axe === 'undefined';").await == true {
            self.client.execute(&axe_source(), vec![]).await.expect("axe-core loads into the page");
        }
        let script = "const done = arguments[arguments.length - 1];
            axe.run(document, { resultTypes: ['violations'] })
              .then(r => done(r.violations.map(v => ({ id: v.id, impact: v.impact, help: v.help,
                  nodes: v.nodes.map(n => n.target.join(' ') + ' | ' + n.failureSummary) }))))
              .catch(e => done([{ id: 'axe-error', impact: 'critical', help: String(e), nodes: [] }]));";
        let violations = self.client.execute_async(script, vec![]).await.expect("axe.run");
        let bad: Vec<&Value> = violations
            .as_array()
            .expect("a list of violations")
            .iter()
            .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
            .collect();
        assert!(
            bad.is_empty(),
            "axe-core on {what}: serious or critical violations:\n{}",
            serde_json::to_string_pretty(&bad).unwrap()
        );
    }

    /// Presses `key` on whatever has the focus, as a keyboard does.
    pub async fn press(&self, key: Key) {
        let k: char = key.into();
        let actions =
            KeyActions::new("keyboard".into()).then(KeyAction::Down { value: k }).then(KeyAction::Up { value: k });
        self.client.perform_actions(actions).await.unwrap();
    }

    /// Tabs through the page until the focused element matches `css` (at most 60 presses).
    pub async fn tab_to(&self, css: &str) {
        for _ in 0..60 {
            self.press(Key::Tab).await;
            let here =
                self.js(&format!("return document.activeElement && document.activeElement.matches({css:?});")).await;
            if here == true {
                // The focus is visible (the stylesheet's :focus-visible outline).
                let outline = self
                    .js("const s = getComputedStyle(document.activeElement); return [s.outlineStyle, s.outlineWidth];")
                    .await;
                assert_eq!(outline, json!(["solid", "3px"]), "{css} has the focus but not the :focus-visible outline");
                return;
            }
        }
        panic!("Tab never reached {css}");
    }

    /// The page as it is now at each width: `check` on its visible text, axe-core, and a
    /// screenshot `{state}-{lang}-{width}.png` in both screenshot directories.
    pub async fn capture(&self, state: &str, lang: &str, check: &[(&str, &str)]) {
        for (width_name, w, h) in WIDTHS {
            self.client.set_window_size(w, h).await.unwrap();
            let inner = self.js("return window.innerWidth;").await.as_u64().unwrap();
            assert!(inner <= w as u64 && inner + 40 >= w as u64, "{width_name}: the page is {inner} px wide");
            for (css, want) in check {
                self.wait_text(css, want).await;
            }
            self.axe(&format!("{state} ({lang}, {width_name})")).await;
            let png = self.client.screenshot().await.unwrap();
            let name = format!("{state}-{lang}-{width_name}.png");
            std::fs::write(self.shots.join(&name), &png).unwrap();
            if let Some(docs) = docs_screenshots_dir(self.suite) {
                std::fs::write(docs.join(&name), &png).unwrap();
            }
        }
    }
}
