//! Chatto bot integrations through the real binary: the fake Chatto server and the fake model,
//! both on loopback, polled every second (`LLOOMA_BOT_POLL_SECS=1`).

use std::time::{Duration, Instant};

use chrono::Utc;
use llooma_chatto_fake::{
    ALL_BOT_PERMISSIONS, BotStyle, CreateMessageCall, FakeBot, FakeChatto, SignalKind,
};
use llooma_fake_model::{FakeModel, Fallback, Reply};
use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use crate::support::{PASSWORD, Server, Tab, TestDb, engine};

/// A model, a chat server with a bot, two people and two rooms, and a signed-in owner with the
/// model as provider. Fields drop in order: the server stops before its database goes.
struct World {
    model: FakeModel,
    chat: FakeChatto,
    bot: FakeBot,
    ann: String,
    general: String,
    dm: String,
    server: Server,
    tab: Tab,
    provider_id: String,
    db: TestDb,
}

fn env_for<'a>(model: &'a FakeModel, chat: &'a FakeChatto) -> [(&'static str, String); 3] {
    [
        ("PROVIDER_ALLOWED_ORIGINS", model.origin()),
        ("BOT_ALLOWED_ORIGINS", chat.origin()),
        ("LLOOMA_BOT_POLL_SECS", "1".to_owned()),
    ]
}

fn start_server(db: &TestDb, model: &FakeModel, chat: &FakeChatto) -> Server {
    start_server_with(db, model, chat, &[])
}

fn start_server_with(
    db: &TestDb,
    model: &FakeModel,
    chat: &FakeChatto,
    extra: &[(&str, String)],
) -> Server {
    let env = env_for(model, chat);
    let env: Vec<(&str, &str)> = env.iter().chain(extra).map(|(k, v)| (*k, v.as_str())).collect();
    Server::start(db, &env)
}

impl World {
    async fn new(permissions: &[&str], replies: Vec<Reply>) -> World {
        World::with_env(permissions, replies, &[]).await
    }

    async fn with_env(
        permissions: &[&str],
        replies: Vec<Reply>,
        extra: &[(&str, String)],
    ) -> World {
        let model = FakeModel::builder()
            .replies(replies)
            .fallback(Fallback::Echo { chunk_delay_ms: 0 })
            .start()
            .await
            .unwrap();
        let chat = FakeChatto::start().await.unwrap();
        let bot = chat.add_bot("helper", "Helper", BotStyle::IsBotFlag, permissions);
        let ann = chat.add_person("ann", "Ann Lee");
        let general = chat.add_channel("general", &[&bot.id, &ann]);
        let dm = chat.add_dm(&ann, &bot.id);
        let db = TestDb::new();
        let server = start_server_with(&db, &model, &chat, extra);
        let mut tab = server.tab();
        tab.register("root", PASSWORD).await;
        let provider = tab
            .post(
                "/api/v1/admin/providers",
                json!({"name": "fake", "baseUrl": model.base_url(), "apiKey": "sk-fake-provider-key"}),
            )
            .await;
        let provider_id = provider.json["id"].as_str().unwrap().to_owned();
        World { model, chat, bot, ann, general, dm, server, tab, provider_id, db }
    }

    /// Adds the bot with a model and `extra` settings; returns its id.
    async fn add_bot(&mut self, extra: Value) -> String {
        let mut body = json!({
            "address": self.chat.origin(),
            "apiKey": self.bot.key,
            "providerId": self.provider_id,
            "model": "fake-model",
        });
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let added = self.tab.post("/api/v1/bots", body).await;
        assert_eq!(added.status, 201, "{added:?}");
        added.json["id"].as_str().unwrap().to_owned()
    }

    async fn card(&mut self, id: &str) -> Value {
        let card = self.tab.get(&format!("/api/v1/bots/{id}")).await;
        assert_eq!(card.status, 200, "{card:?}");
        card.json
    }

    async fn patch(&mut self, id: &str, body: Value) -> Value {
        let patched = self.tab.send("PATCH", &format!("/api/v1/bots/{id}"), Some(body)).await;
        assert_eq!(patched.status, 200, "{patched:?}");
        patched.json
    }

    /// Waits until the card's `state` is `state`; returns the card.
    async fn card_in_state(&mut self, id: &str, state: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let card = self.card(id).await;
            if card["state"] == state {
                return card;
            }
            assert!(Instant::now() < deadline, "the card never reached {state}: {card}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Ann writes `text` in `room` (main timeline) now, and the bot is notified with `kind`.
    fn ann_says(&self, room: &str, text: &str, kind: SignalKind) -> (String, String) {
        let now = Utc::now();
        let event = self.chat.post(room, &self.ann, text, now);
        let notification = self.chat.notify(&self.bot.id, kind, room, &event, now);
        (event, notification)
    }

    /// The bot's accepted posts.
    fn posts(&self) -> Vec<CreateMessageCall> {
        self.chat
            .create_message_calls()
            .into_iter()
            .filter(|c| c.caller == self.bot.id && c.refused.is_none())
            .collect()
    }

    /// Waits until the bot has made `n` accepted posts, then one more poll cycle for extras.
    async fn posts_settle_at(&self, n: usize) -> Vec<CreateMessageCall> {
        eventually(&format!("{n} posts"), || self.posts().len() >= n).await;
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let posts = self.posts();
        assert_eq!(posts.len(), n, "{posts:#?}");
        posts
    }

    /// The chat requests the model received, as JSON bodies.
    /// What the model was shown of the room in the last request (the system prompt left out).
    fn last_model_messages(&self) -> Vec<(String, String)> {
        let bodies = self.model.chat_bodies();
        let last = bodies.last().expect("the model was asked");
        last["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] != "system")
            .map(|m| {
                (
                    m["role"].as_str().unwrap_or_default().to_owned(),
                    m["content"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }
}

async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_bot_is_checked_before_it_is_saved_and_its_key_never_comes_back() {
    let mut w = World::new(&ALL_BOT_PERMISSIONS, vec![]).await;
    let origin = w.chat.origin();

    let tested =
        w.tab.post("/api/v1/bots/test", json!({"address": origin, "apiKey": w.bot.key})).await;
    assert_eq!(tested.status, 200, "{tested:?}");
    assert_eq!(tested.json["bot"]["login"], "helper");

    // A person's key, a wrong key, a blocked address: refused, nothing saved.
    let person_key = w.chat.issue_key(&w.ann);
    let person = w.tab.post("/api/v1/bots", json!({"address": origin, "apiKey": person_key})).await;
    assert_eq!((person.status, person.json["error"].as_str()), (422, Some("not_a_bot")));
    assert!(person.json["message"].as_str().unwrap().contains("@ann"), "{person:?}");
    let wrong =
        w.tab.post("/api/v1/bots", json!({"address": origin, "apiKey": "cht_BK_x.nope"})).await;
    assert_eq!((wrong.status, wrong.json["error"].as_str()), (422, Some("key_refused")));
    let blocked = w
        .tab
        .post("/api/v1/bots", json!({"address": "http://10.0.0.5", "apiKey": w.bot.key}))
        .await;
    assert_eq!(
        (blocked.status, blocked.json["error"].as_str()),
        (422, Some("address_not_allowed"))
    );
    // A valid address the policy refuses: said so, with the setting that allows it.
    let said = blocked.json["message"].as_str().unwrap();
    assert!(!said.contains("not a valid"), "{said}");
    assert!(
        said.contains("valid but not allowed") && said.contains("BOT_ALLOWED_ORIGINS"),
        "{said}"
    );
    let bad = w
        .tab
        .post(
            "/api/v1/bots",
            json!({"address": origin, "apiKey": w.bot.key, "context": {"mode": "messages_before", "count": 41}}),
        )
        .await;
    assert_eq!((bad.status, bad.json["error"].as_str()), (400, Some("invalid_context")));
    let bad = w
        .tab
        .post(
            "/api/v1/bots",
            json!({"address": origin, "apiKey": w.bot.key, "tools": ["ask_user"]}),
        )
        .await;
    assert_eq!((bad.status, bad.json["error"].as_str()), (400, Some("invalid_tools")));
    assert_eq!(w.tab.get("/api/v1/bots").await.json, json!([]));

    // Saved without a model: enabled, but it says it needs one, and it answers nothing.
    let added = w
        .tab
        .post(
            "/api/v1/bots",
            json!({"address": origin, "apiKey": w.bot.key, "tools": ["current_date", "web_search"], "mcp": true}),
        )
        .await;
    assert_eq!(added.status, 201, "{added:?}");
    let id = added.json["id"].as_str().unwrap().to_owned();
    assert_eq!(added.json["state"], "needs_model");
    assert_eq!(added.json["enabled"], true);
    assert_eq!(added.json["bot"]["login"], "helper");
    assert_eq!(added.json["hasKey"], true);
    assert_eq!(added.json["tools"]["effective"], json!(["current_date"]));
    assert_eq!(added.json["tools"]["unavailable"], json!(["web_search"]));
    assert!(added.json["mcpWarning"].as_str().unwrap().contains("without asking you"));
    w.ann_says(&w.general.clone(), "@helper hello?", SignalKind::DirectMentionReceived);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(w.posts().is_empty());

    // Another account sees nothing of it.
    w.tab.send("PATCH", "/api/v1/admin/settings", Some(json!({"registrationOpen": true}))).await;
    let mut other = w.server.tab();
    assert_eq!(other.register("bea", PASSWORD).await.status, 201);
    assert_eq!(other.get("/api/v1/bots").await.json, json!([]));
    assert_eq!(other.get(&format!("/api/v1/bots/{id}")).await.status, 404);
    let path = format!("/api/v1/bots/{id}");
    assert_eq!(other.send("PATCH", &path, Some(json!({"enabled": false}))).await.status, 404);
    assert_eq!(other.send("DELETE", &path, None).await.status, 404);

    // Choosing a model starts it; the waiting mention is answered.
    let card = w.patch(&id, json!({"providerId": w.provider_id, "model": "fake-model"})).await;
    assert_eq!(card["state"], "starting");
    w.card_in_state(&id, "running").await;
    w.posts_settle_at(1).await;

    // The key is in no response and no log line.
    let everything = format!(
        "{}{}{}{}",
        w.tab.get("/api/v1/bots").await.text,
        w.tab.get(&path).await.text,
        added.text,
        w.server.log_text()
    );
    assert!(!everything.contains(&w.bot.key), "the key leaked");
    let secret = w.bot.key.split('.').nth(1).unwrap();
    assert!(!everything.contains(secret), "the key leaked");

    assert_eq!(w.tab.send("DELETE", &path, None).await.status, 204);
    assert_eq!(w.tab.get(&path).await.status, 404);
}

#[tokio::test]
async fn the_four_kinds_wake_the_bot_once_and_nothing_else_does() {
    let mut w = World::new(&ALL_BOT_PERMISSIONS, vec![]).await;
    let general = w.general.clone();
    let dm = w.dm.clone();
    let (_, in_dm) = w.ann_says(&dm, "hi there", SignalKind::DirectMessageReceived);
    let (mention, _) = w.ann_says(&general, "@helper one", SignalKind::DirectMentionReceived);
    // The same message also a reply: still one answer.
    w.chat.notify(&w.bot.id, SignalKind::ReplyReceived, &general, &mention, Utc::now());
    w.ann_says(&general, "two", SignalKind::ReplyReceived);
    let root = w.chat.post(&general, &w.ann, "a thread", Utc::now());
    let in_thread = w.chat.post_in_thread(&general, &root, &w.ann, "three", Utc::now(), false);
    w.chat.notify(&w.bot.id, SignalKind::FollowedThreadActivity, &general, &in_thread, Utc::now());
    let mut ignored = Vec::new();
    for kind in [
        SignalKind::RoleMentionReceived,
        SignalKind::HereMentionReceived,
        SignalKind::AllMentionReceived,
        SignalKind::FollowedRoomActivity,
        SignalKind::ReactionReceived,
    ] {
        ignored.push(w.ann_says(&general, &format!("ignored {kind:?}"), kind).1);
    }
    w.add_bot(json!({})).await;

    let posts = w.posts_settle_at(4).await;
    let bodies: Vec<&str> = posts.iter().map(|p| p.body.as_str()).collect();
    // The echo model repeats what it was shown last: the speaker is named in the text.
    assert!(bodies.contains(&"Ann Lee (@ann): hi there"), "{bodies:?}");
    assert!(bodies.iter().any(|b| b.ends_with("@helper one")), "{bodies:?}");
    assert!(bodies.iter().any(|b| b.ends_with(": two")), "{bodies:?}");
    assert!(bodies.iter().any(|b| b.ends_with(": three")), "{bodies:?}");
    assert!(!bodies.iter().any(|b| b.contains("ignored")), "{bodies:?}");
    let thread_answer = posts.iter().find(|p| p.body.ends_with(": three")).unwrap();
    assert_eq!(thread_answer.thread_root_event_id.as_deref(), Some(root.as_str()));
    // Everything it saw is marked read, ignored kinds included.
    assert!(!w.chat.is_unread(&in_dm));
    for n in &ignored {
        assert!(!w.chat.is_unread(n), "ignored notices are marked read too");
    }
}

#[tokio::test]
async fn each_context_mode_shows_the_model_what_it_says() {
    let mut w = World::new(&ALL_BOT_PERMISSIONS, vec![]).await;
    let general = w.general.clone();
    let t0 = Utc::now() - chrono::Duration::minutes(5);
    let at = |s: i64| t0 + chrono::Duration::seconds(s);
    for i in 0..8 {
        w.chat.post(&general, &w.ann, &format!("earlier {i}"), at(i));
    }
    w.chat.post(&general, &w.bot.id, "my own earlier answer", at(9));
    let calling = w.chat.post(&general, &w.ann, "@helper what now?", at(10));
    w.chat.post(&general, &w.ann, "written after the question", at(11));
    let id = w
        .add_bot(json!({"context": {"mode": "messages_before", "count": 3}, "enabled": false}))
        .await;

    // Messages before (3): the last three before the call, the bot's own as assistant, nothing
    // written after it.
    w.patch(&id, json!({"enabled": true})).await;
    w.chat.notify(&w.bot.id, SignalKind::DirectMentionReceived, &general, &calling, Utc::now());
    w.posts_settle_at(1).await;
    let shown = w.last_model_messages();
    assert_eq!(
        shown,
        vec![
            ("user".to_owned(), "Ann Lee (@ann): earlier 6".to_owned()),
            ("user".to_owned(), "Ann Lee (@ann): earlier 7".to_owned()),
            ("assistant".to_owned(), "my own earlier answer".to_owned()),
            ("user".to_owned(), "Ann Lee (@ann): @helper what now?".to_owned()),
        ]
    );

    // Only the calling message.
    w.patch(&id, json!({"context": {"mode": "calling_message"}})).await;
    let (_, _) = w.ann_says(&general, "@helper alone?", SignalKind::DirectMentionReceived);
    w.posts_settle_at(2).await;
    assert_eq!(
        w.last_model_messages(),
        vec![("user".to_owned(), "Ann Lee (@ann): @helper alone?".to_owned())]
    );

    // The whole thread, root included, and not what came after.
    w.patch(&id, json!({"context": {"mode": "whole_thread"}})).await;
    let root = w.chat.post(&general, &w.ann, "thread root", at(20));
    w.chat.post_in_thread(&general, &root, &w.ann, "first reply", at(21), false);
    let call = w.chat.post_in_thread(&general, &root, &w.ann, "@helper in thread?", at(22), false);
    w.chat.post_in_thread(&general, &root, &w.ann, "after it", at(23), false);
    w.chat.notify(&w.bot.id, SignalKind::DirectMentionReceived, &general, &call, Utc::now());
    w.posts_settle_at(3).await;
    assert_eq!(
        w.last_model_messages(),
        vec![
            ("user".to_owned(), "Ann Lee (@ann): thread root".to_owned()),
            ("user".to_owned(), "Ann Lee (@ann): first reply".to_owned()),
            ("user".to_owned(), "Ann Lee (@ann): @helper in thread?".to_owned()),
        ]
    );
}

#[tokio::test]
async fn each_placement_lands_where_it_says_and_long_answers_are_split() {
    let long: String = (0..30)
        .map(|i| format!("Paragraph {i}: {}", "words ".repeat(150)))
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut w = World::new(&ALL_BOT_PERMISSIONS, vec![Reply::text(long.clone())]).await;
    let general = w.general.clone();
    let id = w.add_bot(json!({})).await;

    // Where asked, in the room: a long answer in parts under the limit, the attribution on the
    // first only, and the bot follows the mention's thread so the next question needs no @.
    let (asked, _) =
        w.ann_says(&general, "@helper tell me everything", SignalKind::DirectMentionReceived);
    eventually("the long answer", || w.posts().len() >= 2).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let parts = w.posts();
    assert!(parts.len() >= 2, "{}", parts.len());
    assert!(parts.iter().all(|p| p.body.len() <= 10_000));
    assert_eq!(parts.iter().map(|p| p.body.as_str()).collect::<Vec<_>>().join("\n\n"), long);
    assert!(parts.iter().all(|p| p.thread_root_event_id.is_none()));
    assert_eq!(parts[0].in_reply_to.as_deref(), Some(asked.as_str()));
    assert!(parts[1..].iter().all(|p| p.in_reply_to.is_none()));
    assert!(w.chat.is_following(&w.bot.id, &general, &asked));
    let before = parts.len();

    // Always in a thread: a question in the open gets a thread rooted on it.
    w.patch(&id, json!({"placement": "always_thread"})).await;
    let (asked, _) =
        w.ann_says(&general, "@helper in a thread please", SignalKind::DirectMentionReceived);
    let posts = w.posts_settle_at(before + 1).await;
    assert_eq!(posts[before].thread_root_event_id.as_deref(), Some(asked.as_str()));
    // ... but a DM has no threads.
    let dm = w.dm.clone();
    w.ann_says(&dm, "in the dm", SignalKind::DirectMessageReceived);
    let posts = w.posts_settle_at(before + 2).await;
    assert_eq!(
        (posts[before + 1].room_id.as_str(), posts[before + 1].thread_root_event_id.as_deref()),
        (dm.as_str(), None)
    );

    // Always in the room: a threaded question comes back in the room, attributed.
    w.patch(&id, json!({"placement": "always_room"})).await;
    let root = w.chat.post(&general, &w.ann, "root", Utc::now());
    let reply =
        w.chat.post_in_thread(&general, &root, &w.ann, "@helper from a thread", Utc::now(), false);
    w.chat.notify(&w.bot.id, SignalKind::DirectMentionReceived, &general, &reply, Utc::now());
    let posts = w.posts_settle_at(before + 3).await;
    assert_eq!(posts[before + 2].thread_root_event_id, None);
    assert_eq!(posts[before + 2].in_reply_to.as_deref(), Some(reply.as_str()));

    // Where asked, from a thread: into that thread.
    w.patch(&id, json!({"placement": "where_asked"})).await;
    let reply = w.chat.post_in_thread(&general, &root, &w.ann, "@helper again", Utc::now(), false);
    w.chat.notify(&w.bot.id, SignalKind::DirectMentionReceived, &general, &reply, Utc::now());
    let posts = w.posts_settle_at(before + 4).await;
    assert_eq!(posts[before + 3].thread_root_event_id.as_deref(), Some(root.as_str()));
}

#[tokio::test]
async fn guard_rails_sixty_an_hour_nothing_old_nothing_from_bots() {
    let mut w = World::new(&ALL_BOT_PERMISSIONS, vec![]).await;
    let general = w.general.clone();
    let other_bot = w.chat.add_bot("other", "Other bot", BotStyle::BotObject, &ALL_BOT_PERMISSIONS);
    let now = Utc::now();
    // A 20-minute-old mention, and a mention written by another bot.
    let old =
        w.chat.post(&general, &w.ann, "@helper from long ago", now - chrono::Duration::minutes(20));
    w.chat.notify(
        &w.bot.id,
        SignalKind::DirectMentionReceived,
        &general,
        &old,
        now - chrono::Duration::minutes(20),
    );
    let by_bot = w.chat.post(&general, &other_bot.id, "@helper loop with me", now);
    w.chat.notify(&w.bot.id, SignalKind::DirectMentionReceived, &general, &by_bot, now);
    // A flood of a hundred mentions.
    for i in 0..100 {
        w.ann_says(&general, &format!("@helper flood {i}"), SignalKind::DirectMentionReceived);
    }
    w.add_bot(json!({"context": {"mode": "calling_message"}})).await;
    // Sixty answers in one poll, one after the other: generous on a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(240);
    while w.posts().len() < 60 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Every notice gets handled (read), and still no 61st reply.
    let read = || w.chat.mark_read_calls().iter().filter(|c| c.caller == w.bot.id).count();
    let deadline = Instant::now() + Duration::from_secs(60);
    while read() < 102 {
        let log = w.server.log_text();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        assert!(
            Instant::now() < deadline,
            "{} posts, {} notices read; server log (newest first):\n{}",
            w.posts().len(),
            read(),
            tail.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let posts = w.posts();
    assert_eq!(posts.len(), 60);
    assert!(!posts.iter().any(|p| p.body.contains("long ago") || p.body.contains("loop")));
    // Answered in the order asked.
    assert!(posts[0].body.ends_with("flood 0"), "{}", posts[0].body);
    assert!(posts[59].body.ends_with("flood 59"), "{}", posts[59].body);
}

#[tokio::test]
async fn a_crash_between_recording_and_posting_never_posts_twice() {
    // The model takes its time: the server dies while it writes.
    let slow = Reply::text("too late").chunks(4).chunk_delay_ms(3_000);
    let mut w = World::new(&ALL_BOT_PERMISSIONS, vec![slow]).await;
    let general = w.general.clone();
    let (asked, notification) =
        w.ann_says(&general, "@helper slow one", SignalKind::DirectMentionReceived);
    w.add_bot(json!({})).await;
    eventually("the model being asked", || !w.model.chat_bodies().is_empty()).await;
    // Killed (SIGKILL) after recording, before posting; back on the same database.
    w.server.kill();
    w.server = start_server(&w.db, &w.model, &w.chat);
    eventually("the notice handled after the restart", || !w.chat.is_unread(&notification)).await;
    tokio::time::sleep(Duration::from_millis(3000)).await;
    assert!(w.posts().is_empty(), "{:?}", w.posts());
    assert_eq!(w.model.chat_bodies().len(), 1, "the model is not asked again");
    // A new question is answered normally.
    w.ann_says(&general, "@helper next one", SignalKind::DirectMentionReceived);
    eventually("the next answer", || w.posts().len() == 1).await;
    assert!(w.posts()[0].in_reply_to.as_deref() != Some(asked.as_str()));
}

#[tokio::test]
async fn failures_back_off_slow_down_or_pause_with_the_reason() {
    let mut w = World::new(&["message.read", "message.post-in-thread"], vec![]).await;
    let general = w.general.clone();
    let id = w.add_bot(json!({})).await;
    w.card_in_state(&id, "running").await;

    // Missing `message.post`: paused, the permission named, nothing posted.
    let (_, first) = w.ann_says(&general, "@helper one", SignalKind::DirectMentionReceived);
    let card = w.card_in_state(&id, "paused").await;
    assert_eq!(card["missingPermission"], "message.post");
    assert!(card["status"].as_str().unwrap().contains("`message.post`"), "{card}");
    assert!(w.posts().is_empty());
    // Granted, and the owner says so by changing anything: it runs again. The call was recorded
    // before the model wrote, so that one stays unanswered; the next is answered.
    w.chat.set_permissions(&w.bot.id, &ALL_BOT_PERMISSIONS);
    w.patch(&id, json!({"enabled": true})).await;
    w.card_in_state(&id, "running").await;
    eventually("the first notice handled", || !w.chat.is_unread(&first)).await;
    w.ann_says(&general, "@helper two", SignalKind::DirectMentionReceived);
    w.posts_settle_at(1).await;

    // Without `message.read` the room cannot be read: paused, naming it.
    w.chat.set_permissions(&w.bot.id, &["message.post", "message.post-in-thread"]);
    w.ann_says(&general, "@helper three", SignalKind::DirectMentionReceived);
    let card = w.card_in_state(&id, "paused").await;
    assert_eq!(card["missingPermission"], "message.read");
    w.chat.set_permissions(&w.bot.id, &ALL_BOT_PERMISSIONS);
    w.patch(&id, json!({"enabled": true})).await;
    w.posts_settle_at(2).await;

    // The server goes down: backing off, said on the card; back up, it answers again.
    w.chat.set_unavailable(true);
    let card = w.card_in_state(&id, "backing_off").await;
    assert!(
        card["lastError"].as_str().unwrap().contains("could not reach the chat server"),
        "{card}"
    );
    w.ann_says(&general, "@helper while down", SignalKind::DirectMentionReceived);
    w.chat.set_unavailable(false);
    w.card_in_state(&id, "running").await;
    w.posts_settle_at(3).await;

    // Slow mode: slowed down, and the answer is posted once the room allows it again.
    w.chat.set_slow_mode(&general, true);
    w.ann_says(&general, "@helper in slow mode", SignalKind::DirectMentionReceived);
    w.card_in_state(&id, "slowed_down").await;
    w.chat.set_slow_mode(&general, false);
    let posts = w.posts_settle_at(4).await;
    assert!(posts[3].body.ends_with("in slow mode"), "{}", posts[3].body);

    // The key is revoked: paused with the reason; a new key brings it back.
    w.chat.revoke_key(&w.bot.key);
    let card = w.card_in_state(&id, "paused").await;
    assert!(card["status"].as_str().unwrap().contains("API key"), "{card}");
    let new_key = w.chat.issue_key(&w.bot.id);
    w.patch(&id, json!({"apiKey": new_key})).await;
    w.card_in_state(&id, "running").await;
    w.ann_says(&general, "@helper new key", SignalKind::DirectMentionReceived);
    w.posts_settle_at(5).await;
}

#[tokio::test]
async fn two_replicas_on_postgres_poll_each_bot_once_and_take_over() {
    if engine() != "postgres" {
        return; // several replicas need Postgres (SQLite is one process's file)
    }
    let mut w = World::new(&ALL_BOT_PERMISSIONS, vec![]).await;
    let general = w.general.clone();
    let id = w.add_bot(json!({})).await;
    let mut second = start_server(&w.db, &w.model, &w.chat);
    for i in 0..5 {
        w.ann_says(&general, &format!("@helper q{i}"), SignalKind::DirectMentionReceived);
    }
    w.posts_settle_at(5).await;
    // One poller: each notice listed by one replica only (one GetViewer per poller start).
    let holder_log = |s: &Server| s.log_text().matches("polling a bot integration").count();
    assert_eq!(holder_log(&w.server) + holder_log(&second), 1);

    // The holder dies; the other replica takes over once the lease expires.
    if holder_log(&w.server) == 1 {
        w.server.kill();
    } else {
        second.kill();
    }
    w.ann_says(&general, "@helper after the crash", SignalKind::DirectMentionReceived);
    let posts = w.posts_settle_at(6).await;
    assert!(posts[5].body.ends_with("after the crash"));
    let _ = id;
}

#[tokio::test]
async fn the_answer_comes_from_the_bots_model_with_its_instructions_and_ticked_tools() {
    let replies = vec![
        Reply::tool_call("current_date", json!({})),
        Reply::text("It is the day you think it is."),
    ];
    let mut w = World::new(&ALL_BOT_PERMISSIONS, replies).await;
    let general = w.general.clone();
    let id = w
        .add_bot(json!({
            "identity": {"source": "instructions", "instructions": "You are Helper, brief and kind."},
            "tools": ["current_date", "web_search"],
            "context": {"mode": "calling_message"},
        }))
        .await;
    w.ann_says(&general, "@helper what day is it?", SignalKind::DirectMentionReceived);
    let posts = w.posts_settle_at(1).await;
    assert_eq!(posts[0].body, "It is the day you think it is.");
    let bodies = w.model.chat_bodies();
    assert_eq!(bodies.len(), 2, "one tool round, then the answer");
    let first = &bodies[0];
    assert_eq!(first["model"], "fake-model");
    assert_eq!(
        first["messages"][0],
        json!({"role": "system", "content": "You are Helper, brief and kind."})
    );
    // Only what is ticked and provided: web search is not provided here, so it stays off.
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["current_date"]);
    let second = bodies[1]["messages"].as_array().unwrap();
    assert!(second.iter().any(|m| m["role"] == "tool"), "the tool ran: {second:?}");

    // Nothing ticked: no tools offered; the usual system prompt instead of the instructions.
    w.patch(&id, json!({"tools": [], "identity": {"source": "system_prompt"}})).await;
    w.ann_says(&general, "@helper and now?", SignalKind::DirectMentionReceived);
    w.posts_settle_at(2).await;
    let last = w.model.chat_bodies().pop().unwrap();
    assert!(last.get("tools").is_none_or(|t| t.as_array().is_some_and(Vec::is_empty)), "{last}");
    assert_eq!(last["messages"][0]["role"], "system");
    let usual = last["messages"][0]["content"].as_str().unwrap();
    assert!(!usual.contains("You are Helper"), "{usual}");
    assert_eq!(last["messages"][1]["role"], "user");
    // No conversation was created for any of it.
    assert_eq!(w.tab.get("/api/v1/conversations").await.json, json!([]));
}

#[tokio::test]
async fn a_bots_replies_count_to_its_owner_and_past_their_limit_it_stays_silent_saying_why() {
    let mut w =
        World::new(&ALL_BOT_PERMISSIONS, vec![Reply::text("Counted.").usage(900, 100)]).await;
    let general = w.general.clone();
    let id = w.add_bot(json!({})).await;
    w.ann_says(&general, "@helper hello", SignalKind::DirectMentionReceived);
    w.posts_settle_at(1).await;
    let usage = w.tab.get("/api/v1/usage").await.json;
    assert_eq!(
        (usage["totals"]["requests"].as_u64(), usage["totals"]["outputTokens"].as_u64()),
        (Some(1), Some(100))
    );

    let limits = json!({"tokensPerDay": 1_000});
    assert_eq!(w.tab.send("PUT", "/api/v1/admin/limits", Some(limits)).await.status, 200);
    let asked = w.model.requests().len();
    w.ann_says(&general, "@helper again", SignalKind::DirectMentionReceived);
    let deadline = Instant::now() + Duration::from_secs(30);
    let card = loop {
        let card = w.card(&id).await;
        if card["lastError"].as_str().is_some_and(|e| e.contains("limit")) {
            break card;
        }
        assert!(Instant::now() < deadline, "the card never said why: {card}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let said = card["lastError"].as_str().unwrap();
    assert!(
        said.contains("limits of the bot's owner") && said.contains("1000 tokens a day"),
        "{said}"
    );
    assert_eq!(w.posts().len(), 1, "nothing more was posted");
    assert_eq!(w.model.requests().len(), asked, "the model was not asked");
}

#[tokio::test]
async fn a_rotated_instance_secret_keeps_the_bot_running() {
    let mut w = World::new(&ALL_BOT_PERMISSIONS, vec![]).await;
    let general = w.general.clone();
    w.add_bot(json!({})).await;
    w.server.kill();
    let (ok, _, stderr) = crate::support::run_cli(&w.db, &["rotate-secret"], &[]);
    assert!(ok, "{stderr}");
    w.server = start_server(&w.db, &w.model, &w.chat);
    w.ann_says(&general, "@helper after rotation", SignalKind::DirectMentionReceived);
    w.posts_settle_at(1).await;
}

#[tokio::test]
async fn mcp_tools_are_offered_only_when_ticked_and_then_run_unasked() {
    let Some(peer) = crate::peers::gateway(None) else { return };
    let extra = [("MCP_ALLOWED_ORIGINS", peer.origin())];
    let mut w = World::with_env(&ALL_BOT_PERMISSIONS, vec![], &extra).await;
    let general = w.general.clone();
    let added =
        w.tab.post("/api/v1/mcp/servers", json!({"label": "hub", "address": peer.url()})).await;
    assert_eq!(added.status, 201, "{added:?}");
    let tools = added.json["tools"].as_array().unwrap();
    let turn_on =
        tools.iter().find(|t| t["name"] == "home-assistant-turn_on").unwrap()["modelName"]
            .as_str()
            .unwrap()
            .to_owned();

    // Not ticked: no MCP tool reaches the model.
    let id = w.add_bot(json!({"context": {"mode": "calling_message"}})).await;
    w.ann_says(&general, "@helper lights?", SignalKind::DirectMentionReceived);
    w.posts_settle_at(1).await;
    assert!(!w.model.chat_bodies()[0].to_string().contains(&turn_on));

    // Ticked: offered, and the call runs without a card (the tick is the consent), recorded.
    w.patch(&id, json!({"mcp": true})).await;
    w.model.push(Reply::tool_call(&turn_on, json!({"entity_id": "light.kitchen"})));
    w.model.push(Reply::text("Done, the light is on."));
    w.ann_says(&general, "@helper kitchen light on", SignalKind::DirectMentionReceived);
    let posts = w.posts_settle_at(2).await;
    assert_eq!(posts[1].body, "Done, the light is on.");
    let bodies = w.model.chat_bodies();
    assert!(bodies[1].to_string().contains(&turn_on));
    assert!(bodies[2].to_string().contains("light.kitchen is on"), "{}", bodies[2]);
    assert_eq!(w.tab.get("/api/v1/approvals").await.json.as_array().map(Vec::len), Some(0));
    let conn = crate::support::connect(&w.db).await;
    let rows = conn
        .query_all_raw(sea_orm::Statement::from_string(
            conn.get_database_backend(),
            "SELECT answered_by, state FROM approval_calls",
        ))
        .await
        .unwrap();
    let recorded: Vec<(String, String)> = rows
        .iter()
        .map(|r| (r.try_get_by_index(0).unwrap(), r.try_get_by_index(1).unwrap()))
        .collect();
    assert_eq!(recorded, [("bot".to_owned(), "allowed".to_owned())]);
    conn.close().await.unwrap();

    // A question the server asks during a bot's call has nobody to answer it: declined, and no
    // card appears anywhere.
    let thermostat =
        tools.iter().find(|t| t["name"] == "home-assistant-set_thermostat").unwrap()["modelName"]
            .as_str()
            .unwrap()
            .to_owned();
    w.model.push(Reply::tool_call(&thermostat, json!({"room": "hall"})));
    w.model.push(Reply::text("The hall stays as it is."));
    w.ann_says(&general, "@helper heat the hall", SignalKind::DirectMentionReceived);
    let posts = w.posts_settle_at(3).await;
    assert_eq!(posts[2].body, "The hall stays as it is.");
    let bodies = w.model.chat_bodies();
    assert!(bodies[4].to_string().contains("the person chose decline"), "{}", bodies[4]);
    assert_eq!(w.tab.get("/api/v1/approvals").await.json.as_array().map(Vec::len), Some(0));

    // Nor can it let its model answer the server's own request for a completion: refused, the
    // model never reads the server's request, and the call ends with why.
    let summarize = tools.iter().find(|t| t["name"] == "gateway-summarize").unwrap()["modelName"]
        .as_str()
        .unwrap()
        .to_owned();
    w.model.push(Reply::tool_call(&summarize, json!({"text": "the minutes of Monday"})));
    w.model.push(Reply::text("No summary, then."));
    w.ann_says(&general, "@helper summarize the minutes", SignalKind::DirectMentionReceived);
    let posts = w.posts_settle_at(4).await;
    assert_eq!(posts[3].body, "No summary, then.");
    let bodies = w.model.chat_bodies();
    let last = bodies.last().unwrap().to_string();
    assert!(last.contains("was not sent again") && last.contains("refused"), "{last}");
    assert!(
        bodies.iter().all(|b| !b.to_string().contains("Summarize: the minutes")),
        "the server's request reached the bot's model"
    );
    assert_eq!(w.tab.get("/api/v1/approvals").await.json.as_array().map(Vec::len), Some(0));
}
