//! sea-orm entities, one module per table. Kept private: callers get the plain structs of the
//! repository modules, so the ORM never leaks out of this crate.

pub mod instance_state {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "instance_state")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: i32,
        pub setup_complete: bool,
        pub vault_canary: Option<String>,
        pub updated_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod instance_settings {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "instance_settings")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: i32,
        pub registration_open: bool,
        pub users_can_add_mcp_servers: bool,
        pub updated_at_ms: i64,
        pub web_search_url: Option<String>,
        pub system_prompt: Option<String>,
        pub default_provider_id: Option<String>,
        pub default_model: Option<String>,
        pub stt_provider_id: Option<String>,
        pub stt_model: Option<String>,
        pub tts_provider_id: Option<String>,
        pub tts_model: Option<String>,
        pub tts_voice: Option<String>,
        pub currency: String,
        pub limit_tokens_per_day: Option<i64>,
        pub limit_tokens_per_month: Option<i64>,
        pub limit_spend_micros_per_day: Option<i64>,
        pub limit_spend_micros_per_month: Option<i64>,
        pub limit_turns_per_minute: Option<i64>,
        pub context_tokens: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod accounts {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "accounts")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub username: String,
        pub display_name: String,
        pub password_hash: String,
        pub role: String,
        pub created_at_ms: i64,
        pub password_changed_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod sessions {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "sessions")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub token_hash: String,
        pub account_id: String,
        pub csrf_token: String,
        pub created_at_ms: i64,
        pub last_seen_at_ms: i64,
        pub expires_at_ms: i64,
        pub client_addr: Option<String>,
        pub user_agent: Option<String>,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {
        /// The account signed in (read with the session: one query per request).
        #[sea_orm(
            belongs_to = "super::accounts::Entity",
            from = "Column::AccountId",
            to = "super::accounts::Column::Id"
        )]
        Account,
    }

    impl Related<super::accounts::Entity> for Entity {
        fn to() -> RelationDef {
            Relation::Account.def()
        }
    }

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod login_failures {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "login_failures")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub scope: String,
        pub subject: String,
        pub at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod providers {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "providers")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub name: String,
        pub base_url: String,
        pub api_key_ciphertext: Option<String>,
        pub created_at_ms: i64,
        pub updated_at_ms: i64,
        pub models_json: Option<String>,
        pub local_network: bool,
        pub vision_models_json: Option<String>,
        pub context_windows_json: Option<String>,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod mcp_servers {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "mcp_servers")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub account_id: String,
        pub label: String,
        pub slug: String,
        pub address: String,
        pub token_ciphertext: Option<String>,
        pub enabled: bool,
        pub suspended_reason: Option<String>,
        pub suspended_at_ms: Option<i64>,
        pub suspended_by: Option<String>,
        pub snapshot_json: String,
        pub snapshot_taken_at_ms: i64,
        pub snapshot_stale: bool,
        pub position: i64,
        pub created_at_ms: i64,
        pub updated_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod mcp_group_switches {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "mcp_group_switches")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub server_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub group_key: String,
        pub enabled: bool,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod account_preferences {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "account_preferences")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub account_id: String,
        pub titles_from_model: bool,
        pub updated_at_ms: i64,
        pub speech_voice: Option<String>,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod account_tool_settings {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "account_tool_settings")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub account_id: String,
        pub tool_budget: i64,
        pub mcp_everywhere: bool,
        pub announce_mode: bool,
        pub updated_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod conversations {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "conversations")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub account_id: String,
        pub title: String,
        pub provider_id: Option<String>,
        pub model: Option<String>,
        pub mcp_enabled: bool,
        pub created_at_ms: i64,
        pub updated_at_ms: i64,
        pub persona_id: Option<String>,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod files {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "files")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub account_id: String,
        pub conversation_id: String,
        pub turn_id: Option<String>,
        pub name: String,
        pub kind: String,
        pub content_type: String,
        pub size_bytes: i64,
        pub width: Option<i64>,
        pub height: Option<i64>,
        pub text_chars: Option<i64>,
        pub text_cut: bool,
        pub created_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod file_contents {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "file_contents")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub file_id: String,
        pub bytes: Vec<u8>,
        pub thumbnail: Option<Vec<u8>>,
        pub text: Option<String>,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod mcp_views {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "mcp_views")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub server_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub hash: String,
        pub uri: String,
        pub html: String,
        pub domains_json: String,
        pub prefers_border: Option<bool>,
        pub created_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod messages {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "messages")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub conversation_id: String,
        pub role: String,
        pub content: String,
        pub turn_id: Option<String>,
        pub created_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod turns {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "turns")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub conversation_id: String,
        pub state: String,
        pub started_at_ms: i64,
        pub ended_at_ms: Option<i64>,
        pub error: Option<String>,
        pub owner_replica: Option<String>,
        pub stop_requested_at_ms: Option<i64>,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod turn_events {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "turn_events")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub conversation_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub seq: i64,
        pub turn_id: String,
        pub kind: String,
        pub data_json: String,
        pub at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod model_prompts {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "model_prompts")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub provider_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub model: String,
        pub prompt: String,
        pub updated_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod personas {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "personas")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub account_id: String,
        pub name: String,
        pub prompt: String,
        pub memory_enabled: bool,
        pub created_at_ms: i64,
        pub updated_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod persona_memories {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "persona_memories")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub persona_id: String,
        pub content: String,
        pub created_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod tool_wordings {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "tool_wordings")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub account_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub tool: String,
        pub description: String,
        pub updated_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod bot_integrations {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "bot_integrations")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub account_id: String,
        pub label: String,
        pub address: String,
        pub api_key_ciphertext: String,
        pub bot_user_id: String,
        pub bot_login: String,
        pub bot_display_name: String,
        pub provider_id: Option<String>,
        pub model: Option<String>,
        pub context_mode: String,
        pub context_count: i64,
        pub placement: String,
        pub identity_source: String,
        pub persona_id: Option<String>,
        pub instructions: Option<String>,
        pub tools_json: String,
        pub mcp_ticked: bool,
        pub enabled: bool,
        pub run_state: String,
        pub paused_reason: Option<String>,
        pub last_error: Option<String>,
        pub missing_permission: Option<String>,
        pub state_at_ms: i64,
        pub created_at_ms: i64,
        pub updated_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod bot_activations {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "bot_activations")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub integration_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub room_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub event_id: String,
        pub recorded_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod bot_leases {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "bot_leases")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub integration_id: String,
        pub holder: Option<String>,
        pub expires_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod mcp_catalogue_entries {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "mcp_catalogue_entries")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub label: String,
        pub address: String,
        pub description: String,
        pub token_needed: bool,
        pub token_help: String,
        pub icon: String,
        pub tags_json: String,
        pub created_at_ms: i64,
        pub updated_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod mcp_catalogue_ratings {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "mcp_catalogue_ratings")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub entry_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub account_id: String,
        pub stars: i32,
        pub updated_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod model_prices {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "model_prices")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub provider_id: String,
        #[sea_orm(primary_key, auto_increment = false)]
        pub model: String,
        pub input_micros: i64,
        pub cached_input_micros: Option<i64>,
        pub output_micros: i64,
        pub updated_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub mod account_limits {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "account_limits")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub account_id: String,
        pub tokens_per_day: Option<i64>,
        pub tokens_per_month: Option<i64>,
        pub spend_micros_per_day: Option<i64>,
        pub spend_micros_per_month: Option<i64>,
        pub turns_per_minute: Option<i64>,
        pub updated_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}
