//! Files in a conversation: the tray of files waiting in the composer (picked, pasted or dropped,
//! each uploaded at once so the server checks it before anything is sent), and the files a sent
//! message brought (thumbnails and chips, live and after a reload).

use leptos::either::Either;
use leptos::prelude::*;
use llooma_types::FileView;

use crate::api;
use crate::layout::Sign;

/// What the picker offers; the server decides from the bytes in the end. `image/*` also brings
/// the camera on a phone.
const ACCEPTED: &str = "image/*,.pdf,.txt,.md,.markdown,.csv,.tsv,.json,.jsonl,.yaml,.yml,.toml,\
    .xml,.html,.log,.rs,.py,.js,.ts,.tsx,.jsx,.go,.java,.c,.h,.cpp,.hpp,.cs,.rb,.php,.sh,.sql,\
    .swift,.kt,.css,.scss,.ini,.cfg";

/// One file in the tray: on its way up, or stored and waiting to be sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Waiting {
    key: usize,
    name: String,
    size: u64,
    image: bool,
    /// The stored file, once the server took it.
    file: Option<FileView>,
}

/// The composer's files, with what uploading them needs.
#[derive(Clone, Copy)]
pub struct Tray {
    waiting: RwSignal<Vec<Waiting>>,
    next_key: StoredValue<usize>,
    conversation_id: StoredValue<String>,
    csrf: StoredValue<String>,
    /// Where a refused file is said (the composer's error line).
    error: RwSignal<Option<String>>,
}

impl Tray {
    /// The tray of a conversation, holding the files uploaded and not sent yet (`stored`).
    pub fn new(
        conversation_id: String,
        csrf: String,
        error: RwSignal<Option<String>>,
        stored: Vec<FileView>,
    ) -> Tray {
        let waiting = stored
            .into_iter()
            .enumerate()
            .map(|(key, file)| Waiting {
                key,
                name: file.name.clone(),
                size: file.size,
                image: file.kind == "image",
                file: Some(file),
            })
            .collect::<Vec<_>>();
        Tray {
            next_key: StoredValue::new(waiting.len()),
            waiting: RwSignal::new(waiting),
            conversation_id: StoredValue::new(conversation_id),
            csrf: StoredValue::new(csrf),
            error,
        }
    }

    /// Some file is still on its way up (tracked).
    pub fn uploading(self) -> bool {
        self.waiting.with(|w| w.iter().any(|f| f.file.is_none()))
    }

    /// The tray holds an image (tracked).
    pub fn has_images(self) -> bool {
        self.waiting.with(|w| w.iter().any(|f| f.image))
    }

    /// The tray holds a stored file (tracked).
    pub fn has_files(self) -> bool {
        self.waiting.with(|w| w.iter().any(|f| f.file.is_some()))
    }

    /// The ids of the stored files, for the message.
    pub fn ids(self) -> Vec<String> {
        self.waiting.with_untracked(|w| {
            w.iter().filter_map(|f| f.file.as_ref()).map(|f| f.id.clone()).collect()
        })
    }

    /// Empties the tray once its files went with a message; gives them for the timeline.
    pub fn take_sent(self, ids: &[String]) -> Vec<FileView> {
        let mut sent = Vec::new();
        self.waiting.update(|w| {
            w.retain(|f| match &f.file {
                Some(file) if ids.contains(&file.id) => {
                    sent.push(file.clone());
                    false
                }
                _ => true,
            });
        });
        sent
    }

    /// Uploads each file; each shows in the tray at once, and one the server refuses leaves it
    /// with the server's reason above the message box (what is typed stays).
    pub fn add(self, files: Vec<api::LocalFile>) {
        for local in files {
            let key = self.next_key.get_value();
            self.next_key.set_value(key + 1);
            let name = local.name();
            self.waiting.update(|w| {
                w.push(Waiting {
                    key,
                    name: name.clone(),
                    size: local.size(),
                    image: local.is_image(),
                    file: None,
                });
            });
            let path = format!(
                "/api/v1/conversations/{}/files?name={}",
                self.conversation_id.get_value(),
                query_escaped(&name)
            );
            api::spawn(async move {
                let answer = api::upload(&path, &local, &self.csrf.get_value()).await;
                let stored = answer.and_then(|json| {
                    serde_json::from_value::<FileView>(json).map_err(|_| api::Failure {
                        message: "The server's answer was not understood; reload the page."
                            .to_owned(),
                        code: String::new(),
                    })
                });
                match stored {
                    Ok(file) => self.waiting.update(|w| {
                        if let Some(entry) = w.iter_mut().find(|f| f.key == key) {
                            entry.image = file.kind == "image";
                            entry.file = Some(file);
                        }
                    }),
                    Err(failure) => {
                        self.waiting.update(|w| w.retain(|f| f.key != key));
                        let message = if failure.message.contains(&name) {
                            failure.message
                        } else {
                            format!("{name}: {}", failure.message)
                        };
                        self.error.set(Some(message));
                    }
                }
            });
        }
    }

    /// Takes a file out of the tray (and off the server).
    fn remove(self, key: usize) {
        let mut stored = None;
        self.waiting.update(|w| {
            stored = w.iter().find(|f| f.key == key).and_then(|f| f.file.clone());
            w.retain(|f| f.key != key);
        });
        if let Some(file) = stored {
            let path = format!("/api/v1/files/{}", file.id);
            let csrf = self.csrf.get_value();
            let error = self.error;
            api::spawn(async move {
                if let Err(failure) = api::call("DELETE", &path, None, Some(&csrf)).await {
                    error.set(Some(failure.message));
                }
            });
        }
    }
}

/// A file name as a query value: everything but letters, digits and `-._~` percent-encoded.
fn query_escaped(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A size as a person reads it: `820 B`, `14 KB`, `2.4 MB`, `1.0 GB`.
pub fn human_size(bytes: u64) -> String {
    const KB: u64 = 1024;
    const MB: u64 = 1024 * 1024;
    const GB: u64 = 1024 * MB;
    let tenths = |unit: u64| bytes.saturating_mul(10).div_ceil(unit);
    match bytes {
        b if b < KB => format!("{b} B"),
        b if b < MB => format!("{} KB", b.div_ceil(KB)),
        b if b < GB => format!("{}.{} MB", tenths(MB) / 10, tenths(MB) % 10),
        _ => format!("{}.{} GB", tenths(GB) / 10, tenths(GB) % 10),
    }
}

/// The paper clip: a hidden file input behind a label, so the browser's own chooser (and a
/// phone's camera) opens.
#[component]
pub fn FilePicker(tray: Tray) -> impl IntoView {
    view! {
        <label class="icon-button attach-file" title="Attach photos or documents">
            <input
                type="file"
                name="files"
                multiple=true
                accept=ACCEPTED
                on:change=move |ev| tray.add(api::picked_files(&ev))
            />
            <Sign class="sign" size=18>
                <path d="M20.5 11.5l-8.4 8.4a5 5 0 0 1-7.1-7.1l8.8-8.8a3.4 3.4 0 0 1 4.8 4.8l-8.8 8.8a1.8 1.8 0 0 1-2.5-2.5l8-8" />
            </Sign>
        </label>
    }
}

/// The files waiting to go with the next message.
#[component]
pub fn TrayView(tray: Tray) -> impl IntoView {
    view! {
        <ul class="tray" hidden=move || tray.waiting.with(Vec::is_empty)>
            <For
                each=move || tray.waiting.get()
                key=|w| (w.key, w.file.is_some())
                children=move |w| {
                    let key = w.key;
                    let done = w.file.is_some();
                    let label = format!("Remove {}", w.name);
                    view! {
                        <li class="waiting-file" class:uploading=!done>
                            {preview(w.file.as_ref(), &w.name, w.image)}
                            <span class="name">{w.name.clone()}</span>
                            <span class="size">
                                {if done { human_size(w.size) } else { "Uploading…".to_owned() }}
                            </span>
                            <button
                                class="remove-file"
                                type="button"
                                title=label.clone()
                                aria-label=label
                                hidden=!done
                                on:click=move |_| tray.remove(key)
                            >
                                "✕"
                            </button>
                        </li>
                    }
                }
            />
        </ul>
    }
}

/// An image's thumbnail, or a document's sign.
fn preview(file: Option<&FileView>, name: &str, image: bool) -> impl IntoView + use<> {
    match file.and_then(|f| f.thumbnail_url.clone()) {
        Some(src) if image => {
            Either::Left(view! { <img class="thumb" src=src alt=name.to_owned() /> })
        }
        _ => Either::Right(doc_sign()),
    }
}

/// A page with a folded corner: a document.
fn doc_sign() -> impl IntoView {
    view! {
        <Sign class="doc-sign" size=16>
            <path d="M6 2.5h8l4.5 4.5v14.5H6z M14 2.5V7h4.5" />
        </Sign>
    }
}

/// The files a person's message brought: images as thumbnails that open the image, documents
/// as chips with their name and size (and a notice when the model got only part of the text).
pub fn sent_files(files: &[FileView]) -> impl IntoView + use<> {
    (!files.is_empty()).then(|| {
        let items = files
            .iter()
            .map(|file| {
                if let (true, Some(thumb)) = (file.kind == "image", file.thumbnail_url.clone()) {
                    Either::Left(view! {
                        <a class="sent-image" href=file.url.clone() target="_blank" rel="noopener">
                            <img class="thumb" src=thumb alt=file.name.clone() loading="lazy" />
                        </a>
                    })
                } else {
                    let cut = file.cut.then(|| {
                        view! {
                            <span class="cut" title="The model was given the first part of the text only">
                                "cut"
                            </span>
                        }
                    });
                    Either::Right(view! {
                        <a class="file-chip" href=file.url.clone() download=file.name.clone()>
                            {doc_sign()}
                            <span class="name">{file.name.clone()}</span>
                            <span class="size">{human_size(file.size)}</span>
                            {cut}
                        </a>
                    })
                }
            })
            .collect_view();
        view! { <div class="sent-files">{items}</div> }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_a_person_reads_them() {
        let cases = [
            (0, "0 B"),
            (820, "820 B"),
            (1024, "1 KB"),
            (14 * 1024 + 1, "15 KB"),
            (1024 * 1024, "1.0 MB"),
            (2_500_000, "2.4 MB"),
            (1024 * 1024 * 1024, "1.0 GB"),
        ];
        for (bytes, want) in cases {
            assert_eq!(human_size(bytes), want, "{bytes}");
        }
    }

    #[test]
    fn names_are_escaped_for_the_query() {
        assert_eq!(query_escaped("my photo & notes.jpg"), "my%20photo%20%26%20notes.jpg");
        assert_eq!(query_escaped("été.pdf"), "%C3%A9t%C3%A9.pdf");
    }
}
