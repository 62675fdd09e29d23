//! The pure bot logic: which notices wake the bot, the guard rails, what the model is shown,
//! where the answer lands. No IO; everything here is decided from values.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};

use crate::chat::{
    ChatMessage, ModelMessage, Notice, OutgoingPost, Role, Room, RoomKind, Speaker, Trigger,
};

/// An activation older than this is dropped: after downtime, late replies to conversations
/// that moved on help nobody. Not configurable.
pub const MAX_ACTIVATION_AGE: Duration = Duration::minutes(10);
/// At most this many replies per integration in any sliding hour. Not configurable: a loop
/// that gets past everything else costs an hour, not a month.
pub const MAX_REPLIES_PER_HOUR: usize = 60;
/// Default number of messages shown before the calling one.
pub const DEFAULT_CONTEXT_MESSAGES: usize = 6;
/// Most messages shown before the calling one.
pub const MAX_CONTEXT_MESSAGES: usize = 40;

/// Something to answer: one message, however many notices pointed at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activation {
    /// The message that called the bot.
    pub event_id: String,
    /// Its room.
    pub room: Room,
    /// Its thread; `None` for the main timeline.
    pub thread_root: Option<String>,
    /// Why it woke the bot (the first notice's reason; a mention wins over the others, since
    /// it decides whether the thread must be followed).
    pub trigger: Trigger,
    /// When it happened: the earliest of its notices.
    pub at: DateTime<Utc>,
    /// Every notice behind it, to mark them all handled.
    pub notification_ids: Vec<String>,
}

/// The outcome of sorting a poll's notices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// What to answer, oldest first, one per message.
    pub activations: Vec<Activation>,
    /// Unread notices that wake nothing: mark them handled so they are not read again.
    pub ignored: Vec<String>,
}

/// Keeps the four waking kinds among unread notices, one activation per message (a mention
/// that is also a reply is answered once), oldest first.
pub fn select_activations(notices: &[Notice]) -> Selection {
    let mut unread: Vec<&Notice> = notices.iter().filter(|n| n.unread).collect();
    // Oldest first, so a conversation is answered in the order it happened.
    unread.sort_by(|a, b| a.at.cmp(&b.at).then_with(|| a.notification_id.cmp(&b.notification_id)));
    let mut selection = Selection::default();
    for notice in unread {
        let Some(trigger) = notice.trigger else {
            selection.ignored.push(notice.notification_id.clone());
            continue;
        };
        let existing = selection
            .activations
            .iter_mut()
            .find(|a| a.event_id == notice.event_id && a.room.id == notice.room.id);
        match existing {
            Some(activation) => {
                activation.notification_ids.push(notice.notification_id.clone());
                if trigger == Trigger::Mention {
                    activation.trigger = Trigger::Mention;
                }
            }
            None => selection.activations.push(Activation {
                event_id: notice.event_id.clone(),
                room: notice.room.clone(),
                thread_root: notice.thread_root.clone(),
                trigger,
                at: notice.at,
                notification_ids: vec![notice.notification_id.clone()],
            }),
        }
    }
    selection
}

/// Why an activation is not answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dropped {
    /// Written by a bot (this one included): bots never trigger bots.
    FromABot,
    /// Older than [`MAX_ACTIVATION_AGE`].
    TooOld,
    /// [`MAX_REPLIES_PER_HOUR`] already reached.
    HourlyLimit,
}

/// Whether an activation at `at` is still young enough at `now`.
pub fn fresh_enough(at: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now.signed_duration_since(at) <= MAX_ACTIVATION_AGE
}

/// Whether one more reply fits the sliding hour, given the times of past replies.
pub fn hourly_window_allows(past_replies: &[DateTime<Utc>], now: DateTime<Utc>) -> bool {
    let since = now - Duration::hours(1);
    let in_window = past_replies.iter().filter(|at| **at > since && **at <= now).count();
    in_window < MAX_REPLIES_PER_HOUR
}

/// The guard rails, in order of cost: age, author, hourly window.
pub fn check_guards(
    activation_at: DateTime<Utc>,
    author: &Speaker,
    past_replies: &[DateTime<Utc>],
    now: DateTime<Utc>,
) -> Result<(), Dropped> {
    if !fresh_enough(activation_at, now) {
        return Err(Dropped::TooOld);
    }
    if author.is_bot {
        return Err(Dropped::FromABot);
    }
    if !hourly_window_allows(past_replies, now) {
        return Err(Dropped::HourlyLimit);
    }
    Ok(())
}

/// How much of the room the model is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextMode {
    /// Only the message that called the bot; nothing else is read.
    OnlyCallingMessage,
    /// The messages just before it (room timeline or thread), at most
    /// [`MAX_CONTEXT_MESSAGES`].
    MessagesBefore(usize),
    /// The whole thread, root included (just the message when it is not in a thread).
    WholeThread,
}

impl Default for ContextMode {
    fn default() -> Self {
        ContextMode::MessagesBefore(DEFAULT_CONTEXT_MESSAGES)
    }
}

impl ContextMode {
    /// `MessagesBefore(n)` with `n` clamped to 1..=[`MAX_CONTEXT_MESSAGES`].
    pub fn messages_before(n: usize) -> Self {
        ContextMode::MessagesBefore(n.clamp(1, MAX_CONTEXT_MESSAGES))
    }
}

/// What to read for a context mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextFetch {
    /// Nothing beyond the calling message.
    Nothing,
    /// `count` messages before the calling one, in its thread or (`None`) the room.
    Before {
        /// The thread, or `None` for the room's main timeline.
        thread_root: Option<String>,
        /// How many.
        count: usize,
    },
    /// The whole thread rooted here.
    Thread {
        /// Its root.
        root: String,
    },
}

/// Decides what to read for `mode` around `calling`.
pub fn context_fetch(mode: ContextMode, calling: &ChatMessage) -> ContextFetch {
    match mode {
        ContextMode::OnlyCallingMessage => ContextFetch::Nothing,
        ContextMode::MessagesBefore(n) => ContextFetch::Before {
            thread_root: calling.thread_root.clone(),
            count: n.clamp(1, MAX_CONTEXT_MESSAGES),
        },
        ContextMode::WholeThread => match &calling.thread_root {
            Some(root) => ContextFetch::Thread { root: root.clone() },
            // A question in the main timeline has no thread before it: the replies under it,
            // if any, were written after it and would be dropped anyway.
            None => ContextFetch::Nothing,
        },
    }
}

/// Builds what the model is shown: earlier messages (only those written before the calling
/// one, echoes and deleted ones skipped, at most `keep_last` when set), then the calling
/// message. Speakers are named in the text; the bot's own messages become assistant messages.
pub fn build_context(
    calling: &ChatMessage,
    earlier: &[ChatMessage],
    me: &Speaker,
    keep_last: Option<usize>,
) -> Vec<ModelMessage> {
    let mut seen = HashSet::new();
    let mut kept: Vec<&ChatMessage> = earlier
        .iter()
        .filter(|m| m.id != calling.id)
        // Answering with the replies to the question already in hand is answering a different
        // question.
        .filter(|m| m.created_at <= calling.created_at)
        .filter(|m| !m.is_echo && !m.deleted && !m.text.trim().is_empty())
        .filter(|m| seen.insert(m.id.clone()))
        .collect();
    kept.sort_by_key(|m| m.created_at);
    if let Some(n) = keep_last {
        let skip = kept.len().saturating_sub(n);
        kept.drain(..skip);
    }
    kept.into_iter().chain(std::iter::once(calling)).map(|m| to_model(m, me)).collect()
}

fn to_model(message: &ChatMessage, me: &Speaker) -> ModelMessage {
    if message.author.id == me.id {
        return ModelMessage { role: Role::Assistant, text: message.text.clone() };
    }
    let author = &message.author;
    let name = if author.display_name.trim().is_empty() {
        format!("@{}", author.login)
    } else {
        format!("{} (@{})", author.display_name, author.login)
    };
    ModelMessage { role: Role::User, text: format!("{name}: {}", message.text) }
}

/// Where the answer lands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PlacementMode {
    /// In the thread if the question was in one, in the room otherwise.
    #[default]
    WhereAsked,
    /// Always in a thread: a question in the open gets a thread rooted on it (DMs have no
    /// threads: there it lands in the room).
    AlwaysThread,
    /// Always in the room's main timeline, with reply attribution.
    AlwaysRoom,
}

/// Where to post, and what to follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Post into this thread; `None` for the room's main timeline.
    pub thread_root: Option<String>,
    /// Attribution on the first part.
    pub in_reply_to: Option<String>,
    /// Follow this thread explicitly after answering.
    pub follow_thread: Option<String>,
}

/// Decides where the answer to `calling` (in `room`, woken by `trigger`) lands.
pub fn plan_placement(
    mode: PlacementMode,
    room: &Room,
    calling: &ChatMessage,
    trigger: Trigger,
) -> Placement {
    let threads_possible = room.kind == RoomKind::Channel;
    let thread_root = match mode {
        PlacementMode::WhereAsked => calling.thread_root.clone(),
        PlacementMode::AlwaysThread if threads_possible => {
            Some(calling.thread_root.clone().unwrap_or_else(|| calling.id.clone()))
        }
        PlacementMode::AlwaysThread => None,
        PlacementMode::AlwaysRoom => None,
    };
    // The server makes a mentioned user follow a thread only for mentions *inside* it, and a
    // poster follows the thread it posts in. A mention in the main timeline answered in the
    // room would leave the bot following nothing, and the next question would need the @ again.
    let follow_thread = (trigger == Trigger::Mention
        && threads_possible
        && calling.thread_root.is_none()
        && thread_root.is_none())
    .then(|| calling.id.clone());
    Placement { thread_root, in_reply_to: Some(calling.id.clone()), follow_thread }
}

/// The posts for an answer split in `parts`: only the first carries the attribution.
pub fn plan_posts(room: &Room, placement: &Placement, parts: Vec<String>) -> Vec<OutgoingPost> {
    parts
        .into_iter()
        .enumerate()
        .map(|(i, body)| OutgoingPost {
            room_id: room.id.clone(),
            body,
            thread_root: placement.thread_root.clone(),
            in_reply_to: if i == 0 { placement.in_reply_to.clone() } else { None },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(minutes: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_750_000_000, 0).unwrap_or_default() + Duration::minutes(minutes)
    }

    fn room(kind: RoomKind) -> Room {
        Room { id: "r".into(), kind, name: "general".into() }
    }

    fn notice(id: &str, trigger: Option<Trigger>, event: &str, at: i64) -> Notice {
        Notice {
            notification_id: id.into(),
            trigger,
            room: room(RoomKind::Channel),
            event_id: event.into(),
            thread_root: None,
            at: t(at),
            unread: true,
        }
    }

    fn speaker(id: &str, is_bot: bool) -> Speaker {
        Speaker { id: id.into(), login: id.into(), display_name: format!("{id} name"), is_bot }
    }

    fn msg(id: &str, author: &Speaker, at: i64, text: &str) -> ChatMessage {
        ChatMessage {
            id: id.into(),
            thread_root: None,
            created_at: t(at),
            author: author.clone(),
            text: text.into(),
            is_echo: false,
            deleted: false,
        }
    }

    #[test]
    fn selection_dedupes_orders_and_ignores() {
        let notices = vec![
            notice("n3", Some(Trigger::Reply), "e2", 3),
            notice("n2", Some(Trigger::Reply), "e1", 2),
            notice("n1", Some(Trigger::Mention), "e1", 1),
            notice("n4", None, "e3", 0),
            Notice { unread: false, ..notice("n5", Some(Trigger::Mention), "e9", 0) },
        ];
        let selection = select_activations(&notices);
        let order: Vec<_> = selection.activations.iter().map(|a| a.event_id.as_str()).collect();
        assert_eq!(order, ["e1", "e2"]);
        assert_eq!(selection.activations[0].notification_ids, ["n1", "n2"]);
        assert_eq!(selection.activations[0].trigger, Trigger::Mention);
        assert_eq!(selection.ignored, ["n4"]);
    }

    #[test]
    fn hundred_activations_in_an_hour_allow_sixty() {
        let mut ledger = Vec::new();
        let mut allowed = 0;
        for i in 0..100 {
            let now = t(0) + Duration::seconds(i * 30);
            if hourly_window_allows(&ledger, now) {
                ledger.push(now);
                allowed += 1;
            }
        }
        assert_eq!(allowed, 60);
        // The window slides: an hour after the first reply, there is room again.
        let later = t(0) + Duration::minutes(60) + Duration::seconds(1);
        assert!(hourly_window_allows(&ledger, later));
    }

    #[test]
    fn guards_drop_old_and_bot_activations() {
        let person = speaker("p", false);
        assert_eq!(check_guards(t(0), &person, &[], t(20)), Err(Dropped::TooOld));
        assert_eq!(check_guards(t(0), &speaker("b", true), &[], t(1)), Err(Dropped::FromABot));
        assert_eq!(check_guards(t(0), &person, &[], t(10)), Ok(()));
    }

    #[test]
    fn context_names_speakers_and_drops_later_messages() {
        let me = speaker("bot", true);
        let ann = speaker("ann", false);
        let calling = msg("c", &ann, 5, "and you?");
        let earlier = vec![
            msg("a", &ann, 1, "hello"),
            msg("b", &me, 2, "hi Ann"),
            ChatMessage { is_echo: true, ..msg("x", &ann, 3, "echo") },
            msg("later", &ann, 6, "too late"),
        ];
        let context = build_context(&calling, &earlier, &me, Some(6));
        let got: Vec<_> = context.iter().map(|m| (m.role, m.text.as_str())).collect();
        assert_eq!(
            got,
            [
                (Role::User, "ann name (@ann): hello"),
                (Role::Assistant, "hi Ann"),
                (Role::User, "ann name (@ann): and you?"),
            ]
        );
        let last_one = build_context(&calling, &earlier, &me, Some(1));
        assert_eq!(last_one.len(), 2);
        assert_eq!(last_one[0].role, Role::Assistant);
    }

    #[test]
    fn placement_table() {
        let ann = speaker("ann", false);
        let in_room = msg("m", &ann, 0, "q");
        let in_thread = ChatMessage { thread_root: Some("root".into()), ..in_room.clone() };
        let channel = room(RoomKind::Channel);
        let dm = room(RoomKind::Direct);
        use PlacementMode::*;
        // (mode, room, message, trigger) -> (thread_root, follow)
        type Case<'a> =
            (PlacementMode, &'a Room, &'a ChatMessage, Trigger, Option<&'a str>, Option<&'a str>);
        let cases: [Case<'_>; 7] = [
            (WhereAsked, &channel, &in_room, Trigger::Mention, None, Some("m")),
            (WhereAsked, &channel, &in_thread, Trigger::Mention, Some("root"), None),
            (AlwaysThread, &channel, &in_room, Trigger::Mention, Some("m"), None),
            (AlwaysThread, &channel, &in_thread, Trigger::Reply, Some("root"), None),
            (AlwaysThread, &dm, &in_room, Trigger::DirectMessage, None, None),
            (AlwaysRoom, &channel, &in_thread, Trigger::FollowedThread, None, None),
            (AlwaysRoom, &channel, &in_room, Trigger::Reply, None, None),
        ];
        for (mode, room, message, trigger, thread, follow) in cases {
            let placement = plan_placement(mode, room, message, trigger);
            assert_eq!(placement.thread_root.as_deref(), thread, "{mode:?} {trigger:?}");
            assert_eq!(placement.follow_thread.as_deref(), follow, "{mode:?} {trigger:?}");
            assert_eq!(placement.in_reply_to.as_deref(), Some("m"));
        }
    }
}
