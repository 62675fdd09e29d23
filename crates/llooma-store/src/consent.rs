//! Remembered consent per account: the permission mode, "Always allow" grants and allow rules.
//! What they mean is decided in `llooma_consent`; this module only keeps them.

use std::collections::BTreeMap;

use llooma_consent::{AllowRule, ArgConstraint, Grant, PermissionMode};
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde_json::Value;

use crate::{Store, StoreError, StoreResult, now_ms};

pub(crate) mod modes_entity {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "consent_modes")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub account_id: String,
        pub mode: String,
        pub updated_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub(crate) mod grants_entity {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "consent_grants")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub account_id: String,
        pub server_address: String,
        pub tool_name: String,
        pub tool_definition_hash: String,
        pub arguments_json: String,
        pub arguments_sha256: String,
        pub source_call_id: Option<String>,
        pub created_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

pub(crate) mod rules_entity {
    use sea_orm::entity::prelude::*;

    #[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
    #[sea_orm(table_name = "consent_rules")]
    pub struct Model {
        #[sea_orm(primary_key, auto_increment = false)]
        pub id: String,
        pub account_id: String,
        pub server_address: String,
        pub tool_name: String,
        pub tool_definition_hash: String,
        pub constraints_json: String,
        pub created_at_ms: i64,
    }

    #[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
    pub enum Relation {}

    impl ActiveModelBehavior for ActiveModel {}
}

use grants_entity as grants;
use modes_entity as modes;
use rules_entity as rules;

/// A grant to store. The arguments are canonical JSON and its hash
/// (`llooma_consent::canonical_arguments`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewGrant {
    pub account_id: String,
    pub server_address: String,
    pub tool_name: String,
    pub tool_definition_hash: String,
    pub arguments_json: String,
    pub arguments_sha256: String,
    /// The approval call whose "Always allow" made it, if any.
    pub source_call_id: Option<String>,
}

/// A grant as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredGrant {
    pub grant: Grant,
    pub account_id: String,
    pub source_call_id: Option<String>,
    pub created_at_ms: i64,
}

/// A rule to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRule {
    pub account_id: String,
    pub server_address: String,
    pub tool_name: String,
    pub tool_definition_hash: String,
    pub arguments: BTreeMap<String, ArgConstraint>,
}

/// A rule as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRule {
    pub rule: AllowRule,
    pub account_id: String,
    pub created_at_ms: i64,
}

/// Everything `llooma_consent::decide` needs about one account and one tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsentInputs {
    pub mode: PermissionMode,
    pub grants: Vec<Grant>,
    pub rules: Vec<AllowRule>,
}

fn grant_from_model(model: grants::Model) -> StoredGrant {
    StoredGrant {
        grant: Grant {
            id: model.id,
            server_address: model.server_address,
            tool_name: model.tool_name,
            tool_definition_hash: model.tool_definition_hash,
            arguments_json: model.arguments_json,
            arguments_sha256: model.arguments_sha256,
        },
        account_id: model.account_id,
        source_call_id: model.source_call_id,
        created_at_ms: model.created_at_ms,
    }
}

/// `{"name": "any" | {"exact": value}}`.
fn encode_constraints(arguments: &BTreeMap<String, ArgConstraint>) -> String {
    let map: serde_json::Map<String, Value> = arguments
        .iter()
        .map(|(name, constraint)| {
            let encoded = match constraint {
                ArgConstraint::Any => Value::String("any".into()),
                ArgConstraint::Exact(value) => serde_json::json!({ "exact": value }),
            };
            (name.clone(), encoded)
        })
        .collect();
    Value::Object(map).to_string()
}

fn decode_constraints(text: &str) -> StoreResult<BTreeMap<String, ArgConstraint>> {
    let corrupt = || StoreError::Corrupt(format!("unreadable allow-rule constraints {text:?}"));
    let Value::Object(map) = serde_json::from_str(text).map_err(|_| corrupt())? else {
        return Err(corrupt());
    };
    map.into_iter()
        .map(|(name, encoded)| {
            let constraint = match encoded {
                Value::String(kind) if kind == "any" => ArgConstraint::Any,
                Value::Object(mut exact) => {
                    ArgConstraint::Exact(exact.remove("exact").ok_or_else(corrupt)?)
                }
                _ => return Err(corrupt()),
            };
            Ok((name, constraint))
        })
        .collect()
}

fn rule_from_model(model: rules::Model) -> StoreResult<StoredRule> {
    Ok(StoredRule {
        rule: AllowRule {
            arguments: decode_constraints(&model.constraints_json)?,
            id: model.id,
            server_address: model.server_address,
            tool_name: model.tool_name,
            tool_definition_hash: model.tool_definition_hash,
        },
        account_id: model.account_id,
        created_at_ms: model.created_at_ms,
    })
}

/// Stores a grant unless the same one exists (pressing "Always allow" twice is one grant).
pub(crate) async fn insert_grant<C: ConnectionTrait>(
    conn: &C,
    new: NewGrant,
    at_ms: i64,
) -> StoreResult<()> {
    grants::Entity::insert(grants::ActiveModel {
        id: Set(uuid::Uuid::new_v4().to_string()),
        account_id: Set(new.account_id),
        server_address: Set(new.server_address),
        tool_name: Set(new.tool_name),
        tool_definition_hash: Set(new.tool_definition_hash),
        arguments_json: Set(new.arguments_json),
        arguments_sha256: Set(new.arguments_sha256),
        source_call_id: Set(new.source_call_id),
        created_at_ms: Set(at_ms),
    })
    .on_conflict_do_nothing_on([
        grants::Column::AccountId,
        grants::Column::ServerAddress,
        grants::Column::ToolName,
        grants::Column::ToolDefinitionHash,
        grants::Column::ArgumentsSha256,
    ])
    .exec_without_returning(conn)
    .await?;
    Ok(())
}

impl Store {
    /// The account's permission mode; `ask` until it is changed.
    pub async fn permission_mode(&self, account_id: &str) -> StoreResult<PermissionMode> {
        match self.find_one(modes::Entity::find_by_id(account_id.to_owned())).await? {
            None => Ok(PermissionMode::default()),
            Some(row) => PermissionMode::parse(&row.mode).ok_or_else(|| {
                StoreError::Corrupt(format!("unknown permission mode {:?}", row.mode))
            }),
        }
    }

    pub async fn set_permission_mode(
        &self,
        account_id: &str,
        mode: PermissionMode,
    ) -> StoreResult<()> {
        modes::Entity::insert(modes::ActiveModel {
            account_id: Set(account_id.to_owned()),
            mode: Set(mode.as_str().to_owned()),
            updated_at_ms: Set(now_ms()),
        })
        .on_conflict(
            OnConflict::column(modes::Column::AccountId)
                .update_columns([modes::Column::Mode, modes::Column::UpdatedAtMs])
                .to_owned(),
        )
        .exec_without_returning(&self.db)
        .await?;
        Ok(())
    }

    /// The account's grants, oldest first.
    pub async fn consent_grants(&self, account_id: &str) -> StoreResult<Vec<StoredGrant>> {
        let query = grants::Entity::find()
            .filter(grants::Column::AccountId.eq(account_id))
            .order_by_asc(grants::Column::CreatedAtMs)
            .order_by_asc(grants::Column::Id);
        Ok(self.find_all(query).await?.into_iter().map(grant_from_model).collect())
    }

    /// Stores a grant (or finds the identical one) and returns it.
    pub async fn add_consent_grant(&self, new: NewGrant) -> StoreResult<StoredGrant> {
        let key = (
            new.account_id.clone(),
            new.server_address.clone(),
            new.tool_name.clone(),
            new.tool_definition_hash.clone(),
            new.arguments_sha256.clone(),
        );
        insert_grant(&self.db, new, now_ms()).await?;
        grants::Entity::find()
            .filter(grants::Column::AccountId.eq(key.0))
            .filter(grants::Column::ServerAddress.eq(key.1))
            .filter(grants::Column::ToolName.eq(key.2))
            .filter(grants::Column::ToolDefinitionHash.eq(key.3))
            .filter(grants::Column::ArgumentsSha256.eq(key.4))
            .one(&self.db)
            .await?
            .map(grant_from_model)
            .ok_or_else(|| StoreError::Corrupt("a grant just stored is missing".into()))
    }

    /// Removes one of the account's grants; `false` if it has no such grant.
    pub async fn revoke_consent_grant(
        &self,
        account_id: &str,
        grant_id: &str,
    ) -> StoreResult<bool> {
        let result = grants::Entity::delete_many()
            .filter(grants::Column::Id.eq(grant_id))
            .filter(grants::Column::AccountId.eq(account_id))
            .exec(&self.db)
            .await?;
        Ok(result.rows_affected == 1)
    }

    /// The account's allow rules, oldest first.
    pub async fn consent_rules(&self, account_id: &str) -> StoreResult<Vec<StoredRule>> {
        let query = rules::Entity::find()
            .filter(rules::Column::AccountId.eq(account_id))
            .order_by_asc(rules::Column::CreatedAtMs)
            .order_by_asc(rules::Column::Id);
        self.find_all(query).await?.into_iter().map(rule_from_model).collect()
    }

    pub async fn add_consent_rule(&self, new: NewRule) -> StoreResult<StoredRule> {
        let row = rules::ActiveModel {
            id: Set(uuid::Uuid::new_v4().to_string()),
            account_id: Set(new.account_id),
            server_address: Set(new.server_address),
            tool_name: Set(new.tool_name),
            tool_definition_hash: Set(new.tool_definition_hash),
            constraints_json: Set(encode_constraints(&new.arguments)),
            created_at_ms: Set(now_ms()),
        }
        .insert(&self.db)
        .await?;
        rule_from_model(row)
    }

    /// Removes one of the account's rules; `false` if it has no such rule.
    pub async fn revoke_consent_rule(&self, account_id: &str, rule_id: &str) -> StoreResult<bool> {
        let result = rules::Entity::delete_many()
            .filter(rules::Column::Id.eq(rule_id))
            .filter(rules::Column::AccountId.eq(account_id))
            .exec(&self.db)
            .await?;
        Ok(result.rows_affected == 1)
    }

    /// The mode, grants and rules that bear on one tool of one server, for
    /// `llooma_consent::decide`.
    pub async fn consent_inputs(
        &self,
        account_id: &str,
        server_address: &str,
        tool_name: &str,
    ) -> StoreResult<ConsentInputs> {
        let mode = self.permission_mode(account_id).await?;
        let grants = grants::Entity::find()
            .filter(grants::Column::AccountId.eq(account_id))
            .filter(grants::Column::ServerAddress.eq(server_address))
            .filter(grants::Column::ToolName.eq(tool_name));
        let grants = self
            .find_all(grants)
            .await?
            .into_iter()
            .map(|row| grant_from_model(row).grant)
            .collect();
        let rules = rules::Entity::find()
            .filter(rules::Column::AccountId.eq(account_id))
            .filter(rules::Column::ServerAddress.eq(server_address))
            .filter(rules::Column::ToolName.eq(tool_name));
        let rules = self
            .find_all(rules)
            .await?
            .into_iter()
            .map(|row| rule_from_model(row).map(|stored| stored.rule))
            .collect::<StoreResult<_>>()?;
        Ok(ConsentInputs { mode, grants, rules })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn constraints_round_trip() {
        let arguments: BTreeMap<String, ArgConstraint> = [
            ("a".to_owned(), ArgConstraint::Any),
            ("b".to_owned(), ArgConstraint::Exact(json!({"x": [1, "any"]}))),
            ("c".to_owned(), ArgConstraint::Exact(json!("any"))),
        ]
        .into_iter()
        .collect();
        assert_eq!(decode_constraints(&encode_constraints(&arguments)).unwrap(), arguments);
        assert!(decode_constraints("[]").is_err());
        assert!(decode_constraints(r#"{"a": "all"}"#).is_err());
    }
}
