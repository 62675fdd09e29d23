//! A fresh database per test: a SQLite file in a temporary directory, or a fresh Postgres
//! database (`LLOOMA_TEST_DB=postgres`, server at `LLOOMA_TEST_PG_URL`) dropped at the end.

use std::sync::Arc;

use llooma_approval_broker::{Broker, BrokerConfig, Clock, NewCall};
use llooma_store::{Engine, NewAccount, Store};
use sea_orm::{ConnectionTrait, Database, DatabaseConnection};

pub fn engine() -> Engine {
    match std::env::var("LLOOMA_TEST_DB").as_deref() {
        Ok("postgres") => Engine::Postgres,
        _ => Engine::Sqlite,
    }
}

pub struct TestDb {
    dir: tempfile::TempDir,
    postgres: Option<(String, String)>, // (server url, database name)
}

impl TestDb {
    pub async fn new() -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let postgres = if engine() == Engine::Postgres {
            let base = std::env::var("LLOOMA_TEST_PG_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
            let name = format!("llooma_test_{}", uuid::Uuid::new_v4().simple());
            let admin = admin_connection(&base).await;
            admin.execute_unprepared(&format!("CREATE DATABASE \"{name}\"")).await.unwrap();
            admin.close().await.unwrap();
            Some((base, name))
        } else {
            None
        };
        TestDb { dir, postgres }
    }

    pub fn url(&self) -> String {
        match &self.postgres {
            Some((base, name)) => format!("{base}/{name}"),
            None => format!("sqlite://{}?mode=rwc", self.dir.path().join("llooma.db").display()),
        }
    }

    /// A migrated store. Call twice for two "replicas" with separate pools.
    pub async fn store(&self) -> Store {
        let store = Store::connect(&self.url()).await.unwrap();
        store.migrate().await.unwrap();
        store
    }
}

async fn admin_connection(base: &str) -> DatabaseConnection {
    Database::connect(format!("{base}/postgres")).await.unwrap_or_else(|e| {
        panic!("Postgres at {base} is not reachable ({e}); start it or set LLOOMA_TEST_PG_URL")
    })
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((base, name)) = self.postgres.clone() {
            // Drop runs outside the test's runtime: use a small one of its own.
            let _ = std::thread::spawn(move || {
                let runtime =
                    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                runtime.block_on(async {
                    if let Ok(admin) = Database::connect(format!("{base}/postgres")).await {
                        let _ = admin
                            .execute_unprepared(&format!(
                                "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                            ))
                            .await;
                        let _ = admin.close().await;
                    }
                });
            })
            .join();
        }
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

pub fn definition_hash() -> String {
    llooma_policy::consent::tool_definition_hash(
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
        arguments,
    }
}

pub async fn within<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(20), future).await.expect("timed out")
}
