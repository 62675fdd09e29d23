//! Remembered consent over the real store: grants made by "Always allow", rules, modes.

use std::sync::Arc;

use llooma_approval_broker::{AnswerChoice, AnswerResult, SystemClock};
use llooma_consent::{
    AllowedBecause, ArgConstraint, ConsentCall, ConsentDecision, PermissionMode, TrustLevel,
    canonical_arguments, decide, tool_definition_hash,
};
use llooma_store::{NewGrant, NewRule, Store};
use serde_json::{Value, json};

use crate::support::{SERVER, TestDb, account, broker, definition_hash, new_call};

async fn decision(
    store: &Store,
    account: &str,
    definition: &str,
    arguments: &Value,
) -> ConsentDecision {
    let inputs = store.consent_inputs(account, SERVER, "send_mail").await.unwrap();
    let call = ConsentCall {
        server_address: SERVER,
        tool_name: "send_mail",
        tool_definition_hash: definition,
        arguments,
        risk: None,
        read_only_hint: true, // the server's claim; must change nothing
    };
    decide(inputs.mode, TrustLevel::ExternalMcp, &inputs.grants, &inputs.rules, &call)
}

#[tokio::test]
async fn always_allow_covers_the_same_call_only() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let bob = account(&store, "bob").await;
    let broker = broker(&store, Arc::new(SystemClock), "replica-a").await;
    let shown = json!({"to": "a@example.org", "body": "hi"});
    let call = broker.request(new_call(&alice, shown.clone())).await.unwrap();
    let result = broker.answer(&alice, &call.id, "tab", AnswerChoice::AlwaysAllow).await.unwrap();
    assert!(matches!(result, AnswerResult::Won { ref call } if call.remember));

    let grants = store.consent_grants(&alice).await.unwrap();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].grant.arguments_json, call.arguments_json);
    assert_eq!(grants[0].source_call_id.as_deref(), Some(call.id.as_str()));
    assert!(store.consent_grants(&bob).await.unwrap().is_empty());

    let def = definition_hash();
    // The default mode asks whatever was stored.
    assert_eq!(store.permission_mode(&alice).await.unwrap(), PermissionMode::Ask);
    assert_eq!(decision(&store, &alice, &def, &shown).await, ConsentDecision::Ask);

    store.set_permission_mode(&alice, PermissionMode::Rules).await.unwrap();
    assert_eq!(store.permission_mode(&alice).await.unwrap(), PermissionMode::Rules);
    let grant_id = grants[0].grant.id.clone();
    assert_eq!(
        decision(&store, &alice, &def, &json!({"body": "hi", "to": "a@example.org"})).await,
        ConsentDecision::Allowed { because: AllowedBecause::Grant { grant_id: grant_id.clone() } }
    );
    // Any argument value the grant does not cover asks again.
    for other in [
        json!({"to": "boss@example.org", "body": "hi"}),
        json!({"to": "a@example.org", "body": "hi", "bcc": "x@evil.example"}),
        json!({"to": "a@example.org"}),
    ] {
        assert_eq!(decision(&store, &alice, &def, &other).await, ConsentDecision::Ask, "{other}");
    }
    // A changed description or schema voids it.
    let changed =
        tool_definition_hash("send_mail", "Sends a mail, and forwards your inbox", &json!({}));
    assert_eq!(decision(&store, &alice, &changed, &shown).await, ConsentDecision::Ask);
    // Another account's mode and grants are its own.
    assert_eq!(decision(&store, &bob, &def, &shown).await, ConsentDecision::Ask);

    // Pressing it twice is one grant; revoking it asks again.
    let again = store
        .add_consent_grant(NewGrant {
            account_id: alice.clone(),
            server_address: SERVER.into(),
            tool_name: "send_mail".into(),
            tool_definition_hash: def.clone(),
            arguments_json: call.arguments_json.clone(),
            arguments_sha256: call.arguments_sha256.clone(),
            source_call_id: None,
        })
        .await
        .unwrap();
    assert_eq!(again.grant.id, grant_id);
    assert_eq!(store.consent_grants(&alice).await.unwrap().len(), 1);
    assert!(!store.revoke_consent_grant(&bob, &grant_id).await.unwrap(), "not bob's to revoke");
    assert!(store.revoke_consent_grant(&alice, &grant_id).await.unwrap());
    assert_eq!(decision(&store, &alice, &def, &shown).await, ConsentDecision::Ask);
}

#[tokio::test]
async fn rules_and_modes_are_kept_per_account() {
    let db = TestDb::new().await;
    let store = db.store().await;
    let alice = account(&store, "alice").await;
    let bob = account(&store, "bob").await;
    let def = definition_hash();
    let rule = store
        .add_consent_rule(NewRule {
            account_id: alice.clone(),
            server_address: SERVER.into(),
            tool_name: "send_mail".into(),
            tool_definition_hash: def.clone(),
            arguments: [
                ("to".to_owned(), ArgConstraint::Exact(json!("a@example.org"))),
                ("body".to_owned(), ArgConstraint::Any),
            ]
            .into_iter()
            .collect(),
        })
        .await
        .unwrap();
    assert_eq!(store.consent_rules(&alice).await.unwrap(), vec![rule.clone()]);
    assert!(store.consent_rules(&bob).await.unwrap().is_empty());

    store.set_permission_mode(&alice, PermissionMode::Rules).await.unwrap();
    let allowed = ConsentDecision::Allowed {
        because: AllowedBecause::Rule { rule_id: rule.rule.id.clone() },
    };
    assert_eq!(
        decision(&store, &alice, &def, &json!({"to": "a@example.org", "body": "x"})).await,
        allowed
    );
    assert_eq!(
        decision(&store, &alice, &def, &json!({"to": "b@example.org", "body": "x"})).await,
        ConsentDecision::Ask
    );
    assert_eq!(
        decision(&store, &alice, &def, &json!({"to": "a@example.org", "body": "x", "cc": "y"}))
            .await,
        ConsentDecision::Ask,
        "an argument the rule does not name makes it not apply"
    );

    store.set_permission_mode(&alice, PermissionMode::AllowAll).await.unwrap();
    assert_eq!(store.permission_mode(&alice).await.unwrap(), PermissionMode::AllowAll);
    assert_eq!(
        decision(&store, &alice, &def, &json!({"anything": 1})).await,
        ConsentDecision::Allowed { because: AllowedBecause::AllowAllMode }
    );
    assert_eq!(store.permission_mode(&bob).await.unwrap(), PermissionMode::Ask);

    assert!(!store.revoke_consent_rule(&bob, &rule.rule.id).await.unwrap());
    assert!(store.revoke_consent_rule(&alice, &rule.rule.id).await.unwrap());
    assert!(store.consent_rules(&alice).await.unwrap().is_empty());
    let (_, hash) = canonical_arguments(&json!({}));
    assert_eq!(hash.len(), 64);
}
