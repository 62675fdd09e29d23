//! Remembered consent: which tool calls may run without putting a question to the person.
//!
//! Pure: no IO, no clock, no async. The caller (the turn engine) loads the account's
//! [`PermissionMode`], its [`Grant`]s and [`AllowRule`]s, describes the call as a
//! [`ConsentCall`] and asks [`decide`]. Anything this module does not positively allow is
//! [`ConsentDecision::Ask`]: silence, doubt and malformed input all mean "ask".
//!
//! The three ways an external MCP call skips the question, each something the person did on
//! purpose (never the host promoting a tool on its own, from usage or from what the tool says
//! about itself):
//!
//! 1. an "Always allow" [`Grant`] pressed on a card: the same server, the same tool *as it was
//!    described then* ([`tool_definition_hash`]) and exactly the same arguments
//!    ([`canonical_json`]); any other argument value, or a changed description or schema, asks
//!    again;
//! 2. an [`AllowRule`] written in settings: a tool plus a constraint per argument (an exact
//!    value, or any value). **An argument the rule does not name makes the rule not apply**:
//!    a rule written for `{path: any}` says nothing about a call that also passes
//!    `{recursive: true}`, so that call is asked. Rules are pinned to a definition hash, like
//!    grants: a tool whose description or schema changed is a tool the person never judged;
//! 3. the permission mode [`PermissionMode::AllowAll`], chosen explicitly, with
//!    [`ALLOW_ALL_WARNING`] shown where it is switched on.
//!
//! Grants and rules only apply in [`PermissionMode::Rules`]; in the default
//! [`PermissionMode::Ask`] every external MCP call is asked, whatever was stored.
//!
//! [`TrustLevel::ExternalMcp`] is the lowest trust: its risk band and its own annotations
//! (`readOnlyHint` is the server's claim about itself) never allow a call.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

pub use llooma_policy::{canonical_json, sha256_hex};

/// Shown where the permission mode is switched to [`PermissionMode::AllowAll`].
pub const ALLOW_ALL_WARNING: &str = "Allow all runs every call any of your MCP servers' tools \
    asks for, without asking you first, on whatever the model was prompted with. A page or a \
    tool result the model read can make it call a tool you would have refused. Choose it only \
    for servers whose every tool you would allow with any arguments.";

/// How an account's external tool calls are put to the person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PermissionMode {
    /// Every external MCP call is asked. The default.
    #[default]
    Ask,
    /// The person's allow rules and "Always allow" grants apply; everything else is asked.
    Rules,
    /// Every call runs unasked. Explicit, with [`ALLOW_ALL_WARNING`].
    AllowAll,
}

impl PermissionMode {
    /// Every mode, in the order settings list them.
    pub const ALL: [PermissionMode; 3] =
        [PermissionMode::Ask, PermissionMode::Rules, PermissionMode::AllowAll];

    /// The name stored and sent over the API.
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Ask => "ask",
            PermissionMode::Rules => "rules",
            PermissionMode::AllowAll => "allow_all",
        }
    }

    /// Reads a stored name.
    pub fn parse(value: &str) -> Option<PermissionMode> {
        PermissionMode::ALL.into_iter().find(|mode| mode.as_str() == value)
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a tool comes from, lowest trust last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrustLevel {
    /// The app's own tools (`web_search`, `read_page`, memory): never put to the person here.
    BuiltIn,
    /// Tools shipped as plugins of this instance: a host-judged read-only call runs unasked.
    Plugin,
    /// Tools of an MCP server someone added: asked unless the person said otherwise.
    ExternalMcp,
}

/// The host's own judgement of a call's risk. Only consulted for [`TrustLevel::Plugin`]; for
/// external MCP it is ignored, because for those the judgement would rest on the server's
/// description of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RiskBand {
    ReadOnly,
    Write,
    Destructive,
}

/// The call about to be made, as consent sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConsentCall<'a> {
    /// The MCP server's address as stored (what grants and rules are keyed by).
    pub server_address: &'a str,
    /// The tool's original name on that server (not the model-facing `mcp_...` name).
    pub tool_name: &'a str,
    /// [`tool_definition_hash`] of the tool as currently catalogued.
    pub tool_definition_hash: &'a str,
    /// The arguments the model asked for.
    pub arguments: &'a Value,
    /// The host's risk band, if it judged one.
    pub risk: Option<RiskBand>,
    /// The server's `readOnlyHint` annotation. Recorded for display; never decides anything.
    pub read_only_hint: bool,
}

/// An "Always allow" pressed on a card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub id: String,
    pub server_address: String,
    pub tool_name: String,
    pub tool_definition_hash: String,
    /// The exact arguments that were shown, as [`canonical_json`].
    pub arguments_json: String,
    /// [`sha256_hex`] of `arguments_json`.
    pub arguments_sha256: String,
}

/// What an allow rule demands of one argument.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgConstraint {
    /// The argument is present and equal to this value (compared canonically).
    Exact(Value),
    /// Any value, or the argument left out.
    Any,
}

/// An allow rule written in settings.
#[derive(Debug, Clone, PartialEq)]
pub struct AllowRule {
    pub id: String,
    pub server_address: String,
    pub tool_name: String,
    /// The tool as it was described when the rule was written.
    pub tool_definition_hash: String,
    /// One constraint per argument the rule covers. Arguments not named here make the rule
    /// not apply.
    pub arguments: BTreeMap<String, ArgConstraint>,
}

impl AllowRule {
    /// Whether this rule allows `call` (the mode is not considered here).
    pub fn covers(&self, call: &ConsentCall<'_>) -> bool {
        if self.server_address != call.server_address
            || self.tool_name != call.tool_name
            || self.tool_definition_hash != call.tool_definition_hash
        {
            return false;
        }
        let given = match call.arguments {
            Value::Object(map) => map,
            // No arguments at all is the same as an empty object; anything else is not a
            // shape a rule can speak about.
            Value::Null => return self.arguments.values().all(|c| matches!(c, ArgConstraint::Any)),
            _ => return false,
        };
        if given.keys().any(|name| !self.arguments.contains_key(name)) {
            return false;
        }
        self.arguments.iter().all(|(name, constraint)| match (constraint, given.get(name)) {
            (ArgConstraint::Any, _) => true,
            (ArgConstraint::Exact(want), Some(got)) => canonical_json(want) == canonical_json(got),
            (ArgConstraint::Exact(_), None) => false,
        })
    }
}

impl Grant {
    /// Whether this grant covers `call`: same server, same tool definition, same arguments.
    pub fn covers(&self, call: &ConsentCall<'_>) -> bool {
        self.server_address == call.server_address
            && self.tool_name == call.tool_name
            && self.tool_definition_hash == call.tool_definition_hash
            && self.arguments_sha256 == sha256_hex(canonical_json(call.arguments).as_bytes())
    }
}

/// Why a call may run unasked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedBecause {
    /// One of the app's own tools.
    BuiltIn,
    /// A plugin call the host judged read-only.
    PluginReadOnly,
    /// The account's mode is "allow all".
    AllowAllMode,
    /// An "Always allow" grant.
    Grant { grant_id: String },
    /// An allow rule.
    Rule { rule_id: String },
}

impl fmt::Display for AllowedBecause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowedBecause::BuiltIn => f.write_str("one of the app's own tools"),
            AllowedBecause::PluginReadOnly => f.write_str("a read-only plugin call"),
            AllowedBecause::AllowAllMode => f.write_str("permission mode is allow all"),
            AllowedBecause::Grant { grant_id } => write!(f, "always allowed (grant {grant_id})"),
            AllowedBecause::Rule { rule_id } => write!(f, "allow rule {rule_id}"),
        }
    }
}

/// Whether to put the call to the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConsentDecision {
    /// Put it to the person (the approval broker's card).
    Ask,
    /// Run it unasked, for this reason (still recorded).
    Allowed { because: AllowedBecause },
}

/// Decides whether `call` may run unasked. See the module documentation for the rules.
pub fn decide(
    mode: PermissionMode,
    trust: TrustLevel,
    grants: &[Grant],
    rules: &[AllowRule],
    call: &ConsentCall<'_>,
) -> ConsentDecision {
    match trust {
        TrustLevel::BuiltIn => {
            return ConsentDecision::Allowed { because: AllowedBecause::BuiltIn };
        }
        TrustLevel::Plugin if call.risk == Some(RiskBand::ReadOnly) => {
            return ConsentDecision::Allowed { because: AllowedBecause::PluginReadOnly };
        }
        // External MCP: neither `risk` nor `read_only_hint` is looked at, on purpose.
        TrustLevel::Plugin | TrustLevel::ExternalMcp => {}
    }
    match mode {
        PermissionMode::Ask => ConsentDecision::Ask,
        PermissionMode::AllowAll => {
            ConsentDecision::Allowed { because: AllowedBecause::AllowAllMode }
        }
        PermissionMode::Rules => {
            if let Some(grant) = grants.iter().find(|g| g.covers(call)) {
                return ConsentDecision::Allowed {
                    because: AllowedBecause::Grant { grant_id: grant.id.clone() },
                };
            }
            if let Some(rule) = rules.iter().find(|r| r.covers(call)) {
                return ConsentDecision::Allowed {
                    because: AllowedBecause::Rule { rule_id: rule.id.clone() },
                };
            }
            ConsentDecision::Ask
        }
    }
}

/// The canonical text of `arguments` and its SHA-256, as a pending call stores them.
pub fn canonical_arguments(arguments: &Value) -> (String, String) {
    let text = canonical_json(arguments);
    let hash = sha256_hex(text.as_bytes());
    (text, hash)
}

/// The hash that identifies a tool *as described*: its name, description and input schema.
/// Any change to one of them gives another hash, which voids grants and rules made for the old
/// one.
pub fn tool_definition_hash(tool_name: &str, description: &str, input_schema: &Value) -> String {
    let definition = serde_json::json!({
        "name": tool_name,
        "description": description,
        "inputSchema": input_schema,
    });
    sha256_hex(canonical_json(&definition).as_bytes())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const SERVER: &str = "https://hub.example/mcp";
    const TOOL: &str = "send_mail";

    fn def_hash() -> String {
        tool_definition_hash(TOOL, "Sends a mail", &json!({"type": "object"}))
    }

    fn grant(arguments: Value) -> Grant {
        let (arguments_json, arguments_sha256) = canonical_arguments(&arguments);
        Grant {
            id: "g1".into(),
            server_address: SERVER.into(),
            tool_name: TOOL.into(),
            tool_definition_hash: def_hash(),
            arguments_json,
            arguments_sha256,
        }
    }

    fn rule(arguments: &[(&str, ArgConstraint)]) -> AllowRule {
        AllowRule {
            id: "r1".into(),
            server_address: SERVER.into(),
            tool_name: TOOL.into(),
            tool_definition_hash: def_hash(),
            arguments: arguments.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect(),
        }
    }

    use ArgConstraint::{Any, Exact};
    use PermissionMode::{AllowAll, Ask as AskMode, Rules};
    use TrustLevel::{BuiltIn, ExternalMcp, Plugin};

    /// What a row of the table expects.
    #[derive(Debug, PartialEq)]
    enum Want {
        Ask,
        Allowed(AllowedBecause),
    }

    struct Case {
        name: &'static str,
        mode: PermissionMode,
        trust: TrustLevel,
        grants: Vec<Grant>,
        rules: Vec<AllowRule>,
        /// Server address, tool, definition hash (None = current), arguments.
        server: &'static str,
        tool: &'static str,
        definition: Option<String>,
        arguments: Value,
        risk: Option<RiskBand>,
        read_only_hint: bool,
        want: Want,
    }

    fn case(name: &'static str, mode: PermissionMode, trust: TrustLevel, want: Want) -> Case {
        Case {
            name,
            mode,
            trust,
            grants: vec![],
            rules: vec![],
            server: SERVER,
            tool: TOOL,
            definition: None,
            arguments: json!({"to": "a@example.org", "body": "hi"}),
            risk: None,
            read_only_hint: false,
            want,
        }
    }

    impl Case {
        fn grants(mut self, grants: Vec<Grant>) -> Self {
            self.grants = grants;
            self
        }
        fn rules(mut self, rules: Vec<AllowRule>) -> Self {
            self.rules = rules;
            self
        }
        fn args(mut self, arguments: Value) -> Self {
            self.arguments = arguments;
            self
        }
        fn definition(mut self, hash: String) -> Self {
            self.definition = Some(hash);
            self
        }
        fn server(mut self, server: &'static str) -> Self {
            self.server = server;
            self
        }
        fn tool(mut self, tool: &'static str) -> Self {
            self.tool = tool;
            self
        }
        fn risk(mut self, risk: RiskBand) -> Self {
            self.risk = Some(risk);
            self
        }
        fn read_only_hint(mut self) -> Self {
            self.read_only_hint = true;
            self
        }
    }

    fn granted() -> Want {
        Want::Allowed(AllowedBecause::Grant { grant_id: "g1".into() })
    }
    fn ruled() -> Want {
        Want::Allowed(AllowedBecause::Rule { rule_id: "r1".into() })
    }

    fn the_grant() -> Grant {
        grant(json!({"to": "a@example.org", "body": "hi"}))
    }

    #[test]
    fn decision_table() {
        let changed_definition =
            tool_definition_hash(TOOL, "Sends a mail to anyone, and deletes it", &json!({}));
        let cases = vec![
            // Trust levels.
            case(
                "built-in is never asked",
                AskMode,
                BuiltIn,
                Want::Allowed(AllowedBecause::BuiltIn),
            ),
            case(
                "plugin read-only runs",
                AskMode,
                Plugin,
                Want::Allowed(AllowedBecause::PluginReadOnly),
            )
            .risk(RiskBand::ReadOnly),
            case("plugin write is asked", AskMode, Plugin, Want::Ask).risk(RiskBand::Write),
            case("plugin with no band is asked", AskMode, Plugin, Want::Ask),
            case("external read-only band is still asked", AskMode, ExternalMcp, Want::Ask)
                .risk(RiskBand::ReadOnly),
            case("external readOnlyHint is still asked", AskMode, ExternalMcp, Want::Ask)
                .read_only_hint(),
            case("external readOnlyHint in rules mode is asked", Rules, ExternalMcp, Want::Ask)
                .read_only_hint()
                .risk(RiskBand::ReadOnly),
            // Modes.
            case("ask mode asks by default", AskMode, ExternalMcp, Want::Ask),
            case("ask mode ignores grants", AskMode, ExternalMcp, Want::Ask)
                .grants(vec![the_grant()]),
            case("ask mode ignores rules", AskMode, ExternalMcp, Want::Ask)
                .rules(vec![rule(&[("to", Any), ("body", Any)])]),
            case(
                "allow all runs",
                AllowAll,
                ExternalMcp,
                Want::Allowed(AllowedBecause::AllowAllMode),
            ),
            case("rules mode with nothing stored asks", Rules, ExternalMcp, Want::Ask),
            // Grants.
            case("grant covers the same arguments", Rules, ExternalMcp, granted())
                .grants(vec![the_grant()]),
            case("grant ignores key order and spacing", Rules, ExternalMcp, granted())
                .grants(vec![grant(json!({"body": "hi", "to": "a@example.org"}))]),
            case("grant does not cover another value", Rules, ExternalMcp, Want::Ask)
                .grants(vec![the_grant()])
                .args(json!({"to": "boss@example.org", "body": "hi"})),
            case("grant does not cover an added argument", Rules, ExternalMcp, Want::Ask)
                .grants(vec![the_grant()])
                .args(json!({"to": "a@example.org", "body": "hi", "bcc": "x@evil.example"})),
            case("grant does not cover a removed argument", Rules, ExternalMcp, Want::Ask)
                .grants(vec![the_grant()])
                .args(json!({"to": "a@example.org"})),
            case("grant does not cover a number for a string", Rules, ExternalMcp, Want::Ask)
                .grants(vec![grant(json!({"n": "1"}))])
                .args(json!({"n": 1})),
            case("grant voided by a changed definition", Rules, ExternalMcp, Want::Ask)
                .grants(vec![the_grant()])
                .definition(changed_definition.clone()),
            case("grant for another server", Rules, ExternalMcp, Want::Ask)
                .grants(vec![the_grant()])
                .server("https://other.example/mcp"),
            case("grant for another tool", Rules, ExternalMcp, Want::Ask)
                .grants(vec![the_grant()])
                .tool("delete_mail"),
            // Rules.
            case("rule with any values", Rules, ExternalMcp, ruled())
                .rules(vec![rule(&[("to", Any), ("body", Any)])]),
            case("rule with an exact value that matches", Rules, ExternalMcp, ruled())
                .rules(vec![rule(&[("to", Exact(json!("a@example.org"))), ("body", Any)])]),
            case("rule with an exact value that differs", Rules, ExternalMcp, Want::Ask)
                .rules(vec![rule(&[("to", Exact(json!("b@example.org"))), ("body", Any)])]),
            case(
                "rule does not apply to an argument it does not name",
                Rules,
                ExternalMcp,
                Want::Ask,
            )
            .rules(vec![rule(&[("to", Any)])]),
            case("rule: any also covers a left-out argument", Rules, ExternalMcp, ruled())
                .rules(vec![rule(&[("to", Any), ("body", Any), ("cc", Any)])]),
            case("rule: exact does not cover a left-out argument", Rules, ExternalMcp, Want::Ask)
                .rules(vec![rule(&[("to", Any), ("body", Any), ("cc", Exact(json!("x")))])]),
            case("rule: exact compares objects canonically", Rules, ExternalMcp, ruled())
                .rules(vec![rule(&[("q", Exact(json!({"b": 1, "a": [1, 2]})))])])
                .args(json!({"q": {"a": [1, 2], "b": 1}})),
            case("rule voided by a changed definition", Rules, ExternalMcp, Want::Ask)
                .rules(vec![rule(&[("to", Any), ("body", Any)])])
                .definition(changed_definition),
            case("rule for another tool", Rules, ExternalMcp, Want::Ask)
                .rules(vec![rule(&[("to", Any), ("body", Any)])])
                .tool("delete_mail"),
            case("rule with no arguments covers a call with none", Rules, ExternalMcp, ruled())
                .rules(vec![rule(&[])])
                .args(json!({})),
            case("rule with no arguments covers a null call", Rules, ExternalMcp, ruled())
                .rules(vec![rule(&[])])
                .args(Value::Null),
            case("rule does not cover non-object arguments", Rules, ExternalMcp, Want::Ask)
                .rules(vec![rule(&[])])
                .args(json!([1])),
            case("plugin write follows the rules", Rules, Plugin, ruled())
                .risk(RiskBand::Write)
                .rules(vec![rule(&[("to", Any), ("body", Any)])]),
        ];
        let mut failures = Vec::new();
        for case in cases {
            let definition = case.definition.clone().unwrap_or_else(def_hash);
            let call = ConsentCall {
                server_address: case.server,
                tool_name: case.tool,
                tool_definition_hash: &definition,
                arguments: &case.arguments,
                risk: case.risk,
                read_only_hint: case.read_only_hint,
            };
            let got = match decide(case.mode, case.trust, &case.grants, &case.rules, &call) {
                ConsentDecision::Ask => Want::Ask,
                ConsentDecision::Allowed { because } => Want::Allowed(because),
            };
            if got != case.want {
                failures.push(format!("{}: expected {:?}, got {:?}", case.name, case.want, got));
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn canonical_hash_is_stable_and_sensitive() {
        let (text_a, hash_a) = canonical_arguments(&json!({"x": 1, "y": "2"}));
        let (text_b, hash_b) = canonical_arguments(&json!({"y": "2", "x": 1}));
        assert_eq!((text_a, &hash_a), (text_b, &hash_b));
        assert_eq!(hash_a.len(), 64);
        let (_, hash_c) = canonical_arguments(&json!({"x": 1, "y": 2}));
        assert_ne!(hash_a, hash_c);
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    /// Grants and rules already stored hold these hashes: the canonical text of a given value,
    /// and so its hash, must never change (a grant made yesterday must still cover today's
    /// call). Computed with the code as it stood before `canonical_json` became one function.
    #[test]
    fn stored_hashes_stay_byte_identical() {
        let arguments: Value = serde_json::from_str(
            r#"{"to": "a@example.org", "Zeta": [3, -1, 1.5, 12345678901234567890, true, null],
                "é": {"b": "tab\tquote\"slash\\", "a": "\u0001 ☃ 😀"}, "_": {}, "A": []}"#,
        )
        .unwrap_or(Value::Null);
        let (text, hash) = canonical_arguments(&arguments);
        assert_eq!(
            text,
            r#"{"A":[],"Zeta":[3,-1,1.5,12345678901234567890,true,null],"_":{},"to":"a@example.org","é":{"a":"\u0001 ☃ 😀","b":"tab\tquote\"slash\\"}}"#
        );
        assert_eq!(hash, "6ce2bd60a7dc553f0fb0146319dad368e346ba50df0b3e506a371a1a10dc7755");
        let definition = tool_definition_hash(
            "send_mail",
            "Sends a mail.\nUse <b>carefully</b>.",
            &json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}),
        );
        assert_eq!(definition, "765eea5d8104c2c10db7d22491660adf0289d2fc83cfde66285a603fc76a97b0");
    }

    #[test]
    fn definition_hash_changes_with_any_part() {
        let base = tool_definition_hash("t", "d", &json!({"type": "object"}));
        assert_ne!(base, tool_definition_hash("t2", "d", &json!({"type": "object"})));
        assert_ne!(base, tool_definition_hash("t", "d2", &json!({"type": "object"})));
        assert_ne!(base, tool_definition_hash("t", "d", &json!({"type": "array"})));
        assert_eq!(base, tool_definition_hash("t", "d", &json!({"type": "object"})));
    }

    #[test]
    fn modes_round_trip() {
        for mode in PermissionMode::ALL {
            assert_eq!(PermissionMode::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(PermissionMode::parse("yolo"), None);
        assert_eq!(PermissionMode::default(), PermissionMode::Ask);
    }
}
