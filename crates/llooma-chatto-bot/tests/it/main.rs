//! The bot against the fake Chatto server, over real HTTP on loopback.

// Helpers outside `#[test]` functions are not covered by clippy's allow-unwrap-in-tests.
#![expect(clippy::unwrap_used, reason = "test helpers panic on failed setup")]

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, Utc};
use llooma_chatto_bot::logic::hourly_window_allows;
use llooma_chatto_bot::{
    BotSettings, ChatServer, ChattoClient, ChattoError, ChattoServer, ContextMode, Dropped,
    ErrorAction, IntegrationSpec, MemoryLedger, ModelMessage, Outcome, PlacementMode, Responder,
    Role, RunReport, RunState, RuntimeConfig, RuntimePort, ServerError, TickReport, post_all,
    run_tick, runtime,
};
use llooma_chatto_fake::{ALL_BOT_PERMISSIONS, BotStyle, FakeBot, FakeChatto, SignalKind};
use llooma_net::{NetClient, OutboundPolicy, Purpose};
use llooma_vault::Secret;

/// A model that answers a fixed text and remembers what it was shown.
struct Scripted {
    answer: String,
    seen: Mutex<Vec<Vec<ModelMessage>>>,
}

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

impl Responder for Scripted {
    type Error = Never;
    async fn respond(&self, context: &[ModelMessage]) -> Result<String, Never> {
        self.seen.lock().unwrap().push(context.to_vec());
        Ok(self.answer.clone())
    }
}

fn scripted(answer: &str) -> Scripted {
    Scripted { answer: answer.to_owned(), seen: Mutex::new(Vec::new()) }
}

struct World {
    fake: FakeChatto,
    bot: FakeBot,
    ann: String,
    bea: String,
    general: String,
    dm: String,
    now: DateTime<Utc>,
}

impl World {
    async fn new(permissions: &[&str]) -> World {
        let fake = FakeChatto::start().await.unwrap();
        let bot = fake.add_bot("helper", "Helper", BotStyle::IsBotFlag, permissions);
        let ann = fake.add_person("ann", "Ann Lee");
        let bea = fake.add_person("bea", "Bea Ray");
        let general = fake.add_channel("general", &[&bot.id, &ann, &bea]);
        let dm = fake.add_dm(&ann, &bot.id);
        World { fake, bot, ann, bea, general, dm, now: Utc::now() }
    }

    fn ago(&self, minutes: i64) -> DateTime<Utc> {
        self.now - Duration::minutes(minutes)
    }

    fn client(&self, key: &str) -> ChattoClient {
        let origin = self.fake.origin();
        let policy = OutboundPolicy::from_allow_lists(None, None, Some(&origin)).unwrap();
        let net = NetClient::builder(Arc::new(policy), Purpose::Bot).build().unwrap();
        ChattoClient::new(net, &origin, Secret::new(key)).unwrap()
    }

    async fn server(&self) -> ChattoServer {
        ChattoServer::connect(self.client(&self.bot.key)).await.unwrap()
    }

    async fn tick(&self, settings: &BotSettings, responder: &Scripted) -> TickReport {
        let server = self.server().await;
        let ledger = MemoryLedger::default();
        run_tick(&server, &ledger, responder, settings, self.now).await
    }

    /// Accepted posts by the bot.
    fn bot_posts(&self) -> Vec<llooma_chatto_fake::CreateMessageCall> {
        self.fake
            .create_message_calls()
            .into_iter()
            .filter(|c| c.caller == self.bot.id && c.refused.is_none())
            .collect()
    }
}

fn settings(context: ContextMode, placement: PlacementMode) -> BotSettings {
    BotSettings { integration_id: "integration-1".into(), context, placement }
}

fn default_settings() -> BotSettings {
    settings(ContextMode::default(), PlacementMode::WhereAsked)
}

fn texts(context: &[ModelMessage]) -> Vec<(Role, &str)> {
    context.iter().map(|m| (m.role, m.text.as_str())).collect()
}

#[tokio::test]
async fn each_waking_kind_wakes_the_bot() {
    let kinds = [
        SignalKind::DirectMessageReceived,
        SignalKind::DirectMentionReceived,
        SignalKind::ReplyReceived,
        SignalKind::FollowedThreadActivity,
    ];
    for kind in kinds {
        let w = World::new(&ALL_BOT_PERMISSIONS).await;
        let room = if kind == SignalKind::DirectMessageReceived { &w.dm } else { &w.general };
        let message = w.fake.post(room, &w.ann, "@helper what time is it?", w.ago(1));
        let notification = w.fake.notify(&w.bot.id, kind, room, &message, w.ago(1));
        let responder = scripted("noon");
        let report = w.tick(&default_settings(), &responder).await;
        assert!(report.stopped.is_none(), "{kind:?}: {report:?}");
        let posts = w.bot_posts();
        assert_eq!(posts.len(), 1, "{kind:?}");
        assert_eq!(posts[0].body, "noon");
        assert_eq!(&posts[0].room_id, room);
        assert!(!w.fake.is_unread(&notification), "{kind:?}: handled notices are marked read");
    }
}

#[tokio::test]
async fn other_kinds_do_not_wake_the_bot() {
    let ignored = [
        SignalKind::RoleMentionReceived,
        SignalKind::HereMentionReceived,
        SignalKind::AllMentionReceived,
        SignalKind::FollowedRoomActivity,
        SignalKind::ReactionReceived,
    ];
    for kind in ignored {
        let w = World::new(&ALL_BOT_PERMISSIONS).await;
        let message = w.fake.post(&w.general, &w.ann, "@here lunch?", w.ago(1));
        let notification = w.fake.notify(&w.bot.id, kind, &w.general, &message, w.ago(1));
        let responder = scripted("no");
        let report = w.tick(&default_settings(), &responder).await;
        assert!(report.handled.is_empty(), "{kind:?}");
        assert_eq!(report.ignored, 1);
        assert!(w.bot_posts().is_empty(), "{kind:?} must not wake the bot");
        assert!(responder.seen.lock().unwrap().is_empty());
        assert!(!w.fake.is_unread(&notification), "ignored notices are not read again");
    }
}

#[tokio::test]
async fn one_message_with_two_occurrences_is_answered_once() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let message = w.fake.post(&w.general, &w.ann, "@helper right?", w.ago(1));
    let mention =
        w.fake.notify(&w.bot.id, SignalKind::DirectMentionReceived, &w.general, &message, w.ago(1));
    let reply = w.fake.notify(&w.bot.id, SignalKind::ReplyReceived, &w.general, &message, w.ago(1));
    let server = w.server().await;
    let ledger = MemoryLedger::default();
    let responder = scripted("yes");
    let settings = default_settings();
    let report = run_tick(&server, &ledger, &responder, &settings, w.now).await;
    assert_eq!(report.handled.len(), 1);
    assert_eq!(w.bot_posts().len(), 1);
    assert!(!w.fake.is_unread(&mention) && !w.fake.is_unread(&reply));

    // A notice seen again (say it was never marked read) is stopped by the ledger.
    w.fake.notify(&w.bot.id, SignalKind::ReplyReceived, &w.general, &message, w.ago(1));
    let again = run_tick(&server, &ledger, &responder, &settings, w.now).await;
    assert_eq!(again.handled[0].outcome, Outcome::AlreadyAnswered);
    assert_eq!(w.bot_posts().len(), 1);
}

#[tokio::test]
async fn messages_from_bots_never_trigger() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let other = w.fake.add_bot("echo", "Echo Bot", BotStyle::BotObject, &[]);
    let from_bot = w.fake.post(&w.general, &other.id, "@helper ping", w.ago(1));
    w.fake.notify(&w.bot.id, SignalKind::DirectMentionReceived, &w.general, &from_bot, w.ago(1));
    let own = w.fake.post(&w.general, &w.bot.id, "I said something", w.ago(1));
    w.fake.notify(&w.bot.id, SignalKind::FollowedThreadActivity, &w.general, &own, w.ago(1));
    let report = w.tick(&default_settings(), &scripted("pong")).await;
    let outcomes: Vec<_> = report.handled.iter().map(|h| h.outcome.clone()).collect();
    assert_eq!(
        outcomes,
        [Outcome::Dropped(Dropped::FromABot), Outcome::Dropped(Dropped::FromABot)]
    );
    assert!(w.bot_posts().is_empty());
}

#[tokio::test]
async fn a_twenty_minute_old_mention_is_dropped() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let message = w.fake.post(&w.general, &w.ann, "@helper still there?", w.ago(20));
    w.fake.notify(&w.bot.id, SignalKind::DirectMentionReceived, &w.general, &message, w.ago(20));
    let responder = scripted("late");
    let report = w.tick(&default_settings(), &responder).await;
    assert_eq!(report.handled[0].outcome, Outcome::Dropped(Dropped::TooOld));
    assert!(w.bot_posts().is_empty());
    assert!(responder.seen.lock().unwrap().is_empty());
}

#[test]
fn the_hourly_window_allows_sixty_of_a_hundred() {
    let start = Utc::now();
    let mut ledger = Vec::new();
    for i in 0..100 {
        let now = start + Duration::seconds(i * 20);
        if hourly_window_allows(&ledger, now) {
            ledger.push(now);
        }
    }
    assert_eq!(ledger.len(), 60);
}

/// A room with history: Ann, the bot, an echo of a thread reply, Bea asking, Ann after.
struct RoomScript {
    calling: String,
    root: String,
}

fn script_room(w: &World) -> RoomScript {
    let f = &w.fake;
    f.post(&w.general, &w.ann, "old news", w.ago(9));
    f.post(&w.general, &w.ann, "who knows Rust?", w.ago(5));
    f.post(&w.general, &w.bot.id, "I do, a little.", w.ago(4));
    let root = f.post(&w.general, &w.bea, "thread about lifetimes", w.ago(4));
    f.post_in_thread(&w.general, &root, &w.ann, "echoed reply", w.ago(3), true);
    let calling = f.post(&w.general, &w.bea, "@helper what is a borrow?", w.ago(2));
    f.post(&w.general, &w.ann, "written after the question", w.ago(1));
    f.notify(&w.bot.id, SignalKind::DirectMentionReceived, &w.general, &calling, w.ago(2));
    RoomScript { calling, root }
}

#[tokio::test]
async fn context_only_the_calling_message() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    script_room(&w);
    let responder = scripted("ok");
    w.tick(&settings(ContextMode::OnlyCallingMessage, PlacementMode::WhereAsked), &responder).await;
    let seen = responder.seen.lock().unwrap();
    assert_eq!(texts(&seen[0]), [(Role::User, "Bea Ray (@bea): @helper what is a borrow?")]);
}

#[tokio::test]
async fn context_messages_before_names_speakers_and_drops_later_ones() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    script_room(&w);
    let responder = scripted("ok");
    w.tick(&settings(ContextMode::messages_before(3), PlacementMode::WhereAsked), &responder).await;
    let seen = responder.seen.lock().unwrap();
    assert_eq!(
        texts(&seen[0]),
        [
            (Role::User, "Ann Lee (@ann): who knows Rust?"),
            (Role::Assistant, "I do, a little."),
            (Role::User, "Bea Ray (@bea): thread about lifetimes"),
            (Role::User, "Bea Ray (@bea): @helper what is a borrow?"),
        ],
        "three before (the echo skipped), none after"
    );
}

#[tokio::test]
async fn context_whole_thread_includes_the_root() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let f = &w.fake;
    let root = f.post(&w.general, &w.ann, "Release plan?", w.ago(8));
    f.post_in_thread(&w.general, &root, &w.bea, "Friday", w.ago(7), false);
    f.post_in_thread(&w.general, &root, &w.bot.id, "Friday works.", w.ago(6), false);
    let calling = f.post_in_thread(&w.general, &root, &w.ann, "@helper any risk?", w.ago(5), false);
    f.post_in_thread(&w.general, &root, &w.bea, "later reply", w.ago(4), false);
    f.notify(&w.bot.id, SignalKind::FollowedThreadActivity, &w.general, &calling, w.ago(5));
    let responder = scripted("some");
    w.tick(&settings(ContextMode::WholeThread, PlacementMode::WhereAsked), &responder).await;
    let seen = responder.seen.lock().unwrap();
    assert_eq!(
        texts(&seen[0]),
        [
            (Role::User, "Ann Lee (@ann): Release plan?"),
            (Role::User, "Bea Ray (@bea): Friday"),
            (Role::Assistant, "Friday works."),
            (Role::User, "Ann Lee (@ann): @helper any risk?"),
        ]
    );
    // Answered where asked: in the thread.
    assert_eq!(w.bot_posts()[0].thread_root_event_id.as_deref(), Some(root.as_str()));
}

#[tokio::test]
async fn context_messages_before_in_a_thread_reads_the_thread() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let f = &w.fake;
    let root = f.post(&w.general, &w.ann, "root", w.ago(8));
    f.post(&w.general, &w.bea, "room chatter", w.ago(7));
    for i in 0..5 {
        f.post_in_thread(&w.general, &root, &w.bea, &format!("reply {i}"), w.ago(7), false);
    }
    let calling = f.post_in_thread(&w.general, &root, &w.ann, "@helper sum up", w.ago(5), false);
    f.notify(&w.bot.id, SignalKind::DirectMentionReceived, &w.general, &calling, w.ago(5));
    let responder = scripted("sum");
    w.tick(&settings(ContextMode::messages_before(2), PlacementMode::WhereAsked), &responder).await;
    let seen = responder.seen.lock().unwrap();
    assert_eq!(
        texts(&seen[0]),
        [
            (Role::User, "Bea Ray (@bea): reply 3"),
            (Role::User, "Bea Ray (@bea): reply 4"),
            (Role::User, "Ann Lee (@ann): @helper sum up"),
        ]
    );
}

#[tokio::test]
async fn placement_where_asked_in_the_room_follows_the_mention() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let script = script_room(&w);
    w.tick(&settings(ContextMode::OnlyCallingMessage, PlacementMode::WhereAsked), &scripted("a"))
        .await;
    let posts = w.bot_posts();
    assert_eq!(posts[0].thread_root_event_id, None);
    assert_eq!(posts[0].in_reply_to.as_deref(), Some(script.calling.as_str()));
    let follows = w.fake.follow_calls();
    assert_eq!(follows.len(), 1);
    assert_eq!(follows[0].thread_root_event_id, script.calling);
    assert!(w.fake.is_following(&w.bot.id, &w.general, &script.calling));
    let _ = script.root;
}

#[tokio::test]
async fn placement_always_thread_roots_on_the_question() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let script = script_room(&w);
    w.tick(&settings(ContextMode::OnlyCallingMessage, PlacementMode::AlwaysThread), &scripted("a"))
        .await;
    let posts = w.bot_posts();
    assert_eq!(posts[0].thread_root_event_id.as_deref(), Some(script.calling.as_str()));
    // Posting in the thread is what makes the bot follow it; no explicit call needed.
    assert!(w.fake.follow_calls().is_empty());
    assert!(w.fake.is_following(&w.bot.id, &w.general, &script.calling));
}

#[tokio::test]
async fn placement_always_thread_falls_back_to_the_room_in_a_dm() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let message = w.fake.post(&w.dm, &w.ann, "hello", w.ago(1));
    w.fake.notify(&w.bot.id, SignalKind::DirectMessageReceived, &w.dm, &message, w.ago(1));
    let report = w
        .tick(
            &settings(ContextMode::OnlyCallingMessage, PlacementMode::AlwaysThread),
            &scripted("hi"),
        )
        .await;
    assert!(report.stopped.is_none(), "{report:?}");
    let posts = w.bot_posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].thread_root_event_id, None);
    assert!(w.fake.follow_calls().is_empty());
}

#[tokio::test]
async fn placement_always_room_answers_a_thread_question_in_the_room() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let root = w.fake.post(&w.general, &w.ann, "root", w.ago(3));
    let calling = w.fake.post_in_thread(&w.general, &root, &w.bea, "@helper and?", w.ago(2), false);
    w.fake.notify(&w.bot.id, SignalKind::DirectMentionReceived, &w.general, &calling, w.ago(2));
    w.tick(&settings(ContextMode::OnlyCallingMessage, PlacementMode::AlwaysRoom), &scripted("a"))
        .await;
    let posts = w.bot_posts();
    assert_eq!(posts[0].thread_root_event_id, None);
    assert_eq!(posts[0].in_reply_to.as_deref(), Some(calling.as_str()));
}

#[tokio::test]
async fn a_long_answer_is_split_with_attribution_on_the_first_part_only() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let script = script_room(&w);
    let mut answer = String::new();
    let mut i = 0;
    while answer.len() < 25_000 {
        answer.push_str(&format!("Paragraph {i}: {}\n\n", "words ".repeat(60)));
        answer.push_str("```rust\n");
        for j in 0..20 {
            answer.push_str(&format!("let value_{i}_{j} = compute({j});\n"));
        }
        answer.push_str("\nprintln!(\"done\");\n```\n\n");
        i += 1;
    }
    let report = w
        .tick(
            &settings(ContextMode::OnlyCallingMessage, PlacementMode::WhereAsked),
            &scripted(&answer),
        )
        .await;
    assert!(report.stopped.is_none(), "{report:?}");
    let posts = w.bot_posts();
    assert!(posts.len() >= 3, "{} parts", posts.len());
    for (n, post) in posts.iter().enumerate() {
        assert!(post.body.len() < 10_000, "part {n} is {} bytes", post.body.len());
        let fences = post.body.lines().filter(|l| l.starts_with("```")).count();
        assert_eq!(fences % 2, 0, "part {n} cuts a code block");
        let expected = (n == 0).then_some(script.calling.as_str());
        assert_eq!(post.in_reply_to.as_deref(), expected, "part {n}");
    }
    let rejoined: String = posts.iter().map(|p| p.body.as_str()).collect::<Vec<_>>().join("\n\n");
    assert_eq!(rejoined.trim(), answer.trim(), "nothing lost or reordered");
}

#[tokio::test]
async fn missing_message_read_pauses_with_the_permission_named() {
    let w =
        World::new(&["message.post", "message.post-in-thread", "message.read-interactions"]).await;
    script_room(&w);
    let server = w.server().await;
    let ledger = MemoryLedger::default();
    let report = run_tick(&server, &ledger, &scripted("x"), &default_settings(), w.now).await;
    let stopped = report.stopped.expect("the tick stops");
    assert_eq!(stopped.action, ErrorAction::Pause);
    assert!(stopped.reason.contains("`message.read`"), "{}", stopped.reason);
    assert!(w.bot_posts().is_empty());
    assert!(ledger.keys().is_empty(), "nothing recorded: the activation can run once fixed");
}

#[tokio::test]
async fn missing_post_in_thread_is_named() {
    let w = World::new(&["message.post", "message.read"]).await;
    script_room(&w);
    let report = w
        .tick(
            &settings(ContextMode::OnlyCallingMessage, PlacementMode::AlwaysThread),
            &scripted("x"),
        )
        .await;
    let stopped = report.stopped.expect("the tick stops");
    assert!(stopped.reason.contains("`message.post-in-thread`"), "{}", stopped.reason);
}

#[tokio::test]
async fn a_revoked_key_pauses_with_a_reason_and_never_shows_the_key() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let message = w.fake.post(&w.general, &w.ann, "@helper hi", w.ago(1));
    w.fake.notify(&w.bot.id, SignalKind::DirectMentionReceived, &w.general, &message, w.ago(1));
    let server = w.server().await;
    w.fake.revoke_key(&w.bot.key);
    let report =
        run_tick(&server, &MemoryLedger::default(), &scripted("x"), &default_settings(), w.now)
            .await;
    let stopped = report.stopped.expect("the tick stops");
    assert_eq!(stopped.action, ErrorAction::Pause);
    assert!(stopped.reason.contains("revoked"), "{}", stopped.reason);

    let err = ChattoServer::connect(w.client(&w.bot.key)).await.unwrap_err();
    assert!(matches!(err, ChattoError::Unauthenticated { .. }), "{err:?}");
    let secret_part = w.bot.key.split('.').next_back().unwrap();
    for text in [format!("{err}"), format!("{err:?}"), format!("{:?}", w.client(&w.bot.key))] {
        assert!(!text.contains(secret_part), "key leaked: {text}");
    }
}

#[tokio::test]
async fn slow_mode_retries_later_and_the_rest_can_be_posted() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let message = w.fake.post(&w.general, &w.ann, "@helper hi", w.ago(1));
    w.fake.notify(&w.bot.id, SignalKind::DirectMentionReceived, &w.general, &message, w.ago(1));
    w.fake.set_slow_mode(&w.general, true);
    let server = w.server().await;
    let ledger = MemoryLedger::default();
    let report = run_tick(&server, &ledger, &scripted("hello"), &default_settings(), w.now).await;
    let stopped = report.stopped.clone().expect("the tick stops");
    assert_eq!(stopped.action, ErrorAction::RetryLater);
    let Outcome::PostInterrupted { posted, remaining, follow } = &report.handled[0].outcome else {
        panic!("{report:?}");
    };
    assert!(posted.is_empty());
    assert_eq!(remaining.len(), 1);
    assert_eq!(ledger.keys().len(), 1, "recorded before posting");
    // A mention in the room, answered in the room: its thread is followed, but only once the
    // answer is out.
    assert_eq!(follow.as_ref().map(|f| f.thread_root.as_str()), Some(message.as_str()));
    assert!(w.fake.follow_calls().is_empty());

    w.fake.set_slow_mode(&w.general, false);
    let ids = post_all(&server, remaining, follow.as_ref()).await.unwrap();
    assert_eq!(ids.len(), 1);
    assert_eq!(w.bot_posts().len(), 1);
    assert!(w.fake.is_following(&w.bot.id, &w.general, &message));
}

#[tokio::test]
async fn check_connection_accepts_both_bot_styles_and_refuses_a_person() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let me = w.client(&w.bot.key).check_connection().await.unwrap();
    assert_eq!(me.login, "helper");
    let newer = w.fake.add_bot("newbot", "New Bot", BotStyle::BotObject, &[]);
    assert!(w.client(&newer.key).check_connection().await.unwrap().is_a_bot());
    let person_key = w.fake.issue_key(&w.ann);
    let err = w.client(&person_key).check_connection().await.unwrap_err();
    assert!(matches!(err, ChattoError::NotABot { .. }), "{err:?}");
    assert_eq!(err.action(), ErrorAction::Pause);
}

#[tokio::test]
async fn the_server_identity_is_the_bot() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let server = w.server().await;
    assert_eq!(server.me().id, w.bot.id);
    assert!(server.me().is_bot);
    let _ = &w.bea;
}

/// A mention in the room answered in the room is followed (the next question needs no @),
/// also when posting the answer was interrupted and its last parts went out on a later poll:
/// slow mode (`resource_exhausted`) before the first part, or the network failing between two
/// parts. Runs the real polling runtime.
#[tokio::test]
async fn an_interrupted_answer_follows_the_mention_once_its_last_part_is_posted() {
    #[derive(Debug, Clone, Copy)]
    enum Cut {
        SlowMode,
        NetworkBetweenParts,
    }
    for cut in [Cut::SlowMode, Cut::NetworkBetweenParts] {
        let w = World::new(&ALL_BOT_PERMISSIONS).await;
        let calling = w.fake.post(&w.general, &w.ann, "@helper explain", w.ago(1));
        w.fake.notify(&w.bot.id, SignalKind::DirectMentionReceived, &w.general, &calling, w.ago(1));
        // Two parts: each paragraph alone nearly fills one.
        let paragraph = "word ".repeat(1_500);
        let answer = format!("{paragraph}\n\n{paragraph}");
        let (waiting_state, lift): (RunState, Box<dyn Fn()>) = match cut {
            Cut::SlowMode => {
                w.fake.set_slow_mode(&w.general, true);
                (RunState::SlowedDown, Box::new(|| w.fake.set_slow_mode(&w.general, false)))
            }
            Cut::NetworkBetweenParts => {
                w.fake.go_down_after_posts(1);
                (RunState::BackingOff, Box::new(|| w.fake.set_unavailable(false)))
            }
        };
        let runtime = Runtime::start(&w, &answer);
        runtime
            .wait_for(&format!("{cut:?}: {waiting_state:?}"), |r| r.state == waiting_state)
            .await;
        assert!(w.fake.follow_calls().is_empty(), "{cut:?}: followed before the answer was out");
        lift();
        eventually(&format!("{cut:?}: both parts posted"), || w.bot_posts().len() == 2).await;
        eventually(&format!("{cut:?}: the mention's thread followed"), || {
            w.fake.is_following(&w.bot.id, &w.general, &calling)
        })
        .await;
        let follows = w.fake.follow_calls();
        assert_eq!(follows.len(), 1, "{cut:?}: followed once: {follows:?}");
        assert_eq!(follows[0].thread_root_event_id, calling, "{cut:?}");
        let posts = w.bot_posts();
        assert_eq!(posts[0].in_reply_to.as_deref(), Some(calling.as_str()), "{cut:?}");
        assert!(posts.iter().all(|p| p.thread_root_event_id.is_none()), "{cut:?}: in the room");
        runtime.stop().await;
    }
}

/// Replies written in a thread after the calling message, already there when the bot reads the
/// thread, never reach the model: the thread is longer than one page, and the replies carry the
/// same time as the call (written within the millisecond), so only the thread's order tells them
/// apart. Whole thread, and messages before, with the call on the older page and on the newest.
#[tokio::test]
async fn replies_after_the_call_never_reach_the_model_however_the_thread_is_paged() {
    const REPLIES: usize = 130;
    // (context mode, index of the calling reply, how many replies before it the model sees)
    let cases = [
        (ContextMode::WholeThread, 10, 10),
        (ContextMode::WholeThread, 60, 60),
        (ContextMode::messages_before(5), 10, 5),
        (ContextMode::messages_before(5), 60, 5),
    ];
    for (mode, call_at, shown) in cases {
        let w = World::new(&ALL_BOT_PERMISSIONS).await;
        let f = &w.fake;
        let root = f.post(&w.general, &w.ann, "thread root", w.ago(5));
        let burst = w.ago(2);
        let mut calling = String::new();
        for i in 0..REPLIES {
            let (who, text) = match i.cmp(&call_at) {
                std::cmp::Ordering::Less => (&w.bea, format!("before {i}")),
                std::cmp::Ordering::Equal => (&w.ann, "@helper what did we decide?".to_owned()),
                std::cmp::Ordering::Greater => (&w.bea, format!("after {i}")),
            };
            let id = f.post_in_thread(&w.general, &root, who, &text, burst, false);
            if i == call_at {
                calling = id;
            }
        }
        f.notify(&w.bot.id, SignalKind::DirectMentionReceived, &w.general, &calling, burst);
        let responder = scripted("decided");
        let report = w.tick(&settings(mode, PlacementMode::WhereAsked), &responder).await;
        assert!(report.stopped.is_none(), "{mode:?} at {call_at}: {report:?}");
        let seen = responder.seen.lock().unwrap();
        let got: Vec<&str> = seen[0].iter().map(|m| m.text.as_str()).collect();
        let leaked: Vec<&&str> = got.iter().filter(|t| t.contains("after")).collect();
        assert!(leaked.is_empty(), "{mode:?} at {call_at}: the model saw {leaked:?}");
        let mut expected = Vec::new();
        if mode == ContextMode::WholeThread {
            expected.push("Ann Lee (@ann): thread root".to_owned());
        }
        expected.extend((call_at - shown..call_at).map(|i| format!("Bea Ray (@bea): before {i}")));
        expected.push("Ann Lee (@ann): @helper what did we decide?".to_owned());
        assert_eq!(got, expected, "{mode:?} at {call_at}");
    }

    // The room's main timeline, the same way: messages before, none after.
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let burst = w.ago(2);
    let mut calling = String::new();
    for i in 0..REPLIES {
        if i == 60 {
            calling = w.fake.post(&w.general, &w.ann, "@helper and in the room?", burst);
        } else {
            let text = if i < 60 { format!("before {i}") } else { format!("after {i}") };
            w.fake.post(&w.general, &w.bea, &text, burst);
        }
    }
    w.fake.notify(&w.bot.id, SignalKind::DirectMentionReceived, &w.general, &calling, burst);
    let responder = scripted("ok");
    w.tick(&settings(ContextMode::messages_before(5), PlacementMode::WhereAsked), &responder).await;
    let seen = responder.seen.lock().unwrap();
    let got: Vec<&str> = seen[0].iter().map(|m| m.text.as_str()).collect();
    let mut expected: Vec<String> =
        (55..60).map(|i| format!("Bea Ray (@bea): before {i}")).collect();
    expected.push("Ann Lee (@ann): @helper and in the room?".to_owned());
    assert_eq!(got, expected, "room timeline");
}

/// An address the outbound policy refuses is a valid URL: the error says it is not allowed and
/// how to allow it, as `llooma check-address` does. A malformed one is still called invalid.
#[tokio::test]
async fn a_refused_address_is_valid_but_not_allowed_and_says_how_to_allow_it() {
    let w = World::new(&ALL_BOT_PERMISSIONS).await;
    let net = || {
        let policy = OutboundPolicy::public_only();
        NetClient::builder(Arc::new(policy), Purpose::Bot).build().unwrap()
    };
    for address in ["http://10.0.0.5", "http://localhost:8080", w.fake.origin().as_str()] {
        let err = ChattoClient::new(net(), address, Secret::new(&w.bot.key)).unwrap_err();
        let text = err.to_string();
        assert!(!text.contains("not a valid"), "{address}: {text}");
        assert!(text.contains("not allowed"), "{address}: {text}");
        assert!(text.contains("BOT_ALLOWED_ORIGINS"), "{address}: {text}");
        assert!(text.contains("llooma check-address --purpose bot"), "{address}: {text}");
        assert_eq!(err.action(), ErrorAction::Pause, "{address}");
    }
    // Listed, then refused for not being on the list.
    let listed =
        OutboundPolicy::from_allow_lists(None, None, Some("https://chat.example.org")).unwrap();
    let listed = NetClient::builder(Arc::new(listed), Purpose::Bot).build().unwrap();
    let err = ChattoClient::new(listed, "https://other.example.org", Secret::new("k")).unwrap_err();
    let text = err.to_string();
    assert!(!text.contains("not a valid") && text.contains("not allowed"), "{text}");
    assert!(text.contains("BOT_ALLOWED_ORIGINS"), "{text}");
    for malformed in ["ftp://chat.example.org", "chat.example.org", "https://u:p@chat.example.org"]
    {
        let err = ChattoClient::new(net(), malformed, Secret::new("k")).unwrap_err();
        assert!(err.to_string().contains("not a valid"), "{malformed}: {err}");
    }
}

async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !condition() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The polling runtime over one integration of a [`World`], with in-memory storage and a model
/// that always answers the same.
struct Runtime {
    port: Arc<Port>,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

struct Port {
    spec: IntegrationSpec,
    ledger: MemoryLedger,
    answer: String,
    reports: Mutex<Vec<RunReport>>,
}

#[derive(Clone)]
struct Fixed(String);

impl Responder for Fixed {
    type Error = Never;
    async fn respond(&self, _context: &[ModelMessage]) -> Result<String, Never> {
        Ok(self.0.clone())
    }
}

impl RuntimePort for Port {
    type Error = Never;
    type Ledger = MemoryLedger;
    type Responder = Fixed;

    async fn runnable(&self) -> Result<Vec<IntegrationSpec>, Never> {
        Ok(vec![self.spec.clone()])
    }

    async fn claim_lease(
        &self,
        _id: &str,
        _holder: &str,
        _ttl: std::time::Duration,
    ) -> Result<bool, Never> {
        Ok(true)
    }

    async fn release_lease(&self, _id: &str, _holder: &str) -> Result<(), Never> {
        Ok(())
    }

    async fn report(&self, _spec: &IntegrationSpec, report: &RunReport) -> Result<(), Never> {
        self.reports.lock().unwrap().push(report.clone());
        Ok(())
    }

    fn ledger(&self) -> &MemoryLedger {
        &self.ledger
    }

    fn responder(&self, _spec: &IntegrationSpec) -> Fixed {
        Fixed(self.answer.clone())
    }
}

impl Runtime {
    fn start(w: &World, answer: &str) -> Runtime {
        let origin = w.fake.origin();
        let policy = OutboundPolicy::from_allow_lists(None, None, Some(&origin)).unwrap();
        let net = NetClient::builder(Arc::new(policy), Purpose::Bot).build().unwrap();
        let port = Arc::new(Port {
            spec: IntegrationSpec {
                id: "integration-1".into(),
                address: origin,
                key: Secret::new(&w.bot.key),
                settings: settings(ContextMode::OnlyCallingMessage, PlacementMode::WhereAsked),
                version: 1,
            },
            ledger: MemoryLedger::default(),
            answer: answer.to_owned(),
            reports: Mutex::new(Vec::new()),
        });
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let config = RuntimeConfig::new(std::time::Duration::from_millis(100), "replica-1");
        let task = tokio::spawn(runtime::run(port.clone(), net, config, stopped));
        Runtime { port, stop, task }
    }

    async fn wait_for(&self, what: &str, reached: impl Fn(&RunReport) -> bool) {
        eventually(what, || self.port.reports.lock().unwrap().iter().any(&reached)).await;
    }

    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}
