//! Long conversations: how much of its model's context window a turn fills, and, when it would
//! fill too much, which of the oldest messages a summary stands for from then on. No IO: the
//! turn ([`crate::conversations`]) asks the model for the summary and stores it.
//!
//! Sizes are estimated as the usage estimates are (a token per four bytes as sent): a provider
//! reports what a request used only after it was made, and the decision is made before.
//!
//! ```text
//!  window ──────────────────────────────────────────────────────────────────┐
//!  │ system prompt, summary │ messages kept word for word │ new message │ tools, reply │
//!  └──────── at most FILL_PERCENT of the window, else summarize ─────────────┘
//!  after a summary:  fixed part + kept messages ≤ KEPT_PERCENT
//! ```

use std::ops::Range;

/// Estimated bytes per token.
pub const BYTES_PER_TOKEN: usize = 4;

/// A turn may fill this share (in percent) of the window with its prompts and messages before
/// the oldest are summarized; the rest is for the tools offered and the reply.
pub const FILL_PERCENT: u64 = 75;

/// After a summary, the prompts and the messages kept word for word fill at most this share.
pub const KEPT_PERCENT: u64 = 45;

/// A request that writes a summary is sent at most this share of the window to summarize.
pub const SUMMARY_INPUT_PERCENT: u64 = 55;

/// A summary is at most this share of the window, and at most [`MAX_SUMMARY_TOKENS`].
pub const SUMMARY_PERCENT: u64 = 12;

/// The longest summary asked for, in tokens.
pub const MAX_SUMMARY_TOKENS: u64 = 2048;

/// The smallest and largest window an administrator may write, in tokens.
pub const MIN_WINDOW_TOKENS: u32 = 1024;
pub const MAX_WINDOW_TOKENS: u32 = 10_000_000;

/// Tokens estimated for `bytes` as sent.
pub fn tokens_of(bytes: usize) -> u64 {
    bytes.div_ceil(BYTES_PER_TOKEN) as u64
}

/// The longest summary asked of the model for a window of `window` tokens.
pub fn summary_tokens(window: u32) -> u64 {
    (u64::from(window) * SUMMARY_PERCENT / 100).min(MAX_SUMMARY_TOKENS)
}

/// Whether a turn sending `bytes` in all (prompts and messages) fills more of a window of
/// `window` tokens than it may.
pub fn too_full(window: u32, bytes: usize) -> bool {
    tokens_of(bytes) * 100 > u64::from(window) * FILL_PERCENT
}

/// Whether the prompts and the new message alone (`fixed` bytes) leave no room in the window
/// at all: no summary can help; the person must shorten the message or choose another model.
pub fn hopeless(window: u32, fixed: usize) -> bool {
    tokens_of(fixed) * 100 > u64::from(window) * 90
}

/// One earlier message as the decision sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sized {
    pub from_person: bool,
    /// Bytes as sent.
    pub bytes: usize,
}

/// How many of the oldest `messages` a new summary covers so that the prompts (`fixed` bytes,
/// the new message included) and the messages kept fit [`KEPT_PERCENT`] of the window with the
/// summary: the newest messages are kept while they fit, and what is kept starts with the
/// person's message (the model reads an exchange whole). `None` when nothing would be covered.
pub fn covered(window: u32, fixed: usize, messages: &[Sized]) -> Option<usize> {
    let room = (u64::from(window) * KEPT_PERCENT / 100)
        .saturating_sub(tokens_of(fixed))
        .saturating_sub(summary_tokens(window));
    let mut used = 0;
    let mut kept_from = messages.len();
    while kept_from > 0 {
        let next = used + tokens_of(messages[kept_from - 1].bytes);
        if next > room {
            break;
        }
        used = next;
        kept_from -= 1;
    }
    // What is kept begins with one of the person's messages.
    while kept_from < messages.len() && !messages[kept_from].from_person {
        kept_from += 1;
    }
    (kept_from > 0).then_some(kept_from)
}

/// The covered messages split into the requests that summarize them, oldest first: each sends
/// the summary so far and messages of at most [`SUMMARY_INPUT_PERCENT`] of the window. A
/// message larger than that goes alone (and is cut to it when sent, see [`cut_to`]).
pub fn batches(window: u32, bytes: &[usize]) -> Vec<Range<usize>> {
    let room = input_bytes(window);
    let mut batches = Vec::new();
    let mut start = 0;
    let mut filled = 0;
    for (i, &size) in bytes.iter().enumerate() {
        if i > start && filled + size > room {
            batches.push(start..i);
            start = i;
            filled = 0;
        }
        filled += size;
    }
    if start < bytes.len() {
        batches.push(start..bytes.len());
    }
    batches
}

/// Bytes of messages one summarizing request may carry: its share of the window, less the
/// summary so far and the one it writes.
pub fn input_bytes(window: u32) -> usize {
    let tokens = (u64::from(window) * SUMMARY_INPUT_PERCENT / 100)
        .saturating_sub(2 * summary_tokens(window));
    usize::try_from(tokens).unwrap_or(usize::MAX / BYTES_PER_TOKEN).max(256) * BYTES_PER_TOKEN
}

/// `text` cut to at most `bytes` (at a character boundary), marked as cut.
pub fn cut_to(text: &str, bytes: usize) -> String {
    if text.len() <= bytes {
        return text.to_owned();
    }
    let mut end = bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[… the rest of this message is left out]", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(n: usize, bytes: usize) -> Vec<Sized> {
        (0..n).map(|i| Sized { from_person: i % 2 == 0, bytes }).collect()
    }

    #[test]
    fn a_turn_summarizes_only_past_three_quarters_of_its_window() {
        assert!(!too_full(8192, 8192 * 3));
        assert!(too_full(8192, 8192 * 4 * 3 / 4 + 4));
        assert!(!hopeless(8192, 8192 * 3));
        assert!(hopeless(8192, 8192 * 4));
    }

    #[test]
    fn the_newest_messages_are_kept_within_their_share_and_begin_with_the_persons() {
        // 40 messages of 400 bytes (100 tokens each) in a 4096-token window with 800 bytes
        // (200 tokens) of prompts.
        let messages = exchange(40, 400);
        let through = covered(4096, 800, &messages).unwrap();
        let kept = &messages[through..];
        assert!(kept[0].from_person);
        let kept_tokens: u64 = kept.iter().map(|m| tokens_of(m.bytes)).sum();
        let room = 4096 * KEPT_PERCENT / 100 - 200 - summary_tokens(4096);
        assert!(kept_tokens <= room, "{kept_tokens} > {room}");
        // One more exchange would not have fitted.
        assert!(kept_tokens + 200 > room, "{kept_tokens} kept of {room}");
    }

    #[test]
    fn a_last_message_too_large_to_keep_is_covered_with_the_rest() {
        let mut messages = exchange(4, 100);
        messages.push(Sized { from_person: true, bytes: 100_000 });
        assert_eq!(covered(2048, 100, &messages), Some(5));
        assert_eq!(covered(2048, 100, &[]), None);
        // Everything fits already: nothing to cover.
        assert_eq!(covered(100_000, 100, &exchange(4, 100)), None);
    }

    #[test]
    fn covered_messages_are_summarized_in_batches_that_fit_a_request() {
        let room = input_bytes(4096);
        let sizes = vec![room / 3; 7];
        let split = batches(4096, &sizes);
        assert_eq!(split, vec![0..3, 3..6, 6..7]);
        // A message larger than a request goes alone.
        assert_eq!(batches(4096, &[10, room * 2, 10]), vec![0..1, 1..2, 2..3]);
        assert!(batches(4096, &[]).is_empty());
    }

    #[test]
    fn a_message_is_cut_at_a_character_boundary_and_says_so() {
        assert_eq!(cut_to("short", 10), "short");
        let cut = cut_to("ééééé", 3);
        assert!(cut.starts_with('é') && !cut.starts_with("éé"), "{cut}");
        assert!(cut.contains("left out"));
    }
}
