//! What a person attaches, made safe to keep and to send to a model.
//!
//! Pure functions of bytes: no IO, no async runtime, no global state. Callers run them on a
//! blocking thread. Every function is bounded before it does expensive work: an image's size is
//! read from its header and refused before its pixels are decoded; a PDF's page count and the
//! bytes its compressed streams expand to are checked before its text is extracted.
//!
//! - [`sniff`] says what bytes are, from the bytes, and the one content type they are served
//!   with; [`mismatch`] compares that with what a file's name promises.
//! - [`prepare_image`] decodes, turns upright, scales and encodes an image anew, which drops its
//!   metadata (GPS position, device, comments), and makes a thumbnail.
//! - [`extract_text`] reads the text of a text file or a PDF, cut at a number of characters.
//!
//! Errors are [`MediaError`]s, whose messages tell the person what to do.

mod error;
#[cfg(test)]
mod fixtures;
mod images;
mod pdf;
#[cfg(test)]
mod proptests;
mod sniff;
mod text;

pub use error::MediaError;
pub use images::{ImageLimits, PreparedImage, prepare_image};
pub use sniff::{AudioFormat, ImageFormat, Kind, Sniffed, TextFormat, mismatch, sniff};
pub use text::{ExtractedText, TextLimits, extract_text};
