//! A small W3C WebDriver client for headless Chromium through Debian's `chromedriver`: enough to
//! sign in, click, type, read, open a second tab, reload and take screenshots, as a person would.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
const WAIT: Duration = Duration::from_secs(20);

/// Where chromedriver and chromium are, or None to skip. With `LLOOMA_SLOW_TESTS` set (CI) a
/// missing browser fails the test: CI must not pass by skipping.
fn tools() -> Option<(PathBuf, PathBuf)> {
    let driver = std::env::var_os("LLOOMA_CHROMEDRIVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromedriver"));
    let chromium = std::env::var_os("LLOOMA_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if driver.exists() && chromium.exists() {
        return Some((driver, chromium));
    }
    assert!(
        std::env::var_os("LLOOMA_SLOW_TESTS").is_none(),
        "browser tests need {} and {} (`cargo xtask setup` installs them: apt-get install chromium chromium-driver)",
        chromium.display(),
        driver.display()
    );
    eprintln!("skipped: chromium or chromedriver is not installed");
    None
}

/// An element's box in CSS pixels, from the window's top left corner.
#[derive(Debug, Clone, Copy)]
pub struct Rect {
    pub left: f64,
    pub top: f64,
    pub right: f64,
    pub bottom: f64,
}

impl Rect {
    /// Whether all of it is inside a window of this size.
    pub fn inside(&self, (width, height): (f64, f64)) -> bool {
        self.left >= -0.5
            && self.top >= -0.5
            && self.right <= width + 0.5
            && self.bottom <= height + 0.5
    }
}

/// One headless Chromium, driven through its own chromedriver; both end when dropped.
pub struct Browser {
    http: reqwest::Client,
    session: String,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    /// Ends the session (chromedriver then quits Chromium), then kills what is left of the
    /// driver's process group. Killing chromedriver alone leaves Chromium running: over a few
    /// runs those orphans filled the machine's memory and later browsers failed to start.
    fn drop(&mut self) {
        end_session(&self.session);
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// `DELETE` the WebDriver session over a plain socket (a drop cannot await), briefly.
fn end_session(session_url: &str) {
    use std::io::{Read, Write};
    let Some(rest) = session_url.strip_prefix("http://") else { return };
    let Some((host, path)) = rest.split_once('/') else { return };
    let Ok(address) = host.parse::<std::net::SocketAddr>() else { return };
    let Ok(mut stream) =
        std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_secs(2))
    else {
        return;
    };
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(5)));
    let request = format!(
        "DELETE /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    if stream.write_all(request.as_bytes()).is_ok() {
        let _ = stream.read(&mut [0u8; 512]);
    }
}

impl Browser {
    /// A phone-sized or desktop-sized viewport.
    pub async fn start(width: u32, height: u32) -> Option<Browser> {
        let (driver_path, chromium) = tools()?;
        let port = llooma_test_support::peers::free_port();
        // Its own process group, so dropping the browser can end Chromium with it.
        let driver = Command::new(driver_path)
            .process_group(0)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting chromedriver");
        let profile = tempfile::tempdir().unwrap();
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + WAIT;
        while http.get(format!("{base}/status")).send().await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not answer on port {port}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-renderer-backgrounding", "--disable-background-timer-throttling",
                    // A microphone that plays a tone, granted without asking; replies played
                    // without a click first (a person has clicked by then).
                    "--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
                    "--autoplay-policy=no-user-gesture-required",
                    format!("--window-size={width},{height}"),
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        }}});
        if width < 600 {
            // A phone: its viewport for real (a headless window is at least 500 pixels wide).
            capabilities["capabilities"]["alwaysMatch"]["goog:chromeOptions"]["mobileEmulation"] =
                json!({"deviceMetrics": {"width": width, "height": height, "pixelRatio": 1}});
        }
        let answer: Value = http
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = answer["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("chromedriver refused the session: {answer}"));
        Some(Browser { http, session: format!("{base}/session/{id}"), driver, _profile: profile })
    }

    async fn command(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, Value> {
        let url = format!("{}{}", self.session, path);
        let request = match method {
            "GET" => self.http.get(url),
            "DELETE" => self.http.delete(url),
            _ => self.http.post(url).json(&body.unwrap_or_else(|| json!({}))),
        };
        let response = request.send().await.unwrap();
        let ok = response.status().is_success();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        if ok { Ok(answer["value"].clone()) } else { Err(answer["value"].clone()) }
    }

    async fn must(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        match self.command(method, path, body).await {
            Ok(v) => v,
            Err(e) => panic!("webdriver {method} {path} failed: {e}\n{}", self.console().await),
        }
    }

    pub async fn goto(&self, url: &str) {
        self.must("POST", "/url", Some(json!({"url": url}))).await;
    }

    pub async fn reload(&self) {
        self.must("POST", "/refresh", None).await;
    }

    /// Grants the page a permission (`clipboard-read`, `clipboard-write`...).
    pub async fn grant(&self, permission: &str) {
        let body = json!({"descriptor": {"name": permission}, "state": "granted"});
        self.must("POST", "/permissions", Some(body)).await;
    }

    /// Marks the page shown now, so [`Browser::wait_new_page`] can tell when another replaced it.
    pub async fn mark_page(&self) {
        self.script("window.llooma_test_old_page = true").await;
    }

    /// Waits until the page marked by [`Browser::mark_page`] has been replaced and is live.
    pub async fn wait_new_page(&self) {
        let deadline = Instant::now() + WAIT;
        loop {
            let old = self.command(
                "POST",
                "/execute/sync",
                Some(json!({
                    "script": "return window.llooma_test_old_page === true", "args": []
                })),
            );
            if let Ok(Value::Bool(false)) = old.await {
                break;
            }
            assert!(Instant::now() < deadline, "the page was not replaced after {WAIT:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.wait_live().await;
    }

    /// Looks inside the frame `css` matches: what follows finds, reads and clicks in it, until
    /// [`Browser::leave_frame`].
    ///
    /// Waits until the frame shows the document its `src` names: a frame entered while still
    /// blank may be swapped for another process when its cross-origin document arrives, and
    /// the driver would go on reading the blank one. So it enters again until it is there.
    pub async fn enter_frame(&self, css: &str) {
        // A frame loads its own document from the instance: on a busy machine, slowly.
        let deadline = Instant::now() + 2 * WAIT;
        let loaded = "return location.href !== 'about:blank' && document.readyState === 'complete'";
        loop {
            let id = self.find(&format!("{css}[src]")).await;
            self.must("POST", "/frame", Some(json!({"id": {ELEMENT: id}}))).await;
            for _ in 0..20 {
                let body = json!({"script": loaded, "args": []});
                match self.command("POST", "/execute/sync", Some(body)).await {
                    Ok(Value::Bool(true)) => return,
                    Ok(_) => {}
                    // The frame entered is gone (the page drew it anew): enter the new one.
                    Err(_) => break,
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            self.must("POST", "/frame", Some(json!({"id": null}))).await;
            assert!(Instant::now() < deadline, "the frame `{css}` never loaded its document");
        }
    }

    /// Back to the page from a frame.
    pub async fn leave_frame(&self) {
        self.must("POST", "/frame/parent", None).await;
    }

    /// The browser's Back button.
    pub async fn back(&self) {
        self.must("POST", "/back", None).await;
    }

    /// Waits until the page is live (hydrated) and says nothing is missing.
    pub async fn wait_live(&self) {
        self.find("html[data-hydrated]").await;
        assert!(
            self.try_find(".banner").await.is_none(),
            "the page says its browser part is missing: run cargo xtask build-web"
        );
    }

    async fn try_find(&self, css: &str) -> Option<String> {
        let found = self
            .command("POST", "/element", Some(json!({"using": "css selector", "value": css})))
            .await
            .ok()?;
        found[ELEMENT].as_str().map(str::to_owned)
    }

    /// The first element matching `css`, waiting for it to appear.
    pub async fn find(&self, css: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(id) = self.try_find(css).await {
                return id;
            }
            if Instant::now() > deadline {
                let source = self.command("GET", "/source", None).await.unwrap_or_default();
                let source: String =
                    source.as_str().unwrap_or_default().chars().take(3000).collect();
                panic!(
                    "no element matches `{css}` after {WAIT:?}\npage text:\n{}\nsource:\n{source}\nconsole:\n{}",
                    self.body_text().await,
                    self.console().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until nothing matches `css`.
    pub async fn wait_gone(&self, css: &str) {
        let deadline = Instant::now() + WAIT;
        while self.try_find(css).await.is_some() {
            assert!(
                Instant::now() < deadline,
                "`{css}` is still there after {WAIT:?}\npage text:\n{}",
                self.body_text().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn click(&self, css: &str) {
        self.on_element(css, "POST", "click", None).await;
    }

    /// Types into a field (WebDriver key codes such as `\u{E004}` (Tab) work too).
    /// Empties a field (as a person selecting its text and deleting it).
    pub async fn clear(&self, css: &str) {
        self.on_element(css, "POST", "clear", Some(json!({}))).await;
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        self.on_element(css, "POST", "value", Some(json!({"text": text}))).await;
    }

    /// Does `action` on the first element matching `css`. When the page re-rendered that element
    /// between finding and acting ("stale element reference"), it is found again: a person
    /// would simply act on the new one.
    async fn on_element(
        &self,
        css: &str,
        method: &str,
        action: &str,
        body: Option<Value>,
    ) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let id = self.find(css).await;
            let path = format!("/element/{id}/{action}");
            match self.command(method, &path, body.clone()).await {
                Ok(value) => return value,
                Err(e) if e["error"] == "stale element reference" && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("webdriver {method} {path} failed: {e}\n{}", self.console().await),
            }
        }
    }

    pub async fn text(&self, css: &str) -> String {
        self.on_element(css, "GET", "text", None).await.as_str().unwrap().to_owned()
    }

    /// The current value of a form field.
    pub async fn value(&self, css: &str) -> String {
        let value = self.on_element(css, "GET", "property/value", None).await;
        value.as_str().unwrap_or_default().to_owned()
    }

    /// Waits until the first element matching `css` shows `wanted`; returns its text.
    pub async fn wait_text(&self, css: &str, wanted: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            // The page may be replaced between finding and reading (a reload): try again.
            if let Some(id) = self.try_find(css).await
                && let Ok(text) = self.command("GET", &format!("/element/{id}/text"), None).await
            {
                let text = text.as_str().unwrap_or_default().to_owned();
                if text.contains(wanted) {
                    return text;
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "`{css}` never showed {wanted:?}\npage text:\n{}\nconsole:\n{}",
                    self.body_text().await,
                    self.console().await
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub async fn body_text(&self) -> String {
        match self
            .command("POST", "/element", Some(json!({"using": "css selector", "value": "body"})))
            .await
        {
            Ok(body) => {
                let id = body[ELEMENT].as_str().unwrap_or_default().to_owned();
                self.command("GET", &format!("/element/{id}/text"), None)
                    .await
                    .map(|t| t.as_str().unwrap_or_default().to_owned())
                    .unwrap_or_default()
            }
            Err(e) => format!("(no page: {e})"),
        }
    }

    /// The page's HTML as the browser has it now.
    pub async fn source(&self) -> String {
        self.must("GET", "/source", None).await.as_str().unwrap().to_owned()
    }

    pub async fn url(&self) -> String {
        self.must("GET", "/url", None).await.as_str().unwrap().to_owned()
    }

    /// The browser console so far (for failure messages).
    pub async fn console(&self) -> String {
        match self.command("POST", "/se/log", Some(json!({"type": "browser"}))).await {
            Ok(Value::Array(lines)) => lines
                .iter()
                .map(|l| format!("{} {}", l["level"], l["message"]))
                .collect::<Vec<_>>()
                .join("\n"),
            other => format!("(no console log: {other:?})"),
        }
    }

    /// Clicks the first element matching `css` whose text contains `text` (menus of items that
    /// differ only by their words).
    pub async fn click_text(&self, css: &str, text: &str) {
        let script = "const [css, text] = arguments; \
            const hit = [...document.querySelectorAll(css)].find(e => e.textContent.includes(text)); \
            if (!hit) { return false; } hit.click(); return true;";
        let deadline = Instant::now() + WAIT;
        loop {
            let clicked = self
                .must("POST", "/execute/sync", Some(json!({"script": script, "args": [css, text]})))
                .await;
            if clicked == Value::Bool(true) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "nothing matching `{css}` shows {text:?}; page text:\n{}",
                self.body_text().await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Scrolls so the first element matching `css` is at the top of the window.
    pub async fn scroll_to(&self, css: &str) {
        self.find(css).await;
        let script = "document.querySelector(arguments[0]).scrollIntoView({block: 'start'});";
        self.must("POST", "/execute/sync", Some(json!({"script": script, "args": [css]}))).await;
    }

    /// Scrolls so the end of the first element matching `css` is at the bottom of the window
    /// (or of the box that scrolls it).
    pub async fn scroll_to_end(&self, css: &str) {
        self.find(css).await;
        let script = "document.querySelector(arguments[0]).scrollIntoView({block: 'end'});";
        self.must("POST", "/execute/sync", Some(json!({"script": script, "args": [css]}))).await;
    }

    /// The window's size in CSS pixels (`innerWidth`, `innerHeight`).
    pub async fn window_size(&self) -> (f64, f64) {
        let size = self.script("return [window.innerWidth, window.innerHeight];").await;
        (size[0].as_f64().unwrap(), size[1].as_f64().unwrap())
    }

    /// Runs `script` in the page (WebDriver's `execute/sync`) and returns what it returns.
    pub async fn script(&self, script: &str) -> Value {
        self.must("POST", "/execute/sync", Some(json!({"script": script, "args": []}))).await
    }

    /// What does not fit a screen `width` CSS pixels wide, one line each (empty when all fits):
    /// a window zoomed out to show something wider (a phone does that instead of scrolling, so
    /// `scrollWidth > innerWidth` alone sees nothing), a document wider than the screen, and
    /// every element whose box reaches past the screen's left or right edge, unless a box that
    /// scrolls (`overflow: auto` or `scroll`) and fits holds it (the outermost ones named, what
    /// is inside them counted). A box cut off by `overflow: hidden` still counts: what is past
    /// the edge cannot be reached.
    pub async fn sticking_out(&self, width: u32) -> Vec<String> {
        let script = r#"
            const width = arguments[0];
            const problems = [];
            if (Math.abs(window.innerWidth - width) > 0.5) {
                problems.push(`the window is ${window.innerWidth} CSS pixels wide, not ${width}: the page was zoomed out to show something wider`);
            }
            const doc = document.documentElement.scrollWidth;
            if (doc > width) { problems.push(`the document is ${doc} pixels wide`); }
            const name = e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
                + [...e.classList].map(c => '.' + c).join('');
            const path = e => {
                const names = [];
                for (let n = e; n && n !== document.documentElement; n = n.parentElement) {
                    names.unshift(name(n));
                }
                return names.join(' > ');
            };
            const out = r => r.left < -0.5 || r.right > width + 0.5;
            const heldByAScroller = e => {
                for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
                    const x = getComputedStyle(a).overflowX;
                    if ((x === 'auto' || x === 'scroll') && !out(a.getBoundingClientRect())) {
                        return true;
                    }
                }
                return false;
            };
            const offending = new Set();
            let inside = 0;
            for (const e of document.body.querySelectorAll('*')) {
                const r = e.getBoundingClientRect();
                if (r.width === 0 && r.height === 0) { continue; }
                if (!out(r) || heldByAScroller(e)) { continue; }
                offending.add(e);
                // The outermost ones are named; what is inside them only counted.
                if (offending.has(e.parentElement)) { inside += 1; continue; }
                problems.push(`${path(e)}: from ${Math.round(r.left)} to ${Math.round(r.right)} (${Math.round(r.width)} wide)`);
            }
            if (inside > 0) { problems.push(`and ${inside} elements inside those`); }
            return problems;
        "#;
        let answer = self
            .must("POST", "/execute/sync", Some(json!({"script": script, "args": [width]})))
            .await;
        answer
            .as_array()
            .unwrap()
            .iter()
            .map(|line| line.as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// The box of the first element matching `css`, in CSS pixels from the window's top left.
    pub async fn rect(&self, css: &str) -> Rect {
        self.find(css).await;
        let script = "const r = document.querySelector(arguments[0]).getBoundingClientRect(); \
            return [r.left, r.top, r.right, r.bottom];";
        let answer = self
            .must("POST", "/execute/sync", Some(json!({"script": script, "args": [css]})))
            .await;
        let at = |i: usize| answer[i].as_f64().unwrap();
        Rect { left: at(0), top: at(1), right: at(2), bottom: at(3) }
    }

    /// Opens a new tab and switches to it; returns (old tab, new tab).
    pub async fn new_tab(&self) -> (String, String) {
        let old = self.must("GET", "/window", None).await.as_str().unwrap().to_owned();
        let new = self.must("POST", "/window/new", Some(json!({"type": "tab"}))).await;
        let new = new["handle"].as_str().unwrap().to_owned();
        self.switch_to(&new).await;
        (old, new)
    }

    /// Every open tab's handle, the current one included.
    pub async fn tabs(&self) -> Vec<String> {
        let handles = self.must("GET", "/window/handles", None).await;
        handles.as_array().unwrap().iter().map(|h| h.as_str().unwrap().to_owned()).collect()
    }

    /// This tab's handle.
    pub async fn tab(&self) -> String {
        self.must("GET", "/window", None).await.as_str().unwrap().to_owned()
    }

    pub async fn switch_to(&self, tab: &str) {
        self.must("POST", "/window", Some(json!({"handle": tab}))).await;
    }

    /// Saves a PNG of the window into `docs/screenshots/` when `LLOOMA_SCREENSHOTS` is set.
    pub async fn screenshot(&self, name: &str) {
        if std::env::var_os("LLOOMA_SCREENSHOTS").is_none() {
            return;
        }
        use base64::Engine;
        let png = self.must("GET", "/screenshot", None).await;
        let bytes =
            base64::engine::general_purpose::STANDARD.decode(png.as_str().unwrap()).unwrap();
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), bytes).unwrap();
    }
}
