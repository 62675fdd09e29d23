//! A conversation's turn kept within its model's context window: before the turn's first
//! request, if the prompts and messages would fill more of the window than they may
//! ([`context_window::too_full`]), the oldest messages are summarized by the turn's model, the
//! summary is stored (the next turns send it too) and sent in their place. The turn's
//! timeline shows it as a step; the messages stay stored and shown.
//!
//! What the decisions are made on is in [`crate::context_window`] (no IO).

use llooma_providers::{ChatRequest, Message};
use llooma_store::HistoryMessage;
use llooma_types::{ContextFill, Step, StepState, TurnEvent};
use tokio::sync::watch;

use crate::context_window::{self, Sized, batches, cut_to, input_bytes, summary_tokens};
use crate::engine::TurnSink;
use crate::history_cache::KeepHistory;
use crate::setup::TurnPlan;
use crate::usage::{Meter, Tally};
use crate::{App, TurnError};

/// The step's tool name in the timeline (`docs/api.md`).
pub const SUMMARY_STEP: &str = "conversation_summary";

/// What the model is asked to do with the oldest messages.
const SUMMARY_PROMPT: &str = "You keep the summary of a long conversation between a person and \
an assistant, so that the assistant can go on without the messages summarized. Write it in the \
conversation's language, as plain sentences or short lists: who the person is and what they \
want, facts, names, numbers, decisions, code or commands that matter, and questions still open. \
Leave out greetings and repetition. Write only the summary.";

/// The system prompt of a turn that sends a summary in place of the oldest messages.
pub(crate) fn with_summary(prompt: &str, summary: &str) -> String {
    format!(
        "{prompt}\n\nThe start of this conversation is no longer shown to you; this summary of \
         it, written earlier, stands in its place:\n<summary>\n{summary}\n</summary>"
    )
}

/// What a conversation's turn is kept within its window with.
pub(crate) struct Window {
    /// The instance's default window.
    pub(crate) default_tokens: u32,
    /// The system prompt without a summary.
    pub(crate) prompt: String,
    /// The summary the turn sends already, if any.
    pub(crate) summary: Option<String>,
}

impl App {
    /// Makes room in the model's context window for the turn, summarizing the oldest messages
    /// if it must; gives the window's size. A summary that cannot be written leaves those
    /// messages out of this turn's request instead (the step says so), and the next turn tries
    /// again. Fails only when the person's message and the prompts alone leave no room.
    pub(crate) async fn fit_window(
        &self,
        plan: &mut TurnPlan,
        window: Window,
        sink: &impl TurnSink,
        stop: &watch::Receiver<bool>,
        meter: &Meter,
        keep: &mut Option<KeepHistory>,
    ) -> Result<u32, TurnError> {
        let request = &plan.request;
        let fixed = request.system_prompt.as_deref().map_or(0, str::len)
            + request.history.iter().map(|(_, text)| text.len()).sum::<usize>()
            + request.attachments.iter().map(|a| a.text.len()).sum::<usize>()
            + request.images.len() * llooma_providers::IMAGE_WEIGHT;
        // Below what the smallest window may hold, its size changes nothing this turn.
        let ask = context_window::too_full(
            context_window::MIN_WINDOW_TOKENS,
            fixed + request.earlier.weight(),
        );
        let (tokens, _) = self
            .context_window(plan.provider.as_ref(), &request.model, window.default_tokens, ask)
            .await;
        let request = &plan.request;
        if context_window::hopeless(tokens, fixed) {
            return Err(TurnError::TooLong {
                used: context_window::tokens_of(fixed),
                window: tokens,
            });
        }
        // Images weigh what a model counts for them, not their size as sent.
        if !context_window::too_full(tokens, fixed + request.earlier.weight()) {
            return Ok(tokens);
        }
        let Some(earlier) = self.summarizable(plan).await? else { return Ok(tokens) };
        let sized: Vec<Sized> = earlier
            .iter()
            .zip(plan.request.earlier.weights())
            .map(|(m, bytes)| Sized { from_person: m.role == "user", bytes })
            .collect();
        let Some(covered) = context_window::covered(tokens, fixed, &sized) else {
            return Ok(tokens);
        };
        let step = |state, error: Option<String>| {
            let mut step = Step::app_tool(SUMMARY_STEP, state);
            step.entries = Some(covered);
            step.error = error;
            TurnEvent::step(step)
        };
        sink.event(step(StepState::Running, None)).await?;
        let written = self
            .write_summary(
                plan,
                window.summary.as_deref(),
                &earlier[..covered],
                tokens,
                stop,
                meter,
            )
            .await;
        // However it went, the covered messages are not sent again by this turn.
        plan.request.earlier.drop_first(covered);
        match written {
            Ok(summary) => {
                let through = &earlier[covered - 1].id;
                match self.store.add_summary(&plan.conversation_id, through, &summary).await {
                    Ok(()) => {
                        if let Some(kept) = keep {
                            kept.messages.drop_first(covered);
                            kept.summarized = true;
                        }
                    }
                    // Removed meanwhile (an edit in another tab): used for this turn only.
                    Err(err) => {
                        tracing::info!(conversation = %plan.conversation_id, error = %err, "a summary was not stored");
                        *keep = None;
                        self.turns.histories.forget(&plan.conversation_id);
                    }
                }
                plan.request.system_prompt = Some(with_summary(&window.prompt, &summary));
                sink.event(step(StepState::Done, None)).await?;
            }
            Err(error) => {
                tracing::warn!(conversation = %plan.conversation_id, %error, "summarizing earlier messages failed");
                *keep = None;
                self.turns.histories.forget(&plan.conversation_id);
                let said = format!(
                    "the earlier messages could not be summarized ({error}); this reply is \
                     written without them"
                );
                sink.event(step(StepState::Failed, Some(said))).await?;
            }
        }
        Ok(tokens)
    }

    /// The turn's earlier messages with their ids, as sent (after the summary sent now): read
    /// again, since a kept history has no ids. `None` when they no longer match what the turn
    /// sends (changed meanwhile): the turn goes on as it is, and the next one decides again.
    async fn summarizable(
        &self,
        plan: &TurnPlan,
    ) -> Result<Option<Vec<HistoryMessage>>, TurnError> {
        let context = self
            .store
            .turn_context(&plan.account_id, &plan.conversation_id, None)
            .await?
            .ok_or(TurnError::Storage(llooma_store::StoreError::NotFound))?;
        let mut messages = context.history.unwrap_or_default();
        if let Some((through, _)) = &context.summary
            && let Some(at) = messages.iter().position(|m| &m.id == through)
        {
            messages.drain(..=at);
        }
        // The person's new message is the turn's own, not an earlier one.
        if messages.last().is_some_and(|m| m.turn_id.as_deref() == Some(&plan.turn_id)) {
            messages.pop();
        }
        Ok((messages.len() == plan.request.earlier.len()).then_some(messages))
    }

    /// The summary of the summary so far (`previous`) and `messages`, written by the turn's
    /// model in as many requests as the window needs; each request counts to the turn's usage.
    async fn write_summary(
        &self,
        plan: &TurnPlan,
        previous: Option<&str>,
        messages: &[HistoryMessage],
        window: u32,
        stop: &watch::Receiver<bool>,
        meter: &Meter,
    ) -> Result<String, TurnError> {
        let client = match &plan.provider {
            Some(row) => self.provider_client_for(row.clone())?,
            None => self.provider_client(&plan.provider_id).await?,
        };
        let room = input_bytes(window);
        let sizes: Vec<usize> = messages.iter().map(|m| m.content.len() + 16).collect();
        let mut summary = previous.map(str::to_owned);
        let words = summary_tokens(window) * 3 / 4;
        for batch in batches(window, &sizes) {
            let mut asked = String::new();
            if let Some(summary) = &summary {
                asked.push_str(&format!(
                    "The summary so far:\n<summary>\n{summary}\n</summary>\n\n"
                ));
            }
            asked.push_str("The messages to add to it:\n");
            for m in &messages[batch] {
                let who = if m.role == "user" { "person" } else { "assistant" };
                asked.push_str(&format!("\n[{who}]\n{}\n", cut_to(&m.content, room)));
            }
            asked.push_str(&format!("\nWrite the summary of all of it, in at most {words} words."));
            let request = ChatRequest {
                max_tokens: Some(u32::try_from(summary_tokens(window)).unwrap_or(u32::MAX)),
                ..ChatRequest::new(
                    plan.request.model.clone(),
                    vec![Message::system(SUMMARY_PROMPT), Message::user(asked)],
                )
            };
            let mut stopped = stop.clone();
            let answer = tokio::select! {
                answer = async { client.chat(&request).await?.collect().await } => answer?,
                _ = stopped.wait_for(|s| *s) => {
                    return Err(TurnError::Setup("stopped by the person".into()));
                }
            };
            meter.add(answer.metered);
            let text = answer.text.trim();
            if text.is_empty() {
                return Err(TurnError::Setup("the model wrote an empty summary".into()));
            }
            summary = Some(text.to_owned());
        }
        summary.ok_or_else(|| TurnError::Setup("there was nothing to summarize".into()))
    }
}

/// How full the window was after the turn's last request, from what its requests used.
pub(crate) fn fill(tally: &Tally, window: u32) -> Option<ContextFill> {
    (tally.requests > 0).then(|| ContextFill {
        used_tokens: tally.last_input_tokens + tally.last_output_tokens,
        window_tokens: u64::from(window),
        estimated: tally.last_estimated,
    })
}
