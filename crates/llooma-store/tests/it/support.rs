//! A fresh database per test: a SQLite file in a temporary directory, or a fresh Postgres
//! database (`LLOOMA_TEST_DB=postgres`, server at `LLOOMA_TEST_PG_URL`) dropped at the end.

use std::sync::Arc;

use llooma_approval_broker::{Broker, BrokerConfig, Clock, NewCall};
use llooma_store::{Engine, NewAccount, NewMcpServer, Store};

pub fn engine() -> Engine {
    match std::env::var("LLOOMA_TEST_DB").as_deref() {
        Ok("postgres") => Engine::Postgres,
        _ => Engine::Sqlite,
    }
}

/// A database of its own for one test (see llooma-test-support).
pub struct TestDb {
    inner: llooma_test_support::TestDatabase,
}

impl TestDb {
    pub async fn new() -> TestDb {
        TestDb { inner: llooma_test_support::TestDatabase::new() }
    }

    pub fn url(&self) -> String {
        self.inner.url()
    }

    /// A migrated store. Call twice for two "replicas" with separate pools.
    pub async fn store(&self) -> Store {
        let store = Store::connect(&self.url()).await.unwrap();
        store.migrate().await.unwrap();
        store
    }
}

/// Creates an account and returns its id.
pub async fn account(store: &Store, username: &str) -> String {
    store
        .create_admin(NewAccount {
            username: username.into(),
            display_name: username.into(),
            password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into(),
        })
        .await
        .unwrap()
        .id
}

pub async fn broker(store: &Store, clock: Arc<dyn Clock>, replica: &str) -> Broker<Store> {
    broker_with(store, clock, BrokerConfig::new(replica)).await
}

pub async fn broker_with(
    store: &Store,
    clock: Arc<dyn Clock>,
    config: BrokerConfig,
) -> Broker<Store> {
    Broker::start(store.clone(), clock, config).await.unwrap()
}

pub const SERVER: &str = "https://hub.example/mcp";

/// One of `account_id`'s servers to add: a new id, no token, an empty snapshot.
pub fn new_server(account_id: &str, label: &str, address: &str) -> NewMcpServer {
    NewMcpServer {
        id: uuid::Uuid::new_v4().to_string(),
        account_id: account_id.into(),
        label: label.into(),
        address: address.into(),
        token_ciphertext: None,
        snapshot_json: "{}".into(),
    }
}

pub fn definition_hash() -> String {
    llooma_consent::tool_definition_hash(
        "send_mail",
        "Sends a mail",
        &serde_json::json!({"type": "object", "properties": {"to": {"type": "string"}}}),
    )
}

pub fn new_call(account_id: &str, arguments: serde_json::Value) -> NewCall {
    NewCall {
        account_id: account_id.into(),
        conversation_id: "conversation-1".into(),
        turn_id: "turn-1".into(),
        server_id: "server-1".into(),
        server_label: "Mail".into(),
        server_address: SERVER.into(),
        tool_name: "send_mail".into(),
        model_tool_name: "mcp_mail_send_mail".into(),
        tool_description: "Sends a mail".into(),
        tool_definition_hash: definition_hash(),
        tool_hints_json: None,
        arguments,
    }
}

pub async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(20), future).await.expect("timed out")
}
