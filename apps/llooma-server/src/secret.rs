//! The instance secret: where it comes from, checking it against the data, rotating it.
//!
//! Rules: a secret that does not match the data stops start-up; a new secret is generated only
//! when the database holds nothing encrypted yet; a rotation writes the new secret next to the
//! old one first (`<file>.new`), re-encrypts everything in one transaction, then renames, so a
//! crash at any point leaves a state the next start can finish.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use llooma_store::Store;
use llooma_vault::{InstanceSecret, SecretContext, SecretFileStatus, Vault};

use crate::settings::Settings;

fn pending_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".new");
    PathBuf::from(name)
}

/// Loads the instance secret and checks it against the database; stores the canary on first use.
pub async fn open_vault(settings: &Settings, store: &Store) -> anyhow::Result<Vault> {
    let state = store.instance_state().await?;
    let file = settings.secret_file();
    let secret = if let Some(value) = &settings.secret {
        InstanceSecret::from_env_value(value.expose()).context("LLOOMA_SECRET")?
    } else if file.exists() {
        let (secret, warning) = llooma_vault::read_secret_file(&file)?;
        if let Some(warning) = warning {
            tracing::warn!("{warning}");
        }
        secret
    } else if state.vault_canary.is_some() {
        bail!(
            "the instance secret file {} is missing, but the database holds data encrypted with an \
             instance secret. Restore that file (or set LLOOMA_SECRET to the secret). Llooma never \
             generates a new secret over existing data.",
            file.display()
        );
    } else {
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating the directory {}", dir.display()))?;
        }
        let (secret, status) = llooma_vault::load_or_create_secret_file(&file)?;
        if status == SecretFileStatus::Created {
            tracing::info!(
                "generated a new instance secret in {}; back it up with the database: without it, \
                 stored keys and tokens cannot be read",
                file.display()
            );
        }
        secret
    };
    let vault = Vault::new(&secret);
    match state.vault_canary {
        None => {
            let canary = vault.make_canary()?;
            if !store.set_vault_canary_if_absent(&canary).await? {
                // Another process stored one first: it must match ours too.
                let stored = store.instance_state().await?.vault_canary.unwrap_or_default();
                vault.check_canary(&stored).map_err(|e| mismatch(settings, e))?;
            }
            Ok(vault)
        }
        Some(canary) => match vault.check_canary(&canary) {
            Ok(()) => Ok(vault),
            Err(err) => finish_interrupted_rotation(settings, &canary)?
                .ok_or_else(|| mismatch(settings, err)),
        },
    }
}

fn mismatch(settings: &Settings, err: llooma_vault::VaultError) -> anyhow::Error {
    let source = if settings.secret.is_some() {
        "LLOOMA_SECRET".to_owned()
    } else {
        format!("the file {}", settings.secret_file().display())
    };
    anyhow::anyhow!(
        "the instance secret ({source}) does not match this database: {err}. Use the secret this \
         database was created with; starting with another one would make every stored key unreadable."
    )
}

/// A rotation that committed in the database but did not rename its `.new` file is finished here.
fn finish_interrupted_rotation(settings: &Settings, canary: &str) -> anyhow::Result<Option<Vault>> {
    if settings.secret.is_some() {
        return Ok(None);
    }
    let file = settings.secret_file();
    let pending = pending_path(&file);
    if !pending.exists() {
        return Ok(None);
    }
    let (secret, _) = llooma_vault::read_secret_file(&pending)?;
    let vault = Vault::new(&secret);
    if vault.check_canary(canary).is_err() {
        return Ok(None);
    }
    std::fs::rename(&pending, &file)
        .with_context(|| format!("moving {} to {}", pending.display(), file.display()))?;
    tracing::warn!(
        "finished an interrupted secret rotation: {} is now the instance secret",
        file.display()
    );
    Ok(Some(vault))
}

/// `llooma rotate-secret`: re-encrypts every stored secret under a new instance secret.
pub async fn rotate(
    settings: &Settings,
    store: &Store,
    new_value: Option<String>,
) -> anyhow::Result<String> {
    let old = open_vault(settings, store).await?;
    let new_secret = match new_value {
        Some(value) => InstanceSecret::from_env_value(&value).context("the new secret")?,
        None if settings.secret.is_some() => bail!(
            "the instance secret comes from LLOOMA_SECRET, so Llooma cannot store a new one for you: \
             put the new secret in another variable and pass its name with --new-secret-env"
        ),
        None => InstanceSecret::generate()?,
    };
    let new = Vault::new(&new_secret);
    if new.key_id() == old.key_id() {
        bail!("the new secret is the same as the current one");
    }
    let file = settings.secret_file();
    let pending = pending_path(&file);
    if settings.secret.is_none() {
        llooma_vault::write_secret_file(&pending, &new_secret)?;
    }
    let count = store
        .reencrypt_all(&new.make_canary()?, |column, row, stored| {
            old.reencrypt(&new, SecretContext::new(column.table, column.column, row), stored)
        })
        .await?;
    if settings.secret.is_none() {
        std::fs::rename(&pending, &file)
            .with_context(|| format!("moving {} to {}", pending.display(), file.display()))?;
        Ok(format!(
            "re-encrypted {count} stored secrets; the new instance secret is in {} (back it up)",
            file.display()
        ))
    } else {
        Ok(format!(
            "re-encrypted {count} stored secrets; set LLOOMA_SECRET to the new secret before the next start"
        ))
    }
}
