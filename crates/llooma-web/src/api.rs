//! What the components ask of the browser: JSON API calls (session cookie + `X-CSRF-Token`),
//! navigation, the clock (the tab's event stream is `crate::stream`). In the server build these are inert: the
//! server only renders, and event handlers and listeners never run there.

use serde_json::Value;

/// An API call that did not succeed, with the sentence to show.
#[derive(Clone, Debug)]
pub struct Failure {
    pub message: String,
    /// The API's error code (`error`), empty when there was no answer.
    pub code: String,
}

impl Failure {
    pub fn from_answer(status: u16, json: &Value) -> Failure {
        Failure {
            code: json["error"].as_str().unwrap_or_default().to_owned(),
            message: json["message"]
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| format!("The server answered {status}; try again.")),
        }
    }
}

/// What a component calls when an event arrives on a stream: its name and its data (JSON text).
pub type OnEvent = std::rc::Rc<dyn Fn(&str, &str)>;

#[cfg(feature = "hydrate")]
mod browser {
    use serde_json::Value;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::prelude::*;
    use wasm_bindgen_futures::JsFuture;

    use super::Failure;
    use crate::model::Page;

    fn unreachable_server() -> Failure {
        Failure {
            message: "The server could not be reached; check the connection and try again."
                .to_owned(),
            code: String::new(),
        }
    }

    pub async fn call(
        method: &str,
        path: &str,
        body: Option<Value>,
        csrf: Option<&str>,
    ) -> Result<Value, Failure> {
        let init = web_sys::RequestInit::new();
        init.set_method(method);
        init.set_credentials(web_sys::RequestCredentials::SameOrigin);
        let headers = web_sys::Headers::new().map_err(|_| unreachable_server())?;
        let _ = headers.set("Accept", "application/json");
        if let Some(body) = body {
            let _ = headers.set("Content-Type", "application/json");
            init.set_body(&JsValue::from_str(&body.to_string()));
        }
        if let Some(token) = csrf {
            let _ = headers.set("X-CSRF-Token", token);
        }
        init.set_headers(&headers);
        let request = web_sys::Request::new_with_str_and_init(path, &init)
            .map_err(|_| unreachable_server())?;
        answer_of(request).await
    }

    /// A file the person chose, pasted or dropped, not sent yet.
    pub struct LocalFile(web_sys::File);

    impl LocalFile {
        pub fn name(&self) -> String {
            self.0.name()
        }

        pub fn size(&self) -> u64 {
            #[expect(clippy::cast_possible_truncation, reason = "a file's size is whole bytes")]
            #[expect(clippy::cast_sign_loss, reason = "a file's size is never negative")]
            let size = self.0.size() as u64;
            size
        }

        pub fn is_image(&self) -> bool {
            self.0.type_().starts_with("image/")
        }
    }

    fn files_of(list: Option<web_sys::FileList>) -> Vec<LocalFile> {
        let Some(list) = list else { return Vec::new() };
        (0..list.length()).filter_map(|i| list.get(i)).map(LocalFile).collect()
    }

    /// The files chosen in an `<input type=file>` (which is then emptied, so the same file can
    /// be chosen again).
    pub fn picked_files(ev: &leptos::ev::Event) -> Vec<LocalFile> {
        let Some(input) = ev.target().and_then(|t| t.dyn_into::<web_sys::HtmlInputElement>().ok())
        else {
            return Vec::new();
        };
        let files = files_of(input.files());
        input.set_value("");
        files
    }

    /// The files of a paste (a screenshot copied, a file copied in the file manager).
    pub fn pasted_files(ev: &leptos::ev::ClipboardEvent) -> Vec<LocalFile> {
        files_of(ev.clipboard_data().and_then(|d| d.files()))
    }

    /// The files dropped on the composer.
    pub fn dropped_files(ev: &leptos::ev::DragEvent) -> Vec<LocalFile> {
        files_of(ev.data_transfer().and_then(|d| d.files()))
    }

    /// Sends a file as a request's whole body.
    pub async fn upload(path: &str, file: &LocalFile, csrf: &str) -> Result<Value, Failure> {
        let init = web_sys::RequestInit::new();
        init.set_method("POST");
        init.set_credentials(web_sys::RequestCredentials::SameOrigin);
        let headers = web_sys::Headers::new().map_err(|_| unreachable_server())?;
        let _ = headers.set("Accept", "application/json");
        let _ = headers.set("X-CSRF-Token", csrf);
        init.set_headers(&headers);
        init.set_body(&file.0);
        let request = web_sys::Request::new_with_str_and_init(path, &init)
            .map_err(|_| unreachable_server())?;
        answer_of(request).await
    }

    async fn answer_of(request: web_sys::Request) -> Result<Value, Failure> {
        let window = web_sys::window().ok_or_else(unreachable_server)?;
        let response: web_sys::Response = JsFuture::from(window.fetch_with_request(&request))
            .await
            .ok()
            .and_then(|r| r.dyn_into().ok())
            .ok_or_else(unreachable_server)?;
        let status = response.status();
        let text = match response.text() {
            Ok(promise) => JsFuture::from(promise).await.ok().and_then(|t| t.as_string()),
            Err(_) => None,
        }
        .unwrap_or_default();
        let json: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            Ok(json)
        } else {
            Err(Failure::from_answer(status, &json))
        }
    }

    pub fn go(path: &str) {
        if let Some(window) = web_sys::window() {
            let _ = window.location().set_href(path);
        }
    }

    /// The conversation's scrolling box of messages.
    fn chat_scroll() -> Option<web_sys::Element> {
        web_sys::window()?.document()?.query_selector(".chat-scroll").ok()?
    }

    /// Whether the conversation's messages show the latest: the box is a reversed column, so
    /// 0 is the bottom and scrolling up goes negative (a few pixels' slack).
    pub fn chat_at_latest() -> bool {
        chat_scroll().is_none_or(|e| e.scroll_top() > -48)
    }

    /// Whether the reader has scrolled up to (near) the oldest message shown.
    pub fn chat_near_oldest() -> bool {
        chat_scroll().is_some_and(|e| e.scroll_height() - e.client_height() + e.scroll_top() < 400)
    }

    pub fn chat_to_latest() {
        if let Some(e) = chat_scroll() {
            e.set_scroll_top(0);
        }
    }

    /// An RFC 3339 time as the reader's browser writes a date and time, in their time zone.
    pub fn local_time(rfc3339: &str) -> String {
        let date = js_sys::Date::new(&JsValue::from_str(rfc3339));
        if date.get_time().is_nan() {
            return String::new();
        }
        let options = js_sys::Object::new();
        let _ = js_sys::Reflect::set(&options, &"dateStyle".into(), &"medium".into());
        let _ = js_sys::Reflect::set(&options, &"timeStyle".into(), &"short".into());
        date.to_locale_string("default", &options).as_string().unwrap_or_default()
    }

    pub fn title() -> String {
        web_sys::window().and_then(|w| w.document()).map(|d| d.title()).unwrap_or_default()
    }

    pub fn set_title(title: &str) {
        if let Some(d) = web_sys::window().and_then(|w| w.document()) {
            d.set_title(title);
        }
    }

    /// Replaces the text of the first element matching `css`.
    pub fn set_text(css: &str, text: &str) {
        if let Some(e) = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.query_selector(css).ok().flatten())
        {
            e.set_text_content(Some(text));
        }
    }

    pub fn now_ms() -> i64 {
        #[expect(clippy::cast_possible_truncation, reason = "milliseconds since 1970 fit in i64")]
        let now = js_sys::Date::now() as i64;
        now
    }

    pub fn every_second(tick: impl Fn() + 'static) {
        let Some(window) = web_sys::window() else { return };
        let callback = Closure::<dyn Fn()>::new(tick);
        let _ = window.set_interval_with_callback_and_timeout_and_arguments_0(
            callback.as_ref().unchecked_ref(),
            1000,
        );
        callback.forget();
    }

    pub fn page_data() -> Option<Page> {
        let text =
            web_sys::window()?.document()?.get_element_by_id("llooma-data")?.text_content()?;
        // Through `Value`, as the API's answers are read: one deserializer per type.
        serde_json::from_str::<Value>(&text).and_then(serde_json::from_value).ok()
    }

    pub fn mark_hydrated() {
        if let Some(root) =
            web_sys::window().and_then(|w| w.document()).and_then(|d| d.document_element())
        {
            let _ = root.set_attribute("data-hydrated", "true");
        }
    }

    pub fn console_error(message: &str) {
        web_sys::console::error_1(&JsValue::from_str(message));
    }

    /// Puts text on the clipboard; false when the browser refused.
    pub async fn copy_text(text: &str) -> bool {
        let Some(window) = web_sys::window() else { return false };
        let promise = window.navigator().clipboard().write_text(text);
        JsFuture::from(promise).await.is_ok()
    }
}

#[cfg(feature = "hydrate")]
pub use browser::{
    LocalFile, call, chat_at_latest, chat_near_oldest, chat_to_latest, console_error, copy_text,
    dropped_files, every_second, go, local_time, mark_hydrated, now_ms, page_data, pasted_files,
    picked_files, set_text, set_title, title, upload,
};

#[cfg(not(feature = "hydrate"))]
mod inert {
    use serde_json::Value;

    use super::Failure;

    pub async fn call(
        _method: &str,
        _path: &str,
        _body: Option<Value>,
        _csrf: Option<&str>,
    ) -> Result<Value, Failure> {
        Err(Failure::from_answer(0, &Value::Null))
    }

    pub fn console_error(_message: &str) {}

    /// Never made on the server: no one picks files there.
    pub struct LocalFile;

    impl LocalFile {
        pub fn name(&self) -> String {
            String::new()
        }

        pub fn size(&self) -> u64 {
            0
        }

        pub fn is_image(&self) -> bool {
            false
        }
    }

    pub fn picked_files(_ev: &leptos::ev::Event) -> Vec<LocalFile> {
        Vec::new()
    }

    pub fn pasted_files(_ev: &leptos::ev::ClipboardEvent) -> Vec<LocalFile> {
        Vec::new()
    }

    pub fn dropped_files(_ev: &leptos::ev::DragEvent) -> Vec<LocalFile> {
        Vec::new()
    }

    pub async fn upload(_path: &str, _file: &LocalFile, _csrf: &str) -> Result<Value, Failure> {
        Err(Failure::from_answer(0, &Value::Null))
    }

    pub fn go(_path: &str) {}

    pub fn now_ms() -> i64 {
        0
    }

    pub fn chat_at_latest() -> bool {
        true
    }

    pub fn chat_to_latest() {}

    pub fn chat_near_oldest() -> bool {
        false
    }

    pub fn title() -> String {
        String::new()
    }

    pub fn local_time(_rfc3339: &str) -> String {
        String::new()
    }

    pub fn set_title(_title: &str) {}

    pub fn set_text(_css: &str, _text: &str) {}

    pub fn every_second(_tick: impl Fn() + 'static) {}

    pub async fn copy_text(_text: &str) -> bool {
        false
    }
}

#[cfg(not(feature = "hydrate"))]
pub use inert::{
    LocalFile, call, chat_at_latest, chat_near_oldest, chat_to_latest, console_error, copy_text,
    dropped_files, every_second, go, local_time, now_ms, pasted_files, picked_files, set_text,
    set_title, title, upload,
};

/// Runs a future in the browser (event handlers); nothing in the server build.
pub fn spawn(future: impl std::future::Future<Output = ()> + 'static) {
    #[cfg(feature = "hydrate")]
    leptos::task::spawn_local(future);
    #[cfg(not(feature = "hydrate"))]
    drop(future);
}
