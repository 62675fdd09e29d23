//! Everything a conversation's turn is set up from, read in one query: the conversation, its
//! account's tool settings, preferences and wording of the app's tools, the instance's
//! settings, the persona, the model's own prompt, the provider's row and the messages so far.
//! A turn used to read them one by one; each read is a round trip to the database (on SQLite,
//! two thread hand-offs), and a turn's cost was mostly those. On Postgres lists come as one JSON
//! value each (one round trip). On SQLite the query runs on the inline connection
//! ([`crate::inline`]), where a row costs no hand-off: the messages are read as rows, right
//! after, instead of being built into JSON and parsed again.

use std::sync::OnceLock;

use sea_orm::{ConnectionTrait, DbBackend, Statement};

use crate::columns::{ColumnNames, Columns, SqliteRow};
use crate::conversations::{Conversation, conversation};
use crate::entities::{conversations, personas, providers};
use crate::instance::ROW;
use crate::personas::{Persona, persona};
use crate::providers::{Provider, from_model as provider};
use crate::{
    InstanceSettings, Store, StoreError, StoreResult, ToolSettings, UsageLimits,
    numbered_placeholders,
};

/// What [`Store::turn_context`] reads.
#[derive(Clone, Debug)]
pub struct TurnContext {
    pub conversation: Conversation,
    pub tool_settings: ToolSettings,
    pub instance: InstanceSettings,
    /// The conversation's persona, if it has one and it is still the account's.
    pub persona: Option<Persona>,
    /// The administrator's prompt for the conversation's model, if any.
    pub model_prompt: Option<String>,
    /// The account's preference: a new conversation is named by the model.
    pub titles_from_model: bool,
    /// The conversation's provider, if it has one and it still exists.
    pub provider: Option<Provider>,
    /// The account's own limits, if it has any (else the instance's defaults apply).
    pub account_limits: Option<UsageLimits>,
    /// The account's wording of the app's own tools: (tool, description).
    pub tool_wordings: Vec<(String, String)>,
    /// The conversation's messages, oldest first; `None` when they are still those of the
    /// version the caller named (they were not read).
    pub history: Option<Vec<HistoryMessage>>,
    /// The conversation's newest summary (m0028): the message it ends at, and its text.
    pub summary: Option<(String, String)>,
    /// How many times the conversation's messages have changed (m0019): the same number, the
    /// same messages.
    pub history_version: i64,
}

/// A stored message of a conversation, as a turn reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistoryMessage {
    pub id: String,
    /// `user` or `assistant` (not a string of its own per message: a turn reads them all).
    pub role: &'static str,
    pub content: String,
    /// The turn it belongs to (none for messages stored before turns had ids).
    pub turn_id: Option<String>,
}

/// The joined columns of other tables carry a prefix, so none shadows a conversation's.
const SQL: &str = "SELECT c.id, c.account_id, c.title, c.provider_id, c.model, c.mcp_enabled, \
    c.created_at_ms, c.updated_at_ms, c.persona_id, c.history_version, \
    i.registration_open AS i_registration_open, \
    i.users_can_add_mcp_servers AS i_users_can_add_mcp_servers, \
    i.web_search_url AS i_web_search_url, i.system_prompt AS i_system_prompt, \
    i.default_provider_id AS i_default_provider_id, i.default_model AS i_default_model, \
    i.currency AS i_currency, i.limit_tokens_per_day AS i_tokens_per_day, \
    i.limit_tokens_per_month AS i_tokens_per_month, \
    i.limit_spend_micros_per_day AS i_spend_micros_per_day, \
    i.limit_spend_micros_per_month AS i_spend_micros_per_month, \
    i.limit_turns_per_minute AS i_turns_per_minute, i.context_tokens AS i_context_tokens, \
    al.account_id AS al_account_id, al.tokens_per_day AS al_tokens_per_day, \
    al.tokens_per_month AS al_tokens_per_month, \
    al.spend_micros_per_day AS al_spend_micros_per_day, \
    al.spend_micros_per_month AS al_spend_micros_per_month, \
    al.turns_per_minute AS al_turns_per_minute, \
    t.tool_budget AS t_tool_budget, t.mcp_everywhere AS t_mcp_everywhere, \
    t.announce_mode AS t_announce_mode, \
    mp.prompt AS model_prompt, \
    p.id AS p_id, p.account_id AS p_account_id, p.name AS p_name, p.prompt AS p_prompt, \
    p.memory_enabled AS p_memory_enabled, p.created_at_ms AS p_created_at_ms, \
    p.updated_at_ms AS p_updated_at_ms, \
    ap.titles_from_model AS titles_from_model, \
    pr.id AS pr_id, pr.name AS pr_name, pr.base_url AS pr_base_url, \
    pr.api_key_ciphertext AS pr_api_key_ciphertext, pr.created_at_ms AS pr_created_at_ms, \
    pr.updated_at_ms AS pr_updated_at_ms, pr.models_json AS pr_models_json, \
    pr.local_network AS pr_local_network, pr.vision_models_json AS pr_vision_models_json, \
    pr.context_windows_json AS pr_context_windows_json, \
    {wordings} AS wordings, {history} AS history, \
    (SELECT s.through_message_id FROM conversation_summaries s WHERE s.conversation_id = c.id \
    ORDER BY s.created_at_ms DESC, s.id DESC LIMIT 1) AS s_through, \
    (SELECT s.content FROM conversation_summaries s WHERE s.conversation_id = c.id \
    ORDER BY s.created_at_ms DESC, s.id DESC LIMIT 1) AS s_content \
    FROM conversations c \
    LEFT JOIN instance_settings i ON i.id = ? \
    LEFT JOIN account_tool_settings t ON t.account_id = c.account_id \
    LEFT JOIN model_prompts mp ON mp.provider_id = c.provider_id AND mp.model = c.model \
    LEFT JOIN personas p ON p.id = c.persona_id AND p.account_id = c.account_id \
    LEFT JOIN account_preferences ap ON ap.account_id = c.account_id \
    LEFT JOIN providers pr ON pr.id = c.provider_id \
    LEFT JOIN account_limits al ON al.account_id = c.account_id \
    WHERE c.id = ? AND c.account_id = ?";

/// The account's tool wordings as one JSON array of `[tool, description]`, in each engine's
/// words.
const WORDINGS_SQLITE: &str = "(SELECT json_group_array(json_array(w.tool, w.description)) \
    FROM tool_wordings w WHERE w.account_id = c.account_id)";
const WORDINGS_POSTGRES: &str = "(SELECT COALESCE(json_agg(json_build_array(w.tool, \
    w.description))::text, '[]') FROM tool_wordings w WHERE w.account_id = c.account_id)";

/// The conversation's messages as one JSON array of `[role, content, turn_id, id]`, oldest first
/// (Postgres: one round trip). On SQLite, whose rows cost nothing to fetch on the inline
/// connection, they are read as rows ([`HISTORY_ROWS_SQLITE`]): building the JSON and parsing
/// it again grows with the conversation, on every turn that reads it.
const HISTORY_ROWS_SQLITE: &str = "SELECT role, content, turn_id, id FROM messages \
    WHERE conversation_id = ? ORDER BY created_at_ms, id";
/// `NULL` when the conversation is still at the version the caller holds (the first `?`; -1
/// when it holds none).
const HISTORY_POSTGRES: &str = "CASE WHEN c.history_version = ? THEN NULL ELSE \
    (SELECT COALESCE(json_agg(json_build_array(m.role, m.content, \
    m.turn_id, m.id) ORDER BY m.created_at_ms, m.id)::text, '[]') FROM messages m \
    WHERE m.conversation_id = c.id) END";

/// The query for `backend`: its list expressions, and `?` numbered for Postgres. Built once
/// per engine (it runs on every turn).
fn sql(backend: DbBackend) -> &'static str {
    static SQLITE: OnceLock<String> = OnceLock::new();
    static POSTGRES: OnceLock<String> = OnceLock::new();
    let (built, wordings, history) = if backend == DbBackend::Postgres {
        (&POSTGRES, WORDINGS_POSTGRES, HISTORY_POSTGRES)
    } else {
        (&SQLITE, WORDINGS_SQLITE, "NULL")
    };
    built.get_or_init(|| {
        numbered_placeholders(
            backend,
            &SQL.replace("{wordings}", wordings).replace("{history}", history),
        )
    })
}

impl Store {
    /// Everything a turn of one of the account's conversations is set up from, in one query;
    /// `None` when the account has no such conversation. `held_version`: the history version
    /// of the messages the caller already holds; when it is still the conversation's, the
    /// messages are not read ([`TurnContext::history`] is `None`).
    pub async fn turn_context(
        &self,
        account_id: &str,
        conversation_id: &str,
        held_version: Option<i64>,
    ) -> StoreResult<Option<TurnContext>> {
        if let Some(inline) = &self.inline {
            let sql = sql(DbBackend::Sqlite);
            return Ok(inline
                .run(|conn| {
                    let mut statement = conn.prepare_cached(sql)?;
                    let mut rows = statement.query((ROW, conversation_id, account_id))?;
                    let Some(row) = rows.next()? else {
                        return Ok(None);
                    };
                    static NAMES: ColumnNames = ColumnNames::new();
                    let mut context = read(&SqliteRow::new(row, &NAMES))?;
                    // The version was read first: messages read after it are at least that
                    // recent, never older than the number they are held under.
                    if held_version == Some(context.history_version) {
                        return Ok(Some(context));
                    }
                    let mut statement = conn.prepare_cached(HISTORY_ROWS_SQLITE)?;
                    context.history = statement
                        .query_map([conversation_id], |row| {
                            Ok(HistoryMessage {
                                id: row.get(3)?,
                                role: role(row.get_ref(0)?.as_str()?),
                                content: row.get(1)?,
                                turn_id: row.get(2)?,
                            })
                        })?
                        .collect::<Result<Vec<_>, _>>()
                        .map(Some)?;
                    Ok(Some(context))
                })
                .await?);
        }
        let backend = self.backend();
        let values: [sea_orm::Value; 4] = [
            held_version.unwrap_or(-1).into(),
            ROW.into(),
            conversation_id.into(),
            account_id.into(),
        ];
        let statement = Statement::from_sql_and_values(backend, sql(backend), values);
        match self.db.query_one_raw(statement).await? {
            Some(row) => Ok(Some(read(&row)?)),
            None => Ok(None),
        }
    }
}

/// Limits read from the columns named with `prefix`.
fn limits(row: &impl Columns, prefix: &str) -> StoreResult<UsageLimits> {
    let int = |name: &str| row.int(&format!("{prefix}{name}"));
    Ok(UsageLimits {
        tokens_per_day: int("tokens_per_day")?,
        tokens_per_month: int("tokens_per_month")?,
        spend_micros_per_day: int("spend_micros_per_day")?,
        spend_micros_per_month: int("spend_micros_per_month")?,
        turns_per_minute: int("turns_per_minute")?,
    })
}

/// A stored role (the table's check allows only these two).
fn role(stored: &str) -> &'static str {
    if stored == "assistant" { "assistant" } else { "user" }
}

fn read(row: &impl Columns) -> StoreResult<TurnContext> {
    let conversation = conversation(conversations::Model {
        id: row.required_text("id")?,
        account_id: row.required_text("account_id")?,
        title: row.required_text("title")?,
        provider_id: row.text("provider_id")?,
        model: row.text("model")?,
        mcp_enabled: row.required_flag("mcp_enabled")?,
        created_at_ms: row.required_int("created_at_ms")?,
        updated_at_ms: row.required_int("updated_at_ms")?,
        persona_id: row.text("persona_id")?,
    });
    let Some(registration_open) = row.flag("i_registration_open")? else {
        return Err(StoreError::Corrupt("the instance_settings row is missing".into()));
    };
    let default_provider = row.text("i_default_provider_id")?;
    let default_model = row.text("i_default_model")?;
    let instance = InstanceSettings {
        registration_open,
        users_can_add_mcp_servers: row.required_flag("i_users_can_add_mcp_servers")?,
        web_search_url: row.text("i_web_search_url")?,
        system_prompt: row.text("i_system_prompt")?,
        default_model: default_provider.zip(default_model),
        currency: row.required_text("i_currency")?,
        default_limits: limits(row, "i_")?,
        context_tokens: u32::try_from(row.required_int("i_context_tokens")?).unwrap_or(u32::MAX),
    };
    let account_limits = match row.text("al_account_id")? {
        Some(_) => Some(limits(row, "al_")?),
        None => None,
    };
    let tool_settings = match row.int("t_tool_budget")? {
        Some(budget) => ToolSettings {
            tool_budget: u32::try_from(budget).unwrap_or(u32::MAX),
            mcp_everywhere: row.required_flag("t_mcp_everywhere")?,
            announce_mode: row.required_flag("t_announce_mode")?,
        },
        None => ToolSettings::default(),
    };
    let persona = match row.text("p_id")? {
        Some(id) => Some(persona(personas::Model {
            id,
            account_id: row.required_text("p_account_id")?,
            name: row.required_text("p_name")?,
            prompt: row.required_text("p_prompt")?,
            memory_enabled: row.required_flag("p_memory_enabled")?,
            created_at_ms: row.required_int("p_created_at_ms")?,
            updated_at_ms: row.required_int("p_updated_at_ms")?,
        })),
        None => None,
    };
    let provider = match row.text("pr_id")? {
        Some(id) => Some(provider(providers::Model {
            id,
            name: row.required_text("pr_name")?,
            base_url: row.required_text("pr_base_url")?,
            api_key_ciphertext: row.text("pr_api_key_ciphertext")?,
            created_at_ms: row.required_int("pr_created_at_ms")?,
            updated_at_ms: row.required_int("pr_updated_at_ms")?,
            models_json: row.text("pr_models_json")?,
            local_network: row.required_flag("pr_local_network")?,
            vision_models_json: row.text("pr_vision_models_json")?,
            context_windows_json: row.text("pr_context_windows_json")?,
        })),
        None => None,
    };
    let mut tool_wordings: Vec<(String, String)> = match row.text("wordings")? {
        Some(json) => serde_json::from_str(&json)
            .map_err(|e| StoreError::Corrupt(format!("tool wordings as JSON: {e}")))?,
        None => Vec::new(),
    };
    tool_wordings.sort();
    // Postgres reads the messages in this row (NULL when the caller holds them); SQLite reads
    // them after it, as rows.
    let history = match row.text("history")? {
        Some(json) => {
            let rows: Vec<(String, String, Option<String>, String)> = serde_json::from_str(&json)
                .map_err(|e| {
                StoreError::Corrupt(format!("a conversation's messages as JSON: {e}"))
            })?;
            let history = rows.into_iter().map(|(r, content, turn_id, id)| HistoryMessage {
                id,
                role: role(&r),
                content,
                turn_id,
            });
            Some(history.collect())
        }
        None => None,
    };
    Ok(TurnContext {
        conversation,
        tool_settings,
        instance,
        persona,
        model_prompt: row.text("model_prompt")?,
        titles_from_model: row.flag("titles_from_model")?.unwrap_or(false),
        provider,
        account_limits,
        tool_wordings,
        history,
        summary: row.text("s_through")?.zip(row.text("s_content")?),
        history_version: row.required_int("history_version")?,
    })
}
