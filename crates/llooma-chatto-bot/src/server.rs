//! [`ChattoServer`]: Chatto behind the server-neutral [`ChatServer`] trait.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use chrono::{DateTime, Utc};

use crate::chat::{
    ChatMessage, ChatServer, Notice, OutgoingPost, Room, RoomKind, Speaker, Trigger,
};
use crate::client::{ChattoClient, MAX_NOTIFICATION_PAGE};
use crate::error::ChattoError;
use crate::wire::{self, CreateMessageRequest, EventPage, Message, Occurrence, SignalKind, User};

/// Pages of notifications read per poll at most: 2,000 notices within ten minutes would be a
/// flood, not a conversation.
const MAX_NOTIFICATION_PAGES: u32 = 20;
/// Pages of history read per context at most (room or thread).
const MAX_HISTORY_PAGES: usize = 10;
/// Events per thread page.
const THREAD_PAGE: u32 = 100;

/// A connected Chatto bot account. Caches user lookups for its lifetime (names rarely change
/// and a stale display name is harmless); build a new one per poll loop start.
#[derive(Debug)]
pub struct ChattoServer {
    client: ChattoClient,
    me: Speaker,
    users: Mutex<HashMap<String, Speaker>>,
}

impl ChattoServer {
    /// Checks the connection (the key is accepted and belongs to a bot) and remembers who the bot
    /// is.
    pub async fn connect(client: ChattoClient) -> Result<Self, ChattoError> {
        let me = speaker(&client.check_connection().await?);
        Ok(Self { client, me, users: Mutex::new(HashMap::new()) })
    }

    /// The wire client.
    pub fn client(&self) -> &ChattoClient {
        &self.client
    }

    fn remember(&self, users: &HashMap<String, User>) {
        let mut cache = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        for (id, user) in users {
            let mut user = user.clone();
            if user.id.is_empty() {
                user.id.clone_from(id);
            }
            cache.insert(id.clone(), speaker(&user));
        }
    }

    async fn author(&self, user_id: &str) -> Result<Speaker, ChattoError> {
        if let Some(known) =
            self.users.lock().unwrap_or_else(PoisonError::into_inner).get(user_id).cloned()
        {
            return Ok(known);
        }
        let found = match self.client.get_user(user_id).await {
            Ok(user) => speaker(&user),
            // A deleted account still wrote the message; show it by id.
            Err(ChattoError::NotFound { .. }) => Speaker {
                id: user_id.to_owned(),
                login: user_id.to_owned(),
                display_name: String::new(),
                is_bot: false,
            },
            Err(err) => return Err(err),
        };
        self.users
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(user_id.to_owned(), found.clone());
        Ok(found)
    }

    async fn translate(&self, messages: Vec<Message>) -> Result<Vec<ChatMessage>, ChattoError> {
        let mut out = Vec::with_capacity(messages.len());
        for message in messages {
            let author = self.author(&message.actor_id).await?;
            out.push(chat_message(message, author));
        }
        Ok(out)
    }

    /// The thread rooted on `root` up to `until` (one of its replies): the root, then the
    /// replies before `until`, oldest first. Pages are read newest first, to the thread's start,
    /// or, with `count`, until `count` shown replies before `until` are in hand.
    ///
    /// The cut is made by position in the thread, never by time: replies written after `until`
    /// are on the same pages (they may be there when the bot reads, and may carry the same
    /// time). When `until` is not on the pages read (more than [`MAX_HISTORY_PAGES`] pages from
    /// the thread's end, or gone), every reply read may be later than it, so none is kept.
    async fn thread_before(
        &self,
        room: &Room,
        root: &str,
        until: &str,
        count: Option<usize>,
    ) -> Result<Vec<Message>, ChattoError> {
        let mut root_message: Option<Message> = None;
        let mut replies: Vec<Message> = Vec::new();
        let mut before: Option<String> = None;
        for _ in 0..MAX_HISTORY_PAGES {
            let page = self
                .client
                .get_thread_events(&room.id, root, THREAD_PAGE, before.as_deref())
                .await?;
            self.remember(&page.includes.users);
            let (has_older, cursor) = (page.has_older, page.start_cursor.clone());
            let mut messages = messages_of(page);
            // The newest page holds the root ahead of the latest replies; it precedes them all,
            // older pages included.
            if let Some(at) = messages.iter().position(|m| m.id == root) {
                root_message = Some(messages.remove(at));
            }
            messages.append(&mut replies);
            replies = messages;
            let enough = count.is_some_and(|count| {
                replies
                    .iter()
                    .position(|m| m.id == until)
                    .is_some_and(|at| countable(&replies[..at]) >= count)
            });
            if !has_older || enough || cursor.is_empty() {
                break;
            }
            before = Some(cursor);
        }
        match replies.iter().position(|m| m.id == until) {
            Some(at) => replies.truncate(at),
            None => replies.clear(),
        }
        Ok(root_message.into_iter().chain(replies).collect())
    }
}

impl ChatServer for ChattoServer {
    type Error = ChattoError;

    fn me(&self) -> &Speaker {
        &self.me
    }

    async fn recent_notices(
        &self,
        now: DateTime<Utc>,
        max_age: chrono::Duration,
    ) -> Result<Vec<Notice>, ChattoError> {
        let cutoff = now - max_age;
        let mut notices = Vec::new();
        let mut offset = 0;
        // Newest first, paged by offset, no "since" filter: read until the page reaches what is
        // too old to answer anyway.
        for _ in 0..MAX_NOTIFICATION_PAGES {
            let list =
                self.client.list_notification_occurrences(MAX_NOTIFICATION_PAGE, offset).await?;
            let count = list.occurrences.len();
            let reached_old = list.occurrences.iter().any(|o| o.created_at < cutoff);
            notices.extend(list.occurrences.into_iter().map(notice));
            if !list.page.has_more || count == 0 || reached_old {
                break;
            }
            offset = offset.saturating_add(u32::try_from(count).unwrap_or(u32::MAX));
        }
        Ok(notices)
    }

    async fn mark_handled(&self, notification_id: &str) -> Result<(), ChattoError> {
        self.client.mark_notification_read(notification_id).await
    }

    async fn message(&self, room: &Room, event_id: &str) -> Result<ChatMessage, ChattoError> {
        let message = self.client.get_message(&room.id, event_id).await?;
        let author = self.author(&message.actor_id).await?;
        Ok(chat_message(message, author))
    }

    async fn messages_before(
        &self,
        room: &Room,
        thread_root: Option<&str>,
        event_id: &str,
        count: usize,
    ) -> Result<Vec<ChatMessage>, ChattoError> {
        if let Some(root) = thread_root {
            let messages = self.thread_before(room, root, event_id, Some(count)).await?;
            return self.translate(messages).await;
        }
        // Twice as many as needed, since the page is centred on the target and echoes or other
        // events take places too.
        let limit = u32::try_from(count.saturating_mul(2).saturating_add(1)).unwrap_or(u32::MAX);
        let around = self.client.get_room_events_around(&room.id, event_id, limit).await?;
        let mut page = around.page;
        self.remember(&page.includes.users);
        let target = page
            .events
            .iter()
            .position(|e| e.id == event_id || message_id(e) == Some(event_id))
            .unwrap_or_else(|| usize::try_from(around.target_index.max(0)).unwrap_or(0))
            .min(page.events.len());
        page.events.truncate(target);
        let (mut has_older, mut cursor) = (page.has_older, page.start_cursor.clone());
        let mut collected = messages_of(page);
        for _ in 1..MAX_HISTORY_PAGES {
            if countable(&collected) >= count || !has_older || cursor.is_empty() {
                break;
            }
            let older = self.client.get_room_events_before(&room.id, &cursor, limit).await?;
            self.remember(&older.includes.users);
            (has_older, cursor) = (older.has_older, older.start_cursor.clone());
            let mut messages = messages_of(older);
            messages.append(&mut collected);
            collected = messages;
        }
        self.translate(collected).await
    }

    async fn whole_thread(
        &self,
        room: &Room,
        thread_root: &str,
        event_id: &str,
    ) -> Result<Vec<ChatMessage>, ChattoError> {
        let messages = self.thread_before(room, thread_root, event_id, None).await?;
        self.translate(messages).await
    }

    async fn post(&self, post: &OutgoingPost) -> Result<String, ChattoError> {
        let request = CreateMessageRequest {
            room_id: post.room_id.clone(),
            body: post.body.clone(),
            thread_root_event_id: post.thread_root.clone(),
            in_reply_to: post.in_reply_to.clone(),
        };
        Ok(self.client.create_message(&request).await?.id)
    }

    async fn follow_thread(&self, room: &Room, thread_root: &str) -> Result<(), ChattoError> {
        self.client.follow_thread(&room.id, thread_root).await
    }

    async fn typing(&self, room: &Room, thread_root: Option<&str>) -> Result<(), ChattoError> {
        self.client.update_typing_indicator(&room.id, thread_root).await
    }
}

fn message_id(event: &wire::Event) -> Option<&str> {
    event.message_posted.as_ref().map(|posted| posted.message.id.as_str())
}

/// The messages of a page (other events dropped), oldest first, deduplicated later.
fn messages_of(page: EventPage) -> Vec<Message> {
    page.events.into_iter().filter_map(|event| event.message_posted.map(|p| p.message)).collect()
}

/// Messages that will be shown: the ones the context logic does not skip.
fn countable(messages: &[Message]) -> usize {
    messages.iter().filter(|m| m.echo_of_event_id.is_empty() && m.deleted_at.is_none()).count()
}

fn speaker(user: &User) -> Speaker {
    Speaker {
        id: user.id.clone(),
        login: user.login.clone(),
        display_name: user.display_name.clone(),
        is_bot: user.is_a_bot(),
    }
}

fn non_empty(text: String) -> Option<String> {
    if text.is_empty() { None } else { Some(text) }
}

fn chat_message(message: Message, author: Speaker) -> ChatMessage {
    let text = match message.body {
        Some(body) if !body.trim().is_empty() => body,
        _ if !message.attachments.is_empty() => "(sent an attachment)".to_owned(),
        _ => String::new(),
    };
    ChatMessage {
        id: message.id,
        thread_root: non_empty(message.thread_root_event_id),
        created_at: message.created_at,
        author,
        text,
        is_echo: !message.echo_of_event_id.is_empty(),
        deleted: message.deleted_at.is_some(),
    }
}

fn notice(occurrence: Occurrence) -> Notice {
    let (kind, pointer) = occurrence.signal.kind();
    let trigger = match kind {
        SignalKind::DirectMessageReceived => Some(Trigger::DirectMessage),
        SignalKind::DirectMentionReceived => Some(Trigger::Mention),
        SignalKind::ReplyReceived => Some(Trigger::Reply),
        SignalKind::FollowedThreadActivity => Some(Trigger::FollowedThread),
        SignalKind::Other => None,
    };
    let pointer = pointer.cloned().unwrap_or_default();
    // A waking notice without a message to point at cannot be answered: treat it as ignored.
    let trigger = trigger.filter(|_| !pointer.event_id.is_empty() && !pointer.room.id.is_empty());
    Notice {
        notification_id: occurrence.id,
        trigger,
        room: Room {
            id: pointer.room.id,
            kind: match pointer.room.kind {
                wire::RoomKind::Dm => RoomKind::Direct,
                // Unknown kinds are treated as channels: the server refuses a thread post where
                // threads do not exist, which is a visible error rather than a silent one.
                _ => RoomKind::Channel,
            },
            name: pointer.room.name,
        },
        event_id: pointer.event_id,
        thread_root: non_empty(pointer.thread_root_event_id),
        at: occurrence.created_at,
        unread: occurrence.unread,
    }
}
