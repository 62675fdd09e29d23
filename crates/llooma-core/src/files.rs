//! Files a person attaches to a message: received, made safe (an image scaled and stripped of
//! its metadata, a document's text extracted), stored, served back to their owner only, and
//! given to the model in the form it can use: an image as an image to a model that sees images,
//! a document's text as a labelled block it cannot mistake for the person's words.
//!
//! What the bytes are is decided from the bytes (`llooma_media::sniff`), never from the name or
//! the browser's type; a name that says otherwise is refused. Decoding and extraction run on a
//! blocking thread, bounded before they start (sizes, pixels, pages).

use std::collections::HashMap;
use std::sync::Arc;

use base64::Engine as _;
use llooma_media::{ImageLimits, Kind, TextLimits};
use llooma_memory_guard::wrap_file;
use llooma_store::{AddFileError, FileKind, NewFile, SentFile, StoredFile};
use llooma_types::FileView;

use crate::uploads::{ArrivedUpload, ArrivingUpload};
use crate::{App, AppError};

/// How large a file a person may send, and how much their files may take in all.
#[derive(Clone, Copy, Debug)]
pub struct FileLimits {
    /// The largest upload, in bytes (before an image is scaled).
    pub max_upload_bytes: u64,
    /// What one account's stored files may take in all, in bytes.
    pub account_quota_bytes: u64,
}

impl Default for FileLimits {
    fn default() -> Self {
        FileLimits { max_upload_bytes: 25 * 1024 * 1024, account_quota_bytes: 1024 * 1024 * 1024 }
    }
}

/// The most files one message brings.
pub const MAX_FILES_PER_MESSAGE: usize = 10;
/// A document's text as the model gets it, in bytes at most (the extraction cuts at 100,000
/// characters before; this bounds what neutralizing may add).
const DOCUMENT_CAP_BYTES: usize = 512 * 1024;
/// The longest file name kept, in characters.
const MAX_NAME_CHARS: usize = 200;

/// A file as the API shows it.
pub fn file_view(file: &StoredFile) -> FileView {
    FileView {
        url: format!("/api/v1/files/{}", file.id),
        thumbnail_url: (file.kind == FileKind::Image)
            .then(|| format!("/api/v1/files/{}/thumbnail", file.id)),
        id: file.id.clone(),
        name: file.name.clone(),
        kind: match file.kind {
            FileKind::Image => "image",
            FileKind::Document => "document",
        }
        .to_owned(),
        content_type: file.content_type.clone(),
        size: u64::try_from(file.size_bytes).unwrap_or(0),
        width: file.width.and_then(|w| u32::try_from(w).ok()),
        height: file.height.and_then(|h| u32::try_from(h).ok()),
        text_chars: file.text_chars.and_then(|c| u64::try_from(c).ok()),
        cut: file.text_cut,
        sent: file.turn_id.is_some(),
    }
}

/// What a received file became, ready to store.
struct Prepared {
    kind: FileKind,
    content_type: String,
    bytes: Vec<u8>,
    thumbnail: Option<Vec<u8>>,
    text: Option<String>,
    width: Option<u32>,
    height: Option<u32>,
    text_cut: bool,
}

/// Decides what `bytes` are and makes them safe to keep; the error says what the person can do.
fn prepare(name: &str, bytes: &[u8]) -> Result<Prepared, AppError> {
    if bytes.is_empty() {
        return Err(AppError::unprocessable("empty_file", format!("{name} is empty.")));
    }
    let sniffed = llooma_media::sniff(bytes, name);
    if let Some(problem) = llooma_media::mismatch(&sniffed, name) {
        return Err(AppError::unprocessable("not_what_its_name_says", format!("{problem}.")));
    }
    let refused =
        |err: llooma_media::MediaError| AppError::unprocessable("unusable_file", err.to_string());
    match sniffed.kind {
        Kind::Image(_) => {
            let image =
                llooma_media::prepare_image(bytes, &ImageLimits::default()).map_err(refused)?;
            Ok(Prepared {
                kind: FileKind::Image,
                content_type: image.content_type.to_owned(),
                bytes: image.bytes,
                thumbnail: Some(image.thumbnail),
                text: None,
                width: Some(image.width),
                height: Some(image.height),
                text_cut: false,
            })
        }
        Kind::Pdf | Kind::Text(_) => {
            let text = llooma_media::extract_text(bytes, &sniffed, &TextLimits::default())
                .map_err(refused)?;
            Ok(Prepared {
                kind: FileKind::Document,
                content_type: sniffed.content_type.to_owned(),
                bytes: bytes.to_vec(),
                thumbnail: None,
                text: Some(text.text),
                width: None,
                height: None,
                text_cut: text.cut,
            })
        }
        Kind::Audio(_) | Kind::Unknown => Err(AppError::unprocessable(
            "unsupported_file",
            format!(
                "{name} is not an image (JPEG, PNG, GIF, WebP), a PDF or a text file; those are \
                 what a message can carry."
            ),
        )),
    }
}

/// The name kept for a file: what the browser sent, without path or control characters.
fn clean_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let cleaned: String = base.chars().filter(|c| !c.is_control()).take(MAX_NAME_CHARS).collect();
    let cleaned = cleaned.trim();
    if cleaned.is_empty() { "file".to_owned() } else { cleaned.to_owned() }
}

/// A `data:` URL of an image's bytes.
fn data_url(file: &SentFile) -> Arc<str> {
    let encoded = base64::engine::general_purpose::STANDARD.encode(&file.bytes);
    Arc::from(format!("data:{};base64,{encoded}", file.file.content_type))
}

/// What a model is given of a message's files: the person's text with each document's text
/// wrapped after it, and the images (as `data:` URLs to a model that sees images, else a note
/// in the text that one was attached).
pub(crate) fn message_with_files(
    text: &str,
    files: &[SentFile],
    sees_images: bool,
) -> (String, Vec<Arc<str>>) {
    let mut content = text.to_owned();
    let mut images = Vec::new();
    for file in files {
        match file.file.kind {
            FileKind::Image if sees_images => images.push(data_url(file)),
            FileKind::Image => {
                content.push_str(&format!(
                    "\n\n[The person attached an image, {:?}, which this model cannot see.]",
                    file.file.name
                ));
            }
            FileKind::Document => {
                let wrapped =
                    wrap_file(&file.file.name, &file.text, DOCUMENT_CAP_BYTES, file.file.text_cut);
                content.push_str("\n\n");
                content.push_str(wrapped.as_str());
            }
        }
    }
    // Without words of the person's, the first block leads.
    (content.trim_start().to_owned(), images)
}

/// A conversation's sent files grouped by the turn whose message carries them.
pub(crate) fn by_turn(files: Vec<SentFile>) -> HashMap<String, Vec<SentFile>> {
    let mut grouped: HashMap<String, Vec<SentFile>> = HashMap::new();
    for file in files {
        if let Some(turn) = file.file.turn_id.clone() {
            grouped.entry(turn).or_default().push(file);
        }
    }
    grouped
}

impl App {
    /// Receives a file the person attaches in a conversation of theirs; it waits, unsent, for
    /// the message that carries it.
    pub async fn upload_file(
        &self,
        account_id: &str,
        conversation_id: &str,
        name: &str,
        body: ArrivingUpload,
    ) -> Result<FileView, AppError> {
        self.conversation(account_id, conversation_id).await?;
        let name = clean_name(name);
        let prepared = {
            let name = name.clone();
            // One file prepared at a time: a 12-megapixel photo decodes to some 40 MB of pixels,
            // and ten people uploading at once must not hold ten of them.
            let _turn = self
                .file_work
                .acquire()
                .await
                .map_err(|_| AppError::Internal("the file queue is closed".to_owned()))?;
            // Its share of the memory room is given back once its bytes are gone.
            let ArrivedUpload { bytes, _room: _held } = body.arrived().await?;
            tokio::task::spawn_blocking(move || prepare(&name, &bytes))
                .await
                .map_err(|err| AppError::Internal(format!("preparing a file: {err}")))??
        };
        let new = NewFile {
            id: uuid::Uuid::now_v7().to_string(),
            account_id: account_id.to_owned(),
            conversation_id: conversation_id.to_owned(),
            name,
            kind: prepared.kind,
            content_type: prepared.content_type,
            bytes: prepared.bytes,
            thumbnail: prepared.thumbnail,
            text: prepared.text,
            width: prepared.width,
            height: prepared.height,
            text_cut: prepared.text_cut,
        };
        let quota = i64::try_from(self.file_limits.account_quota_bytes).unwrap_or(i64::MAX);
        match self.store.add_file(new, quota).await {
            Ok(stored) => Ok(file_view(&stored)),
            Err(AddFileError::Quota { used, quota }) => Err(AppError::unprocessable(
                "file_quota_exceeded",
                format!(
                    "Your files take {} of the {} this instance gives each account; delete \
                     conversations with files you no longer need, or ask an administrator.",
                    shown_bytes(used),
                    shown_bytes(quota)
                ),
            )),
            Err(AddFileError::Store(err)) => Err(err.into()),
        }
    }

    /// A file of the account, its content type and its bytes (`thumbnail`: its small
    /// version); `NotFound` for anyone else's.
    pub async fn file_bytes(
        &self,
        account_id: &str,
        id: &str,
        thumbnail: bool,
    ) -> Result<(FileView, String, Vec<u8>), AppError> {
        let (file, bytes) = self
            .store
            .file_with_bytes(account_id, id, thumbnail)
            .await?
            .ok_or(AppError::NotFound)?;
        let content_type = if thumbnail {
            // Decided from its own bytes, as the file's was.
            llooma_media::sniff(&bytes, "").content_type.to_owned()
        } else {
            file.content_type.clone()
        };
        Ok((file_view(&file), content_type, bytes))
    }

    /// How much each account's files take (an administrator's view).
    pub async fn file_usage(&self) -> Result<llooma_types::FileUsage, AppError> {
        let usage = self.store.file_usage_by_account().await?;
        let mut accounts: Vec<llooma_types::AccountFileUsage> = self
            .store
            .list_accounts()
            .await?
            .into_iter()
            .map(|account| {
                let (files, bytes) = usage
                    .iter()
                    .find(|(id, ..)| *id == account.id)
                    .map_or((0, 0), |(_, files, bytes)| (*files, *bytes));
                llooma_types::AccountFileUsage {
                    account_id: account.id,
                    username: account.username,
                    files: u64::try_from(files).unwrap_or(0),
                    bytes: u64::try_from(bytes).unwrap_or(0),
                }
            })
            .collect();
        accounts.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.username.cmp(&b.username)));
        Ok(llooma_types::FileUsage {
            max_upload_bytes: self.file_limits.max_upload_bytes,
            account_quota_bytes: self.file_limits.account_quota_bytes,
            accounts,
        })
    }

    /// Removes a file of the account that was not sent yet.
    pub async fn delete_file(&self, account_id: &str, id: &str) -> Result<(), AppError> {
        if self.store.delete_unsent_file(account_id, id).await? {
            return Ok(());
        }
        match self.store.file(account_id, id).await? {
            Some(_) => Err(AppError::conflict(
                "file_sent",
                "This file went with a message already; it goes when its conversation is deleted.",
            )),
            None => Err(AppError::NotFound),
        }
    }

    /// The limits files are held to.
    pub fn file_limits(&self) -> FileLimits {
        self.file_limits
    }
}

/// `1.5 MB`, `300 KB`: sizes for people.
pub fn shown_bytes(bytes: i64) -> String {
    let bytes = bytes.max(0) as f64;
    if bytes >= 1e9 {
        format!("{:.1} GB", bytes / 1e9)
    } else if bytes >= 1e6 {
        format!("{:.1} MB", bytes / 1e6)
    } else {
        format!("{:.0} KB", (bytes / 1e3).ceil())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_paths_and_control_characters() {
        assert_eq!(clean_name("C:\\Users\\me\\photo.jpg"), "photo.jpg");
        assert_eq!(clean_name("../../etc/passwd"), "passwd");
        assert_eq!(clean_name("a\u{0}b\nc.txt"), "abc.txt");
        assert_eq!(clean_name("  "), "file");
        assert_eq!(clean_name(&"x".repeat(500)).chars().count(), 200);
    }

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(shown_bytes(1_500_000), "1.5 MB");
        assert_eq!(shown_bytes(300_100), "301 KB");
        assert_eq!(shown_bytes(1_073_741_824), "1.1 GB");
    }
}
