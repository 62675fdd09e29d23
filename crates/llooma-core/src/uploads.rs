//! An upload's bytes while they arrive and wait for their turn to be prepared.
//!
//! Files are prepared one at a time (a 12-megapixel photo decodes to some 40 MB of pixels), so
//! when many people upload at once most bodies wait. They wait in memory while the uploads held
//! there take less than [`HELD_IN_MEMORY_BYTES`] in all, else in an unnamed file in the data
//! directory, which the system removes when it is closed, even after a crash. Memory then stays
//! bounded however many uploads arrive, and nobody waits for room: a slow phone line holding
//! its share does not hold up anyone else.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;

use tokio::io::AsyncWriteExt as _;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::{App, AppError};

/// Upload bodies held in memory at once, across every upload of the process: a few phone
/// photos. Beyond it a body waits on disk, which costs a write and a read of its bytes (a few
/// milliseconds for a photo, beside the quarter of a second its preparation takes).
pub const HELD_IN_MEMORY_BYTES: usize = 16 * 1024 * 1024;
/// The memory room is counted in KiB (a semaphore's permits are `u32`).
const ROOM_UNIT: usize = 1024;
/// What is written to a waiting file at once.
const DISK_BUFFER_BYTES: usize = 256 * 1024;

/// The room uploads share while they wait.
#[derive(Clone, Debug)]
pub(crate) struct UploadRoom {
    memory: Arc<Semaphore>,
    /// Where bodies wait when memory is taken: `<data_dir>/uploads`.
    spill_dir: Arc<PathBuf>,
}

impl UploadRoom {
    pub(crate) fn new(spill_dir: PathBuf) -> UploadRoom {
        UploadRoom {
            memory: Arc::new(Semaphore::new(HELD_IN_MEMORY_BYTES / ROOM_UNIT)),
            spill_dir: Arc::new(spill_dir),
        }
    }
}

/// An upload's bytes as they arrive, in memory or in a file of their own.
#[derive(Debug)]
pub struct ArrivingUpload {
    held: Held,
    len: u64,
}

#[derive(Debug)]
enum Held {
    /// `_room` is this body's share of [`HELD_IN_MEMORY_BYTES`], given back when it is dropped.
    Memory {
        bytes: Vec<u8>,
        _room: OwnedSemaphorePermit,
    },
    Disk {
        file: tokio::io::BufWriter<tokio::fs::File>,
    },
}

/// An upload's bytes, whole, and the memory share they hold until dropped.
pub(crate) struct ArrivedUpload {
    pub(crate) bytes: Vec<u8>,
    pub(crate) _room: Option<OwnedSemaphorePermit>,
}

fn disk_error(err: &std::io::Error) -> AppError {
    tracing::error!(error = %err, "an upload could not wait on disk");
    AppError::Internal(format!(
        "The server could not keep the upload on disk ({err}); an operator should check that \
         the data directory is writable and has room."
    ))
}

impl App {
    /// A place for an upload's bytes: memory when `declared` (its length, when the sender
    /// said it) fits in the room left, else a file. A body of unknown length waits on disk.
    pub async fn arriving_upload(&self, declared: Option<u64>) -> Result<ArrivingUpload, AppError> {
        let room = &self.upload_room;
        let in_memory = declared
            .and_then(|len| usize::try_from(len).ok())
            .filter(|len| *len <= HELD_IN_MEMORY_BYTES)
            .and_then(|len| Some((len, u32::try_from(len.div_ceil(ROOM_UNIT)).ok()?)));
        if let Some((len, units)) = in_memory
            && let Ok(room) = Arc::clone(&room.memory).try_acquire_many_owned(units)
        {
            let bytes = Vec::with_capacity(len);
            return Ok(ArrivingUpload { held: Held::Memory { bytes, _room: room }, len: 0 });
        }
        let dir = Arc::clone(&room.spill_dir);
        let file = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(dir.as_path())?;
            tempfile::tempfile_in(dir.as_path())
        })
        .await
        .map_err(|err| AppError::Internal(format!("opening a file for an upload: {err}")))?
        .map_err(|err| disk_error(&err))?;
        let file = tokio::io::BufWriter::with_capacity(DISK_BUFFER_BYTES, file.into());
        Ok(ArrivingUpload { held: Held::Disk { file }, len: 0 })
    }
}

impl ArrivingUpload {
    /// Adds the next bytes of the body.
    pub async fn put(&mut self, chunk: &[u8]) -> Result<(), AppError> {
        match &mut self.held {
            Held::Memory { bytes, .. } => bytes.extend_from_slice(chunk),
            Held::Disk { file } => file.write_all(chunk).await.map_err(|err| disk_error(&err))?,
        }
        self.len = self.len.saturating_add(chunk.len() as u64);
        Ok(())
    }

    /// The bytes received so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing has arrived.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole body in memory, read back from its file if it waited on disk.
    pub(crate) async fn arrived(self) -> Result<ArrivedUpload, AppError> {
        match self.held {
            Held::Memory { bytes, _room } => Ok(ArrivedUpload { bytes, _room: Some(_room) }),
            Held::Disk { mut file } => {
                file.flush().await.map_err(|err| disk_error(&err))?;
                let mut file = file.into_inner().into_std().await;
                let len = usize::try_from(self.len).unwrap_or(0);
                let bytes = tokio::task::spawn_blocking(move || {
                    file.seek(SeekFrom::Start(0))?;
                    let mut bytes = Vec::with_capacity(len);
                    file.read_to_end(&mut bytes)?;
                    Ok::<_, std::io::Error>(bytes)
                })
                .await
                .map_err(|err| AppError::Internal(format!("reading an upload back: {err}")))?
                .map_err(|err| disk_error(&err))?;
                Ok(ArrivedUpload { bytes, _room: None })
            }
        }
    }
}
