//! MCP server and tool icons, served from the instance.
//!
//! A server names its icons by address; a page that loaded them from there would tell that
//! address who reads the page and when, run whatever an SVG carries, and reach addresses the
//! instance's network policy keeps closed. So the page asks the instance, which fetches the icon
//! the server's snapshot names (the MCP outbound policy applies, no token is sent), keeps it only
//! if its bytes are a raster image, and serves the picture encoded anew from its pixels alone:
//! whatever else the file carried is gone.
//!
//! Kept per process, by address ([`crate::icon_cache`]).

use std::sync::Arc;

use llooma_mcp_client::McpError;
use llooma_media::{ImageLimits, MediaError, prepare_image};

use crate::app::App;
use crate::error::AppError;
use crate::icon_cache::{Kept, ServedIcon};
use crate::mcp_servers::parse_snapshot;

/// What icons are made into: small, and bounded before their pixels are decoded.
fn icon_limits() -> ImageLimits {
    ImageLimits {
        max_side: 4096,
        max_pixels: 4_000_000,
        longest_side: 96,
        thumbnail_side: 96,
        jpeg_quality: 90,
    }
}

/// Why an icon's bytes are not shown, in words for the person.
fn unreadable(err: &MediaError) -> String {
    match err {
        MediaError::NotImage { found } => {
            format!("the icon is {found}, not a PNG, JPEG, GIF or WebP image, so it is not shown")
        }
        _ => "the icon's picture is damaged or too large to show".to_owned(),
    }
}

impl App {
    /// The icon of an account's MCP server (`tool: None`) or of one of its tools, as the stored
    /// snapshot names it: fetched once, checked, encoded anew. `NotFound` when the server is not
    /// the account's, is suspended, or names no icon usable here; `Unprocessable` (with why) when
    /// the icon could not be fetched or is not a raster image.
    pub async fn mcp_icon(
        &self,
        account_id: &str,
        server_id: &str,
        tool: Option<&str>,
    ) -> Result<Arc<ServedIcon>, AppError> {
        let server =
            self.store.mcp_server(account_id, server_id).await?.ok_or(AppError::NotFound)?;
        if server.suspension.is_some() {
            return Err(AppError::NotFound);
        }
        let snapshot = parse_snapshot(self, &server)?;
        let src = match tool {
            None => snapshot.server.icon.clone(),
            Some(name) => {
                snapshot.tools.iter().find(|t| t.name == name).and_then(|t| t.icon.clone())
            }
        }
        .ok_or(AppError::NotFound)?;
        let entry = match self.icons.get(&src) {
            Some(entry) => entry,
            None => {
                let _turn = self.icons.fetches.acquire().await.map_err(|_| {
                    AppError::Internal("the icon fetches' semaphore is closed".into())
                })?;
                // Another request may have fetched it while this one waited.
                match self.icons.get(&src) {
                    Some(entry) => entry,
                    None => {
                        let entry = self.fetch_icon(&src).await;
                        self.icons.put(&src, entry.clone());
                        entry
                    }
                }
            }
        };
        match entry {
            Kept::Icon(icon) => Ok(icon),
            Kept::Failed(why) => Err(AppError::unprocessable("icon_unavailable", why)),
        }
    }

    async fn fetch_icon(&self, src: &str) -> Kept {
        let bytes = match self.mcp.fetch_icon(src).await {
            Ok(bytes) => bytes,
            Err(err) => {
                let why = match err {
                    McpError::TooLarge { .. } => format!(
                        "the icon is larger than {} KiB, so it is not shown",
                        llooma_mcp_client::MAX_ICON_BYTES / 1024
                    ),
                    McpError::Refused { reason, .. } => {
                        format!("the icon's address was not contacted: {reason}")
                    }
                    other => format!("the icon could not be fetched: {other}"),
                };
                return Kept::Failed(why);
            }
        };
        // Decoding is CPU work: off the async threads.
        let prepared =
            tokio::task::spawn_blocking(move || prepare_image(&bytes, &icon_limits())).await;
        match prepared {
            Ok(Ok(image)) => Kept::Icon(Arc::new(ServedIcon {
                bytes: bytes::Bytes::from(image.bytes),
                content_type: image.content_type,
            })),
            Ok(Err(err)) => Kept::Failed(unreadable(&err)),
            Err(_) => Kept::Failed("the icon could not be read".to_owned()),
        }
    }
}
