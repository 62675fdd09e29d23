//! One way to build and run a turn, for a conversation and for a bot: a [`TurnPlan`] says what
//! differs (who asks, the identity, which of the app's own tools, whether and how MCP is used);
//! [`App::run_plan`] builds the rest the same way for both.

use llooma_approval_broker::Context;

use llooma_store::{Provider, Store};
use tokio::sync::watch;

use crate::builtins::StoreMemory;
use crate::mcp_servers::{OfferLimits, Tokens};
use crate::usage::Meter;
use crate::{
    App, BuiltinTools, CURRENT_DATE, McpTurn, MemoryBudget, PageReader, PersonaMemory, READ_PAGE,
    StandingConsent, TurnEnd, TurnError, TurnRequest, TurnSink, WEB_SEARCH, WebSearch, rounds_for,
    run_turn,
};

/// Which of the app's own tools a turn offers.
pub(crate) enum AppTools {
    /// A conversation: the date, web search (when the instance has it), page reading and
    /// choices as buttons, and memory when the persona keeps one.
    Conversation { memory_persona: Option<String> },
    /// A bot: the tools it ticked that the instance provides; no memory, no buttons.
    Ticked(Vec<String>),
}

/// Whether and how a turn uses MCP tools.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum McpUse {
    /// No catalogue is sent, so no call can happen.
    Off,
    /// A person's conversation: every call goes through consent, most to a card.
    Asked,
    /// A bot with MCP ticked: its calls run unasked (the tick is the consent), each recorded.
    Unasked,
    /// A spoken turn in a conversation with MCP on: the tools are offered as usual, but every
    /// call is refused outright (nobody is looking at a screen to approve it) and the model is
    /// told why.
    Spoken,
}

/// What one turn is, as far as it differs between a conversation and a bot.
pub(crate) struct TurnPlan {
    pub account_id: String,
    pub provider_id: String,
    /// The provider's row when it was read with the rest of the turn's context; otherwise it
    /// is read when the turn starts.
    pub provider: Option<Provider>,
    /// The account's wording of the app's tools, when read with the turn's context; otherwise
    /// read when the turn starts.
    pub tool_wordings: Option<Vec<(String, String)>>,
    /// Model, system prompt, history and attachments; the rounds are set here.
    pub request: TurnRequest,
    pub tools: AppTools,
    /// The instance's web search address, if it has one.
    pub web_search_url: Option<String>,
    pub mcp: McpUse,
    /// What the turn's approval calls belong to (`bot:<id>` for a bot).
    pub conversation_id: String,
    pub turn_id: String,
}

impl App {
    /// Builds the plan's tools and runs the turn to its end; what its model requests used goes
    /// to `meter`, however it ended (the caller writes it with the turn's end).
    pub(crate) async fn run_plan<S: TurnSink>(
        &self,
        mut plan: TurnPlan,
        sink: &S,
        stop: watch::Receiver<bool>,
        meter: &Meter,
    ) -> TurnEnd {
        let failed = |error: TurnError| TurnEnd::Failed { text: String::new(), error };
        let client = match plan.provider.take() {
            Some(row) => self.provider_client_for(row),
            None => self.provider_client(&plan.provider_id).await,
        };
        let provider = match client {
            Ok(provider) => provider,
            Err(error) => return failed(error),
        };
        let wordings = match plan.tool_wordings.take() {
            Some(wordings) => Ok(wordings),
            None => self.store.tool_wordings(&plan.account_id).await,
        };
        let descriptions = match wordings {
            Ok(wordings) => wordings.into_iter().collect(),
            Err(error) => return failed(error.into()),
        };
        let offers = |tool: &str| match &plan.tools {
            AppTools::Conversation { .. } => true,
            AppTools::Ticked(ticked) => ticked.iter().any(|t| t == tool),
        };
        let search = plan.web_search_url.as_deref().filter(|_| offers(WEB_SEARCH)).and_then(|a| {
            self.searches
                .get(a)
                .inspect_err(|e| tracing::warn!(error = %e, "web search is unavailable"))
                .ok()
        });
        let memory_port = StoreMemory { store: self.store.clone() };
        let (memory_persona, conversation) = match &plan.tools {
            AppTools::Conversation { memory_persona } => (memory_persona.as_deref(), true),
            AppTools::Ticked(_) => (None, false),
        };
        let builtins = BuiltinTools {
            current_date: offers(CURRENT_DATE),
            web_search: search.as_ref().map(|s| s as &dyn WebSearch),
            read_page: offers(READ_PAGE).then_some(&self.pages as &dyn PageReader),
            memory: memory_persona.map(|persona_id| PersonaMemory {
                port: &memory_port,
                persona_id,
                budget: MemoryBudget::default(),
            }),
            choices: conversation,
            descriptions,
        };
        if plan.mcp == McpUse::Off {
            let no_mcp = None::<&McpTurn<'_, Store>>;
            return run_turn(&provider, plan.request, &builtins, no_mcp, sink, stop, meter).await;
        }
        let limits = OfferLimits {
            provider_cap: provider.max_tools_per_request(),
            builtin_tools: builtins.names().len(),
            resources: plan.mcp == McpUse::Asked,
        };
        let mcp = match self.mcp_turn(&plan, &limits).await {
            Ok(mcp) => mcp,
            Err(error) => return failed(error),
        };
        plan.request.rounds = rounds_for(Some(&mcp));
        run_turn(&provider, plan.request, &builtins, Some(&mcp), sink, stop, meter).await
    }

    /// The MCP side of a turn: the offered tools, and the consent the calls go through.
    async fn mcp_turn(
        &self,
        plan: &TurnPlan,
        limits: &OfferLimits,
    ) -> Result<McpTurn<'_, Store>, TurnError> {
        let setup = |e: crate::AppError| TurnError::Setup(e.to_string());
        let account_id = &plan.account_id;
        let settings = self.store.tool_settings(account_id).await?;
        let offered =
            self.offered(account_id, &settings, limits, Tokens::Decrypt).await.map_err(setup)?;
        let (consent, context, announce) = match plan.mcp {
            // Nothing is remembered or asked: no call goes out.
            McpUse::Spoken => (StandingConsent::nothing(), Context::Spoken, settings.announce_mode),
            McpUse::Asked => (
                StandingConsent::of(&self.store, account_id).await?,
                Context::Conversation,
                settings.announce_mode,
            ),
            // The tick is the whole of the consent: nothing is remembered, nobody is asked.
            McpUse::Unasked | McpUse::Off => {
                (StandingConsent::nothing(), Context::Bot { mcp_ticked: true }, false)
            }
        };
        Ok(McpTurn {
            tools: offered.tools,
            resources: offered.resources,
            in_use: Some(self),
            instructions: offered.instructions,
            client: &self.mcp,
            broker: &self.broker,
            consent,
            account_id: account_id.clone(),
            conversation_id: plan.conversation_id.clone(),
            turn_id: plan.turn_id.clone(),
            announce,
            context,
            outbound: &self.outbound,
            result_images: std::sync::Mutex::default(),
        })
    }
}
