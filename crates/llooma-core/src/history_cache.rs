//! The messages of conversations that had a turn lately, kept between their turns, each under
//! the history version the database had when they were read or written (m0019): a turn names
//! that version and the messages are read again only when it is no longer the conversation's.
//! Reading a history costs more the longer it is, and every turn needs it. They are kept written
//! out as the provider receives them ([`EncodedMessages`]), so a turn neither copies nor writes
//! them out again (work that also grew with the history).
//!
//! Why a kept history is never wrong: the database moves a conversation's version by one for
//! every message inserted, deleted or updated, by anyone, and never moves it back. A turn that
//! read its messages at version `v` and then wrote the person's message and (unless empty) the
//! reply keeps them, with those two, under `v + 1 + 1`; if anything else changed them
//! meanwhile the version is past that, and never comes back to it, so the next turn reads them
//! again.
//!
//! Bounded: at most [`MAX_BYTES`] of messages in all, the conversations used longest ago
//! dropped first; a conversation whose messages alone exceed [`MAX_ENTRY_BYTES`] is not kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use llooma_providers::{EncodedMessages, Message};

/// Messages kept in all, in bytes as sent.
pub(crate) const MAX_BYTES: usize = 8 * 1024 * 1024;
/// Messages kept for one conversation, in bytes as sent.
pub(crate) const MAX_ENTRY_BYTES: usize = 1024 * 1024;

/// A conversation's messages, oldest first, as of `version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HeldHistory {
    pub(crate) version: i64,
    pub(crate) messages: EncodedMessages,
}

/// The kept histories of this process; cheap to clone (shared).
#[derive(Clone, Debug, Default)]
pub(crate) struct HistoryCache(Arc<Mutex<Kept>>);

#[derive(Debug, Default)]
struct Kept {
    entries: HashMap<String, Entry>,
    bytes: usize,
    /// Counts uses: the entry with the lowest `used` was used longest ago.
    clock: u64,
}

impl Kept {
    /// Takes the conversation's entry out, and its text out of the count.
    fn remove(&mut self, conversation_id: &str) {
        if let Some(old) = self.entries.remove(conversation_id) {
            self.bytes -= old.bytes;
        }
    }
}

#[derive(Debug)]
struct Entry {
    held: HeldHistory,
    bytes: usize,
    used: u64,
}

/// What `messages` hold: their bytes as sent, and each one's share.
fn bytes_of(messages: &EncodedMessages) -> usize {
    messages.bytes() + messages.len() * PER_MESSAGE
}

/// A kept message's own cost beside its text: its shared pointer and the count beside it.
const PER_MESSAGE: usize = 48;

impl HistoryCache {
    fn kept(&self) -> MutexGuard<'_, Kept> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The conversation's kept messages, if any, taken out: the turn that takes them puts them
    /// back with its own two ([`KeepHistory::after_turn`]), so neither copies nor drops them
    /// (each is a shared pointer to count up and down: a long conversation has thousands). A
    /// turn that fails first leaves none kept, and the next one reads them.
    pub(crate) fn take(&self, conversation_id: &str) -> Option<HeldHistory> {
        let mut kept = self.kept();
        let entry = kept.entries.remove(conversation_id)?;
        kept.bytes -= entry.bytes;
        Some(entry.held)
    }

    /// Keeps `messages` as the conversation's at `version`, in place of what was kept.
    pub(crate) fn put(&self, conversation_id: &str, version: i64, messages: EncodedMessages) {
        let bytes = bytes_of(&messages);
        let mut kept = self.kept();
        kept.remove(conversation_id);
        if bytes > MAX_ENTRY_BYTES {
            return;
        }
        while kept.bytes + bytes > MAX_BYTES {
            let Some(oldest) =
                kept.entries.iter().min_by_key(|(_, e)| e.used).map(|(id, _)| id.clone())
            else {
                break;
            };
            kept.remove(&oldest);
        }
        kept.clock += 1;
        let used = kept.clock;
        kept.bytes += bytes;
        let held = HeldHistory { version, messages };
        kept.entries.insert(conversation_id.to_owned(), Entry { held, bytes, used });
    }

    /// Drops what is kept of the conversation.
    pub(crate) fn forget(&self, conversation_id: &str) {
        self.kept().remove(conversation_id);
    }

    /// Bytes kept in all, with each message's own share.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.kept().bytes
    }
}

/// A turn's messages, the person's new one last, to be kept with its reply once the turn has
/// stored it.
#[derive(Debug)]
pub(crate) struct KeepHistory {
    /// The version they were read (or held) at, before the turn wrote the person's message.
    pub(crate) version: i64,
    pub(crate) messages: EncodedMessages,
    /// The turn stored a summary of the oldest of them (and dropped those): that moved the
    /// version by one too (m0028).
    pub(crate) summarized: bool,
}

impl KeepHistory {
    /// Keeps the messages with `reply`, once the turn stored it: the person's message moved
    /// the version by one, a summary by one, the reply by one more unless it is empty (it is
    /// not stored then).
    pub(crate) fn after_turn(mut self, cache: &HistoryCache, conversation_id: &str, reply: &str) {
        let mut version = self.version + 1 + i64::from(self.summarized);
        if !reply.is_empty() {
            self.messages.push(&Message::assistant(reply));
            version += 1;
        }
        cache.put(conversation_id, version, self.messages);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn history(text: &str, n: usize) -> EncodedMessages {
        let messages: Vec<Message> = (0..n)
            .map(|i| if i % 2 == 0 { Message::user(text) } else { Message::assistant(text) })
            .collect();
        EncodedMessages::encode(&messages)
    }

    #[test]
    fn a_history_is_given_back_under_the_version_it_was_kept_at_until_replaced_or_forgotten() {
        let cache = HistoryCache::default();
        assert_eq!(cache.take("c"), None);
        cache.put("c", 4, history("hi", 2));
        let held = cache.take("c").unwrap();
        assert_eq!((held.version, held.messages.len()), (4, 2));
        // Taken out: a second turn at once would read them.
        assert_eq!((cache.take("c"), cache.bytes()), (None, 0));
        cache.put("c", 4, history("hi", 2));
        cache.put("c", 6, history("hi", 4));
        assert_eq!(cache.bytes(), bytes_of(&history("hi", 4)));
        assert_eq!(cache.take("c").unwrap().version, 6);
        cache.put("c", 6, history("hi", 4));
        cache.forget("c");
        assert_eq!((cache.take("c"), cache.bytes()), (None, 0));
    }

    #[test]
    fn the_conversations_used_longest_ago_go_first_when_the_text_kept_would_pass_the_bound() {
        let cache = HistoryCache::default();
        let quarter = history(&"x".repeat(MAX_ENTRY_BYTES / 4), 3);
        let each = bytes_of(&quarter);
        let fit = MAX_BYTES / each;
        for i in 0..fit {
            cache.put(&format!("c{i}"), 1, quarter.clone());
        }
        assert_eq!(cache.bytes(), fit * each);
        // Used again (taken and put back by a turn): now c1 is the one used longest ago.
        let c0 = cache.take("c0").unwrap();
        cache.put("c0", 3, c0.messages);
        cache.put("new", 1, quarter.clone());
        assert!(cache.bytes() <= MAX_BYTES);
        assert!(cache.take("c0").is_some());
        assert!(cache.take("c1").is_none());
        assert!(cache.take("new").is_some());
    }

    #[test]
    fn a_history_larger_than_one_conversation_may_hold_is_not_kept() {
        let cache = HistoryCache::default();
        cache.put("c", 1, history("small", 2));
        cache.put("c", 3, history(&"x".repeat(MAX_ENTRY_BYTES), 1));
        assert_eq!((cache.take("c"), cache.bytes()), (None, 0), "nor the smaller one before it");
    }
}
