//! Conversations of an account, and sending a message: the turn it starts runs in the server
//! (see [`crate::turns`]), its reply is followed on the conversation's log.

use std::collections::{BTreeMap, HashMap};

use llooma_providers::{EncodedMessages, Message};
use llooma_store::{Conversation, ConversationPatch, TurnContext};
use llooma_types::{
    ConversationDetail, ConversationView, EndState, MessageView, Reply, StepState, TurnEvent,
    TurnStarted,
};
use llooma_vault::Secret;

use crate::files::{MAX_FILES_PER_MESSAGE, by_turn, file_view, message_with_files};
use crate::history_cache::KeepHistory;
use crate::long_conversations::Window;
use crate::setup::{AppTools, McpUse, TurnPlan};
use crate::turns::LogSink;
use crate::{App, AppError, Attachment, AttachmentKind, Speaker, TurnEnd, TurnRequest, TurnSink};

/// The longest message a person may send, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024;
/// Most resources and prompts one message brings.
pub const MAX_ATTACHMENTS: usize = 5;
/// The longest title, in characters.
const MAX_TITLE_CHARS: usize = 200;

/// A conversation as the API shows it.
pub fn conversation_view(c: &Conversation) -> ConversationView {
    ConversationView {
        id: c.id.clone(),
        title: c.title.clone(),
        provider_id: c.provider_id.clone(),
        model: c.model.clone(),
        mcp_enabled: c.mcp_enabled,
        persona_id: c.persona_id.clone(),
        created_at: llooma_store::ms_to_rfc3339(c.created_at_ms),
        updated_at: llooma_store::ms_to_rfc3339(c.updated_at_ms),
    }
}

/// A new conversation's settings.
#[derive(Debug, Default)]
pub struct NewConversation {
    pub title: Option<String>,
    pub provider_id: Option<String>,
    pub model: Option<String>,
    pub persona_id: Option<String>,
    /// Without a provider and model: start with the account's last used model, else the
    /// instance's default.
    pub last_used_model: bool,
}

/// A change to a conversation; absent fields stay.
#[derive(Debug, Default)]
pub struct ConversationChange {
    pub title: Option<String>,
    pub provider_id: Option<String>,
    pub model: Option<String>,
    pub mcp_enabled: Option<bool>,
    /// A persona's id, or an empty string for none.
    pub persona_id: Option<String>,
}

/// What the person sends: the text, and the resources and prompts they chose (`@`, `/`).
#[derive(Debug)]
pub struct NewMessage {
    pub content: String,
    pub resources: Vec<ChosenResource>,
    pub prompts: Vec<ChosenPrompt>,
    /// Files uploaded to the conversation (`POST .../files`) that go with this message.
    pub files: Vec<String>,
    /// A turn whose message this one replaces, with everything after it.
    pub replaces: Option<String>,
    /// Said aloud in voice mode: a spoken turn, whose MCP calls are refused outright.
    pub spoken: bool,
}

/// A resource the person chose: one the server lists (`uri`), or one of its templates with the
/// blanks filled in (`uri_template` and `arguments`: the address is built here, each value
/// checked, not in the browser).
#[derive(Debug)]
pub struct ChosenResource {
    pub server_id: String,
    pub uri: Option<String>,
    pub uri_template: Option<String>,
    pub arguments: BTreeMap<String, String>,
}

/// A prompt the person chose, with its arguments.
#[derive(Debug)]
pub struct ChosenPrompt {
    pub server_id: String,
    pub name: String,
    pub arguments: BTreeMap<String, String>,
}

impl ChosenResource {
    /// The address to read: the one given, or the template filled in.
    fn address(&self) -> Result<String, AppError> {
        match (&self.uri, &self.uri_template) {
            (Some(uri), None) if self.arguments.is_empty() => Ok(uri.clone()),
            (None, Some(template)) => {
                llooma_mcp_client::template::expand(template, &self.arguments).map_err(|err| {
                    AppError::invalid(
                        "invalid_template_value",
                        format!(
                            "The resource template {template} cannot be filled in: {err}. \
                             Change the value and send again."
                        ),
                    )
                })
            }
            _ => Err(AppError::invalid(
                "invalid_resource",
                "A chosen resource has either a uri, or a uriTemplate with its arguments.",
            )),
        }
    }
}

/// A chosen resource or prompt with the server to ask for it.
struct Chosen {
    label: String,
    address: String,
    token: Option<Secret>,
    what: ChosenWhat,
}

enum ChosenWhat {
    Resource(String),
    Prompt(String, BTreeMap<String, String>),
}

/// Conversations one page lists when the caller does not say, and at most.
pub const PAGE_DEFAULT: u64 = 50;
pub const PAGE_MAX: u64 = 200;

/// A page boundary: the last conversation's activity time and id, as `<ms>.<id>`.
fn cursor(c: &Conversation) -> String {
    format!("{}.{}", c.updated_at_ms, c.id)
}

fn parse_cursor(text: &str) -> Option<(i64, &str)> {
    let (ms, id) = text.split_once('.')?;
    let ms = ms.parse().ok()?;
    (!id.is_empty()).then_some((ms, id))
}

/// How many conversations a page lists: `limit`, else the default, within 1 to the maximum.
fn page_limit(limit: Option<u64>) -> Result<u64, AppError> {
    let limit = limit.unwrap_or(PAGE_DEFAULT);
    if !(1..=PAGE_MAX).contains(&limit) {
        return Err(AppError::invalid(
            "invalid_limit",
            format!("A page lists 1 to {PAGE_MAX} conversations."),
        ));
    }
    Ok(limit)
}

/// What the model is told when asked to name a conversation.
const TITLE_PROMPT: &str = "Write a title for this conversation: at most six words, in the \
    language of the person's message, no quotes, no punctuation at the end. Answer with the \
    title only.";

/// What naming a conversation by the model needs, read when its first message was sent.
struct Naming {
    account_id: String,
    provider_id: String,
    model: String,
    /// The first message.
    asked: String,
    /// The limits the account's requests are under, and the currency they are written in.
    limits: llooma_store::UsageLimits,
    currency: String,
}

/// The longest search, in bytes.
const MAX_SEARCH_BYTES: usize = 200;

/// The title a conversation gets when none is given; its first message then names it.
const UNTITLED: &str = "New conversation";

/// A title made from a first message: its first line, cut at a word to at most 60 characters.
fn title_from(message: &str) -> String {
    const LONGEST: usize = 60;
    let line = message.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or(UNTITLED);
    if line.chars().count() <= LONGEST {
        return line.to_owned();
    }
    let cut: String = line.chars().take(LONGEST).collect();
    let whole_word = line.chars().nth(LONGEST).is_some_and(char::is_whitespace);
    let cut = match cut.rfind(char::is_whitespace) {
        Some(space) if !whole_word && space > LONGEST / 2 => &cut[..space],
        _ => cut.as_str(),
    };
    format!("{}…", cut.trim_end())
}

fn clean_title(title: Option<&str>) -> Result<String, AppError> {
    let title = title.map(str::trim).filter(|t| !t.is_empty()).unwrap_or(UNTITLED);
    if title.chars().count() > MAX_TITLE_CHARS {
        return Err(AppError::invalid(
            "invalid_title",
            format!("A title has at most {MAX_TITLE_CHARS} characters."),
        ));
    }
    Ok(title.to_owned())
}

impl App {
    /// The account's conversation (another account's id is not found).
    pub async fn conversation(&self, account_id: &str, id: &str) -> Result<Conversation, AppError> {
        self.store.conversation(account_id, id).await?.ok_or(AppError::NotFound)
    }

    /// The model a new conversation starts with when none was chosen: the account's last used
    /// one, else the instance's default, as long as its provider still exists.
    pub(crate) async fn starting_model(
        &self,
        account_id: &str,
    ) -> Result<Option<(String, String)>, AppError> {
        let candidates = [
            self.store.last_model_used(account_id).await?,
            self.store.instance_settings().await?.default_model,
        ];
        for (provider_id, model) in candidates.into_iter().flatten() {
            if self.store.provider(&provider_id).await?.is_some() {
                return Ok(Some((provider_id, model)));
            }
        }
        Ok(None)
    }

    async fn check_provider(&self, provider_id: Option<&str>) -> Result<(), AppError> {
        if let Some(id) = provider_id
            && self.store.provider(id).await?.is_none()
        {
            return Err(AppError::invalid("unknown_provider", "There is no such model provider."));
        }
        Ok(())
    }

    /// The persona must be one of the account's own.
    async fn check_persona(
        &self,
        account_id: &str,
        persona_id: Option<&str>,
    ) -> Result<(), AppError> {
        if let Some(id) = persona_id
            && self.store.persona(account_id, id).await?.is_none()
        {
            return Err(AppError::invalid(
                "unknown_persona",
                "There is no such persona; create it under Settings → Personas first.",
            ));
        }
        Ok(())
    }

    /// A page of the account's conversations, most recently active first, after the position
    /// `before` (a cursor an earlier page gave); with the cursor of the next page if there is
    /// one.
    /// The account's conversations whose title or messages hold `query` (the engine's own
    /// full-text search), most recently active first, at most `limit` (default 50).
    pub async fn search_conversations(
        &self,
        account_id: &str,
        query: &str,
        limit: Option<u64>,
    ) -> Result<Vec<ConversationView>, AppError> {
        let limit = page_limit(limit)?;
        if query.trim().is_empty() || query.len() > MAX_SEARCH_BYTES {
            return Err(AppError::invalid(
                "invalid_query",
                format!("Search for 1 to {MAX_SEARCH_BYTES} bytes of text."),
            ));
        }
        let found = self.store.search_conversations(account_id, query, limit).await?;
        Ok(found.iter().map(conversation_view).collect())
    }

    pub async fn conversations_page(
        &self,
        account_id: &str,
        before: Option<&str>,
        limit: Option<u64>,
    ) -> Result<(Vec<ConversationView>, Option<String>), AppError> {
        let limit = page_limit(limit)?;
        let before = match before {
            Some(text) => Some(parse_cursor(text).ok_or_else(|| {
                AppError::invalid(
                    "invalid_cursor",
                    "This page position is not one the server gave; start again from the first \
                     page.",
                )
            })?),
            None => None,
        };
        // One more than asked says whether another page follows.
        let mut page = self.store.list_conversations(account_id, before, limit + 1).await?;
        let mut next = None;
        if page.len() as u64 > limit {
            page.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
            next = page.last().map(cursor);
        }
        Ok((page.iter().map(conversation_view).collect(), next))
    }

    pub async fn create_conversation(
        &self,
        account_id: &str,
        new: NewConversation,
    ) -> Result<ConversationView, AppError> {
        let title = clean_title(new.title.as_deref())?;
        self.check_provider(new.provider_id.as_deref()).await?;
        self.check_persona(account_id, new.persona_id.as_deref()).await?;
        let (provider_id, model) = match (new.provider_id, new.model) {
            (None, None) if new.last_used_model => self.starting_model(account_id).await?.unzip(),
            chosen => chosen,
        };
        let mut conversation =
            self.store.create_conversation(account_id, &title, provider_id, model).await?;
        if let Some(persona_id) = new.persona_id {
            let patch =
                ConversationPatch { persona_id: Some(Some(persona_id)), ..Default::default() };
            self.store.update_conversation(account_id, &conversation.id, patch).await?;
            conversation = self.conversation(account_id, &conversation.id).await?;
        }
        Ok(conversation_view(&conversation))
    }

    /// The account's conversation with its messages, and where a page showing them starts
    /// following the log.
    pub async fn conversation_detail(
        &self,
        account_id: &str,
        id: &str,
    ) -> Result<ConversationDetail, AppError> {
        self.conversation_page(account_id, id, None).await
    }

    /// [`App::conversation_detail`] with only a page of its messages (and of their replies'
    /// timelines) when `page` says how many (`limit`, at most [`MAX_PAGE_MESSAGES`]) and before
    /// which message; `older_messages` then says where the page before it ends.
    pub async fn conversation_page(
        &self,
        account_id: &str,
        id: &str,
        page: Option<(u64, Option<String>)>,
    ) -> Result<ConversationDetail, AppError> {
        let conversation = self.conversation(account_id, id).await?;
        let (stored, older) = match &page {
            None => (self.store.messages(id).await?, false),
            Some((limit, before)) => {
                if !(1..=MAX_PAGE_MESSAGES).contains(limit) {
                    return Err(AppError::invalid(
                        "invalid_limit",
                        format!("A page has 1 to {MAX_PAGE_MESSAGES} messages."),
                    ));
                }
                match self.store.messages_page(id, *limit, before.as_deref()).await {
                    Err(llooma_store::StoreError::NotFound) => {
                        return Err(AppError::invalid(
                            "invalid_cursor",
                            "That message is not in this conversation (any more); reload the \
                             conversation.",
                        ));
                    }
                    other => other?,
                }
            }
        };
        let older_messages = older.then(|| stored.first().map(|m| m.id.clone())).flatten();
        let mut sent: HashMap<String, Vec<llooma_types::FileView>> = HashMap::new();
        let mut pending_files = Vec::new();
        for file in self.store.conversation_files(id).await? {
            match &file.turn_id {
                Some(turn) => sent.entry(turn.clone()).or_default().push(file_view(&file)),
                None => pending_files.push(file_view(&file)),
            }
        }
        let page_turns: Vec<String> = stored.iter().filter_map(|m| m.turn_id.clone()).collect();
        let messages = stored
            .into_iter()
            .map(|m| MessageView {
                files: match (m.role.as_str(), &m.turn_id) {
                    ("user", Some(turn)) => sent.remove(turn).unwrap_or_default(),
                    _ => Vec::new(),
                },
                id: m.id,
                role: m.role,
                content: m.content,
                turn_id: m.turn_id,
                created_at: llooma_store::ms_to_rfc3339(m.created_at_ms),
            })
            .collect();
        let running_turn = self.store.running_turn(id).await?;
        let events_after = self.store.resume_point(id, running_turn.as_deref()).await?;
        let mut replies: Vec<Reply> = Vec::new();
        let events = match page {
            None => self.store.timeline_events(id, events_after).await?,
            Some(_) => self.store.timeline_events_of(id, events_after, page_turns).await?,
        };
        for stored in events {
            let event = match TurnEvent::decode(&stored.kind, &stored.data_json) {
                Ok(event) => event,
                Err(err) => {
                    tracing::warn!(conversation = %id, seq = stored.seq, error = %err, "a stored event cannot be read; its reply is drawn without it");
                    continue;
                }
            };
            match replies.last_mut() {
                Some(reply) if reply.turn_id == stored.turn_id => reply.apply(&event),
                _ => {
                    let mut reply = Reply::new(stored.turn_id);
                    reply.apply(&event);
                    replies.push(reply);
                }
            }
        }
        let summary = self.store.newest_summary(id).await?.map(|s| llooma_types::SummaryView {
            through_message_id: s.through_message_id,
            covered_messages: u64::try_from(s.covered_messages).unwrap_or(0),
            content: s.content,
            created_at: llooma_store::ms_to_rfc3339(s.created_at_ms),
        });
        Ok(ConversationDetail {
            conversation: conversation_view(&conversation),
            messages,
            running_turn,
            events_after,
            replies,
            pending_files,
            summary,
            older_messages,
        })
    }

    pub async fn change_conversation(
        &self,
        account_id: &str,
        id: &str,
        change: ConversationChange,
    ) -> Result<ConversationView, AppError> {
        self.conversation(account_id, id).await?;
        self.check_provider(change.provider_id.as_deref()).await?;
        let title = match change.title.as_deref() {
            Some(t) => Some(clean_title(Some(t))?),
            None => None,
        };
        let persona_id = change.persona_id.map(|p| Some(p).filter(|p| !p.is_empty()));
        self.check_persona(account_id, persona_id.clone().flatten().as_deref()).await?;
        let patch = ConversationPatch {
            title,
            provider_id: change.provider_id.map(Some),
            model: change.model.map(Some),
            mcp_enabled: change.mcp_enabled,
            persona_id,
        };
        self.store.update_conversation(account_id, id, patch).await?;
        Ok(conversation_view(&self.conversation(account_id, id).await?))
    }

    /// Deletes the account's conversation, stopping its reply if one is being written here.
    pub async fn delete_conversation(&self, account_id: &str, id: &str) -> Result<(), AppError> {
        // Ownership first: another account's id must change nothing, not even a running reply.
        self.conversation(account_id, id).await?;
        self.turns.stop_here(id);
        self.store.delete_conversation(account_id, id).await?;
        self.turns.histories.forget(id);
        Ok(())
    }

    /// Stores the person's message and starts a turn in the server; returns the turn's id. The
    /// reply arrives on the conversation's log.
    pub async fn send_message(
        &self,
        account_id: &str,
        conversation_id: &str,
        message: NewMessage,
    ) -> Result<String, AppError> {
        // The messages held from the conversation's last turn, read again only if they changed
        // since (an edit needs each message's turn: those it reads).
        let held = match message.replaces {
            None => self.turns.histories.take(conversation_id),
            Some(_) => None,
        };
        // Everything the turn is built from, read at once and before it starts, so a failure
        // here leaves no turn behind.
        let context = self
            .store
            .turn_context(account_id, conversation_id, held.as_ref().map(|h| h.version))
            .await?
            .ok_or(AppError::NotFound)?;
        let (provider_id, model) = checked_message(&message, &context.conversation)?;
        let content = message.content.trim();
        let chosen =
            self.chosen_attachments(account_id, message.resources, message.prompts).await?;
        let files = self
            .message_files(account_id, conversation_id, &message.files, message.replaces.as_deref())
            .await?;
        let TurnContext {
            conversation,
            tool_settings: settings,
            instance,
            persona,
            model_prompt,
            titles_from_model,
            provider,
            account_limits,
            tool_wordings,
            history: read,
            summary,
            history_version,
        } = context;
        let limits = account_limits.unwrap_or(instance.default_limits);
        // The files of earlier messages, when the messages were read (a kept history has none).
        let earlier_files = match read {
            Some(_) => by_turn(self.store.sent_files(conversation_id).await?),
            None => HashMap::new(),
        };
        // Whether the model sees images is asked only when there is one to see: for a model on
        // this machine or network it may be a question to its server.
        let is_image = |f: &llooma_store::SentFile| f.file.kind == llooma_store::FileKind::Image;
        let images_here = files.iter().any(is_image);
        // With MCP on, a tool may return an image: asked then too (answered from the
        // provider's settings or a kept report after the first time).
        let mcp_on = conversation.mcp_enabled || settings.mcp_everywhere;
        let sees_images = match provider.as_ref() {
            Some(provider)
                if images_here || earlier_files.values().flatten().any(is_image) || mcp_on =>
            {
                self.sees_images(provider, &model).await
            }
            _ => false,
        };
        if images_here && !sees_images {
            return Err(AppError::invalid(
                "model_cannot_see_images",
                format!(
                    "The model {model} does not see images: choose a model that does (an \
                     administrator marks them under Admin → Providers), or remove the images."
                ),
            ));
        }
        let through = summary.as_ref().map(|(through, _)| through.as_str());
        let (earlier, summarized) = earlier_messages(
            read,
            held,
            message.replaces.as_deref(),
            through,
            &earlier_files,
            sees_images,
        )?;
        // The summary sent in place of the oldest messages, if they are left out.
        let summary = summary.filter(|_| summarized).map(|(_, text)| text);
        let first_message = earlier.is_empty();
        // What the model reads of the person's message: the text, then each document's text
        // wrapped; its images beside it.
        let (person, images) = message_with_files(content, &files, sees_images);
        // Kept after the turn with the person's message and its reply, unless it replaces
        // messages (those removed are not counted here: the next turn reads them all again),
        // or files are in the conversation (what a model is given of them depends on the
        // model, and images would fill the cache).
        let keep = match message.replaces {
            None if earlier_files.is_empty() && files.is_empty() => {
                let mut messages = earlier.clone();
                messages.push(&Message::user(content));
                Some(KeepHistory { version: history_version, messages, summarized: false })
            }
            _ => {
                self.turns.histories.forget(conversation_id);
                None
            }
        };
        let prompt = crate::system_prompt(
            instance.system_prompt.as_deref(),
            model_prompt.as_deref(),
            persona.as_ref().map(|p| p.prompt.as_str()),
        );
        let system_prompt = match &summary {
            Some(summary) => crate::long_conversations::with_summary(&prompt, summary),
            None => prompt.clone(),
        };
        let window =
            Window { default_tokens: instance.context_tokens, prompt, summary: summary.clone() };
        // Refused here, before anything is written or sent, when a limit does not allow it.
        let asking = (earlier.bytes() + person.len() + system_prompt.len()).div_ceil(4);
        let admitted =
            self.admit_turn(account_id, &limits, &instance.currency, asking as u64).await?;
        let now = now_rfc3339();
        let started = TurnStarted {
            model: Some(model.clone()),
            started_at: Some(now.clone()),
            replaced: message.replaces.clone(),
            spoken: message.spoken.then_some(true),
            ..TurnStarted::new(String::new())
        };
        let opened = self
            .open_turn(
                account_id,
                conversation_id,
                content,
                message.replaces.as_deref(),
                &message.files,
                started,
            )
            .await;
        let (turn_id, sink, started) = match opened {
            Ok(opened) => opened,
            Err(err) => {
                // Not started (another reply is being written): not a reply of the minute.
                self.unadmit_turn(account_id, admitted).await;
                return Err(err);
            }
        };
        if conversation.title == UNTITLED && first_message {
            self.title_by_first_message(account_id, conversation_id, content, &sink).await?;
        }
        // Tabs hear of the turn once its Stop works, from the turn's task (see
        // `run_conversation_turn`).
        let (running, stop) = self.turns.register(&self.store, conversation_id, &turn_id);
        let plan = TurnPlan {
            account_id: account_id.to_owned(),
            provider_id,
            provider,
            tool_wordings: Some(tool_wordings),
            request: TurnRequest {
                model,
                system_prompt: Some(system_prompt),
                earlier,
                history: vec![(Speaker::Person, person)],
                rounds: crate::ROUNDS,
                now_rfc3339: now,
                attachments: Vec::new(),
                images,
                tool_images: sees_images,
            },
            tools: AppTools::Conversation {
                memory_persona: persona.filter(|p| p.memory_enabled).map(|p| p.id),
            },
            web_search_url: instance.web_search_url,
            // Catalogues are sent only where MCP is switched on: no tools offered, no call
            // possible.
            mcp: match (conversation.mcp_enabled || settings.mcp_everywhere, message.spoken) {
                (false, _) => McpUse::Off,
                (true, false) => McpUse::Asked,
                (true, true) => McpUse::Spoken,
            },
            conversation_id: conversation_id.to_owned(),
            turn_id: turn_id.clone(),
        };
        // The first exchange of an untitled conversation may be named by the model afterwards.
        let naming =
            (conversation.title == UNTITLED && first_message && titles_from_model).then(|| {
                Naming {
                    account_id: account_id.to_owned(),
                    provider_id: plan.provider_id.clone(),
                    model: plan.request.model.clone(),
                    asked: content.to_owned(),
                    limits,
                    currency: instance.currency.clone(),
                }
            });
        let app = self.clone();
        // Boxed: the turn's future is large, and tokio moves an unboxed one by value into its
        // task and again when it finishes.
        tokio::spawn(Box::pin(async move {
            let reply = app
                .clone()
                .run_conversation_turn(plan, started, chosen, sink, (running, stop), (keep, window))
                .await;
            if let (Some(naming), Some(reply)) = (naming, reply) {
                app.name_by_model(&conversation.id, naming, &reply).await;
            }
        }));
        Ok(turn_id)
    }

    /// The servers of the resources and prompts the person chose, each one of theirs and
    /// active, checked before the turn starts.
    async fn chosen_attachments(
        &self,
        account_id: &str,
        resources: Vec<ChosenResource>,
        prompts: Vec<ChosenPrompt>,
    ) -> Result<Vec<Chosen>, AppError> {
        let mut chosen = Vec::with_capacity(resources.len() + prompts.len());
        for r in resources {
            let uri = r.address()?;
            let (label, address, token) = self.active_server(account_id, &r.server_id).await?;
            chosen.push(Chosen { label, address, token, what: ChosenWhat::Resource(uri) });
        }
        for p in prompts {
            let (label, address, token) = self.active_server(account_id, &p.server_id).await?;
            let what = ChosenWhat::Prompt(p.name, p.arguments);
            chosen.push(Chosen { label, address, token, what });
        }
        Ok(chosen)
    }

    /// The files the person's message carries, with what the model is given of each: those it
    /// names, and, for an edit, those of the message it replaces (which it keeps).
    async fn message_files(
        &self,
        account_id: &str,
        conversation_id: &str,
        ids: &[String],
        replaces: Option<&str>,
    ) -> Result<Vec<llooma_store::SentFile>, AppError> {
        let mut files = match replaces {
            Some(turn) => self.store.turn_files(conversation_id, turn).await?,
            None => Vec::new(),
        };
        let named = match self.store.files_to_send(account_id, conversation_id, ids).await {
            Ok(named) => named,
            Err(llooma_store::StoreError::NotFound) => {
                return Err(AppError::invalid(
                    "unknown_file",
                    "A file of this message is not in this conversation (it was removed); \
                     attach it again.",
                ));
            }
            Err(err) => return Err(err.into()),
        };
        if named.iter().any(|f| f.file.turn_id.is_some()) {
            return Err(AppError::invalid(
                "file_sent",
                "A file of this message went with another message already; attach it again.",
            ));
        }
        files.extend(named);
        Ok(files)
    }

    /// Opens the turn: its row, the person's message and `start`, in one write, unless the
    /// message replaces others (an edit, or a reply asked for again: those are removed first,
    /// and the turn logs its `start` when it runs); then the message's new files are attached
    /// to it (an edit keeps the replaced message's).
    async fn open_turn(
        &self,
        account_id: &str,
        conversation_id: &str,
        content: &str,
        replaces: Option<&str>,
        files: &[String],
        started: TurnStarted,
    ) -> Result<(String, LogSink, Start), AppError> {
        let replica = &self.turns.replica_id;
        let (turn_id, sink, start) = match replaces {
            None => {
                let opened =
                    self.store.open_turn(conversation_id, replica, content, started).await?;
                let sink = self.turns.log_sink(&self.store, conversation_id, &opened.turn_id);
                (opened.turn_id, sink, Start::Logged(opened.start_seq, opened.start))
            }
            Some(turn) => {
                let turn_id = self.store.start_turn(conversation_id, replica).await?;
                let sink = self.turns.log_sink(&self.store, conversation_id, &turn_id);
                let replaced = async {
                    self.store.remove_messages_from_turn(conversation_id, turn).await?;
                    self.store
                        .add_message(conversation_id, "user", content, Some(&turn_id))
                        .await?;
                    self.store.move_turn_files(conversation_id, turn, &turn_id).await
                };
                if let Err(err) = replaced.await {
                    let _ = sink.end(EndState::Failed, Some(&err.to_string())).await;
                    return Err(err.into());
                }
                let started = TurnStarted { turn_id: turn_id.clone(), ..started };
                (turn_id, sink, Start::ToLog(started))
            }
        };
        if let Err(err) =
            self.store.attach_files(account_id, conversation_id, &turn_id, files).await
        {
            let _ = sink.end(EndState::Failed, Some(&err.to_string())).await;
            return Err(match err {
                llooma_store::StoreError::NotFound => AppError::invalid(
                    "file_sent",
                    "A file of this message went with another message meanwhile; attach it again.",
                ),
                err => err.into(),
            });
        }
        Ok((turn_id, sink, start))
    }

    /// An untitled conversation is named by its first message; failing that, the turn just
    /// opened ends failed.
    async fn title_by_first_message(
        &self,
        account_id: &str,
        conversation_id: &str,
        content: &str,
        sink: &LogSink,
    ) -> Result<(), AppError> {
        let patch = ConversationPatch { title: Some(title_from(content)), ..Default::default() };
        if let Err(err) = self.store.update_conversation(account_id, conversation_id, patch).await {
            let _ = sink.end(EndState::Failed, Some(&err.to_string())).await;
            return Err(err.into());
        }
        Ok(())
    }

    async fn run_conversation_turn(
        self,
        mut plan: TurnPlan,
        started: Start,
        chosen: Vec<Chosen>,
        sink: LogSink,
        (running, stop): (crate::turns::RunningTurn, tokio::sync::watch::Receiver<bool>),
        (mut keep, window): (Option<KeepHistory>, Window),
    ) -> Option<String> {
        let turn_id = plan.turn_id.clone();
        let conversation_id = plan.conversation_id.clone();
        // Told here rather than before the task is spawned: the watching tab's task, woken
        // then, would sit in the worker's next-task slot, the spawn would push it out to the
        // queue, and a queued task wakes the runtime's other worker (a thread woken, and the
        // turn's data moved between cores, on every turn). Woken from here, it runs on this
        // worker once the turn waits for the model.
        match started {
            Start::ToLog(started) => {
                let _ = sink.event(TurnEvent::Start(started)).await;
            }
            Start::Logged(seq, logged) => sink.tell_watchers(seq, logged),
        }
        plan.request.attachments = self.read_chosen(chosen, &sink).await;
        let meter = crate::usage::Meter::default();
        let (account_id, provider_id, model) =
            (plan.account_id.clone(), plan.provider_id.clone(), plan.request.model.clone());
        let end = match self.fit_window(&mut plan, window, &sink, &stop, &meter, &mut keep).await {
            Ok(tokens) => (self.run_plan(plan, &sink, stop, &meter).await, Some(tokens)),
            Err(error) => (TurnEnd::Failed { text: String::new(), error }, None),
        };
        let (end, window) = end;
        // However the turn ended, what reached the provider was used: counted with its end.
        let tally = meter.take();
        let context = window.and_then(|w| crate::long_conversations::fill(&tally, w));
        let used = crate::usage::usage_row(&account_id, &provider_id, &model, tally);
        let text = end.text();
        let error = match &end {
            TurnEnd::Failed { error, .. } => Some(error.to_string()),
            _ => None,
        };
        if let Some(error) = &error {
            tracing::warn!(turn = %turn_id, %error, "turn failed");
            let _ = sink.event(TurnEvent::error(error.clone())).await;
        }
        running.unregister();
        // The reply (what arrived of it) is stored with `end`, in one write.
        let ended = llooma_types::TurnEnded { state: end.state(), context };
        match sink.close(text, ended, error.as_deref(), used.as_ref()).await {
            Ok(()) => {
                if let Some(keep) = keep {
                    keep.after_turn(&self.turns.histories, &conversation_id, text);
                }
            }
            Err(err) => {
                tracing::warn!(turn = %turn_id, error = %err, "ending a turn failed");
                self.turns.histories.forget(&conversation_id);
            }
        }
        // The reply, when the turn wrote one to its end.
        (end.state() == EndState::Done && !text.is_empty()).then(|| text.to_owned())
    }

    /// Asks the model for a short title for a conversation after its first reply, and uses it
    /// unless the person renamed the conversation meanwhile. A failure keeps the title made
    /// from the first message (and is logged): the title is a convenience, not the reply.
    async fn name_by_model(&self, conversation_id: &str, naming: Naming, reply: &str) {
        // Not asked past a limit: the title from the first message stays.
        let asking = (naming.asked.len() + reply.len()).div_ceil(4) as u64;
        if let Err(err) =
            self.within_use(&naming.account_id, &naming.limits, &naming.currency, asking).await
        {
            tracing::info!(conversation = %conversation_id, error = %err, "a title was not asked of the model");
            return;
        }
        let asked = async {
            let client = self.provider_client(&naming.provider_id).await?;
            let request = llooma_providers::ChatRequest {
                max_tokens: Some(32),
                ..llooma_providers::ChatRequest::new(
                    naming.model.clone(),
                    vec![
                        llooma_providers::Message::system(TITLE_PROMPT),
                        llooma_providers::Message::user(format!(
                            "The person wrote:\n{}\n\nThe reply was:\n{reply}",
                            naming.asked
                        )),
                    ],
                )
            };
            let answer = client.chat(&request).await?.collect().await?;
            let mut tally = crate::usage::Tally::default();
            tally.add(answer.metered);
            self.record_usage(&naming.account_id, &naming.provider_id, &naming.model, tally).await;
            Ok::<_, crate::TurnError>(answer.text)
        };
        let title = match asked.await {
            Ok(text) => title_from(text.trim().trim_matches(['"', '\'', '*', '#', ' '])),
            Err(err) => {
                tracing::warn!(conversation = %conversation_id, error = %err, "asking the model for a title failed");
                return;
            }
        };
        let still_first = self
            .store
            .conversation(&naming.account_id, conversation_id)
            .await
            .ok()
            .flatten()
            .is_some_and(|c| c.title == title_from(&naming.asked));
        if title.is_empty() || title == UNTITLED || !still_first {
            return;
        }
        let patch = ConversationPatch { title: Some(title), ..Default::default() };
        if let Err(err) =
            self.store.update_conversation(&naming.account_id, conversation_id, patch).await
        {
            tracing::warn!(conversation = %conversation_id, error = %err, "storing a title failed");
        }
    }

    /// Reads what the person chose. A failure is a step; the turn goes on without it.
    async fn read_chosen(&self, chosen: Vec<Chosen>, sink: &LogSink) -> Vec<Attachment> {
        let mut attachments = Vec::new();
        for c in chosen {
            let read = async {
                let session = self.mcp.connect(&c.address, c.token.as_ref()).await?;
                let text = match &c.what {
                    ChosenWhat::Resource(uri) => session.read_resource(uri).await.map(|r| {
                        r.contents.iter().map(|i| i.describe()).collect::<Vec<_>>().join("\n")
                    }),
                    ChosenWhat::Prompt(name, arguments) => {
                        session.get_prompt(name, arguments).await.map(|p| {
                            p.messages
                                .iter()
                                .map(|m| format!("[{}] {}", m.role, m.content.describe()))
                                .collect::<Vec<_>>()
                                .join("\n")
                        })
                    }
                };
                session.close().await;
                text
            }
            .await;
            let kind = match c.what {
                ChosenWhat::Resource(uri) => AttachmentKind::Resource { uri },
                ChosenWhat::Prompt(name, _) => AttachmentKind::Prompt { name },
            };
            match read {
                Ok(text) => attachments.push(Attachment { server_label: c.label, kind, text }),
                Err(err) => {
                    let step = crate::attachment_step(
                        &c.label,
                        &kind,
                        StepState::Failed,
                        Some(err.to_string()),
                    );
                    let _ = sink.event(TurnEvent::step(step)).await;
                }
            }
        }
        attachments
    }
}

/// A message a turn can be started for: its text within bounds, a model chosen, not too many
/// attachments. Gives the conversation's provider and model.
fn checked_message(
    message: &NewMessage,
    conversation: &Conversation,
) -> Result<(String, String), AppError> {
    let content = message.content.trim();
    // A photo sent on its own is a message: the files speak for it.
    let nothing = content.is_empty() && message.files.is_empty();
    if nothing || content.len() > MAX_MESSAGE_BYTES {
        return Err(AppError::invalid(
            "invalid_message",
            format!("A message has 1 to {MAX_MESSAGE_BYTES} bytes (or files attached)."),
        ));
    }
    let (Some(provider_id), Some(model)) =
        (conversation.provider_id.clone(), conversation.model.clone())
    else {
        return Err(AppError::invalid(
            "no_model",
            "Choose a model for this conversation first (an administrator adds model providers).",
        ));
    };
    if message.files.len() > MAX_FILES_PER_MESSAGE {
        return Err(AppError::invalid(
            "too_many_files",
            format!("A message brings at most {MAX_FILES_PER_MESSAGE} files."),
        ));
    }
    if message.resources.len() + message.prompts.len() > MAX_ATTACHMENTS {
        return Err(AppError::invalid(
            "too_many_attachments",
            format!("A message brings at most {MAX_ATTACHMENTS} resources and prompts."),
        ));
    }
    Ok((provider_id, model))
}

/// The most messages a page of a conversation has.
pub const MAX_PAGE_MESSAGES: u64 = 500;

/// The messages before the person's new one, written out for the provider: as kept from the
/// last turn when they did not change since (`held`), or as `read`; cut before the message a
/// new one `replaces`, since the model reads the conversation as it was before it.
///
/// A summary (`through`: the last message it covers) stands for the messages it covers, which
/// are left out, unless the message replaced is among them (the edit removes the summary with
/// them). Gives the messages and whether the summary stands for the oldest.
fn earlier_messages(
    read: Option<Vec<llooma_store::HistoryMessage>>,
    held: Option<crate::history_cache::HeldHistory>,
    replaces: Option<&str>,
    through: Option<&str>,
    files: &HashMap<String, Vec<llooma_store::SentFile>>,
    sees_images: bool,
) -> Result<(EncodedMessages, bool), AppError> {
    match (read, held) {
        (Some(mut stored), _) => {
            if let Some(turn) = replaces {
                let at = stored
                    .iter()
                    .position(|m| m.role == "user" && m.turn_id.as_deref() == Some(turn))
                    .ok_or_else(|| {
                        AppError::invalid(
                            "unknown_message",
                            "That message is not in this conversation any more; reload the page.",
                        )
                    })?;
                stored.truncate(at);
            }
            // Found only while still before the message replaced.
            let covered = through.and_then(|id| stored.iter().position(|m| m.id == id));
            if let Some(at) = covered {
                stored.drain(..=at);
            }
            let messages: Vec<Message> = stored
                .into_iter()
                .map(|m| match (m.role, m.turn_id.as_ref().and_then(|t| files.get(t))) {
                    ("assistant", _) => Message::assistant(m.content),
                    (_, Some(files)) => {
                        let (content, images) = message_with_files(&m.content, files, sees_images);
                        Message::user_with_images(content, images)
                    }
                    (_, None) => Message::user(m.content),
                })
                .collect();
            Ok((EncodedMessages::encode(&messages), covered.is_some()))
        }
        // Kept by a turn that left out what the newest summary covers (a summary written since
        // moved the version: the messages would have been read).
        (None, Some(held)) => Ok((held.messages, through.is_some())),
        (None, None) => {
            Err(AppError::Internal("the conversation's messages were neither read nor held".into()))
        }
    }
}

/// A turn's `start` event: still to be logged by the turn, or logged with its opening.
enum Start {
    ToLog(TurnStarted),
    Logged(i64, llooma_types::EncodedEvent),
}

/// The time `current_date` tells, to the second.
pub(crate) fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod title_tests {
    use super::title_from;

    #[test]
    fn a_first_message_names_its_conversation_by_its_first_line_cut_at_a_word() {
        assert_eq!(
            title_from("\n  What is the tide in Brest?\nThanks"),
            "What is the tide in Brest?"
        );
        let long = "Please summarise the attached quarterly report for the board meeting tomorrow";
        assert_eq!(
            title_from(long),
            "Please summarise the attached quarterly report for the board…"
        );
        let unbroken = "x".repeat(80);
        assert_eq!(title_from(&unbroken).chars().count(), 61);
    }
}
