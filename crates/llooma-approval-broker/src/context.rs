//! Where a turn runs decides whether a call can be put to anyone at all.

/// Who started the turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Context {
    /// A person in a conversation: there is someone to ask.
    Conversation,
    /// A bot integration answering people in a room. `mcp_ticked` is the owner's box in that
    /// bot's tools: ticking it is the whole of the consent.
    Bot { mcp_ticked: bool },
    /// A spoken turn: an approval card nobody is looking at is not a question.
    Spoken,
}

/// What to do with an MCP call in that context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gate {
    /// Put it to the person ([`Broker::request`](crate::Broker::request), then
    /// [`Broker::wait`](crate::Broker::wait)), unless remembered consent lets it through.
    Ask,
    /// Run it without asking, but record it
    /// ([`Broker::record_unasked`](crate::Broker::record_unasked) with [`crate::Unasked::Bot`]).
    RunUnasked,
    /// Do not make it; tell the model `reason`.
    RefuseOutright { reason: &'static str },
}

/// Said to the model when a spoken turn tries an MCP tool.
pub const SPOKEN_REFUSAL: &str = "MCP tools cannot be called in a spoken turn: there is nobody \
    looking at a screen to approve the call. Nothing was sent. Carry on without it.";

/// Said to the model when a bot whose owner did not tick MCP tries an MCP tool.
pub const BOT_UNTICKED_REFUSAL: &str = "MCP tools are off for this bot; its owner can switch \
    them on in the bot's tools. Nothing was sent. Carry on without it.";

/// The turn engine's first question for every MCP call.
pub fn gate(context: Context) -> Gate {
    match context {
        Context::Conversation => Gate::Ask,
        Context::Bot { mcp_ticked: true } => Gate::RunUnasked,
        Context::Bot { mcp_ticked: false } => Gate::RefuseOutright { reason: BOT_UNTICKED_REFUSAL },
        Context::Spoken => Gate::RefuseOutright { reason: SPOKEN_REFUSAL },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_table() {
        let table = [
            (Context::Conversation, Gate::Ask),
            (Context::Bot { mcp_ticked: true }, Gate::RunUnasked),
            (
                Context::Bot { mcp_ticked: false },
                Gate::RefuseOutright { reason: BOT_UNTICKED_REFUSAL },
            ),
            (Context::Spoken, Gate::RefuseOutright { reason: SPOKEN_REFUSAL }),
        ];
        for (context, want) in table {
            assert_eq!(gate(context), want, "{context:?}");
        }
    }
}
