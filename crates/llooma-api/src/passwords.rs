//! Password hashing with argon2id, off the async runtime and with a bound on concurrent hashes
//! (each one takes ~19 MiB and tens of milliseconds of a core: an unbounded login flood would
//! otherwise take the machine's memory and every worker thread).

use std::sync::Arc;

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use llooma_vault::Secret;
use tokio::sync::{OnceCell, Semaphore};

use crate::error::ApiError;

/// OWASP's recommended argon2id parameters: 19 MiB, 2 passes, 1 lane.
const MEMORY_KIB: u32 = 19_456;
const PASSES: u32 = 2;
const LANES: u32 = 1;

#[derive(Debug, Clone)]
pub struct Passwords {
    permits: Arc<Semaphore>,
    /// A hash of a random password, verified against when the account does not exist so that a
    /// wrong username takes as long as a wrong password.
    dummy_hash: Arc<OnceCell<String>>,
}

fn hasher() -> Result<Argon2<'static>, ApiError> {
    let params = Params::new(MEMORY_KIB, PASSES, LANES, None)
        .map_err(|e| ApiError::Internal(format!("argon2 parameters: {e}")))?;
    Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
}

fn hash_blocking(password: &Secret) -> Result<String, ApiError> {
    let salt = SaltString::generate(&mut OsRng);
    hasher()?
        .hash_password(password.expose().as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| ApiError::Internal(format!("hashing a password: {e}")))
}

fn verify_blocking(password: &Secret, hash: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(hash) else {
        return false;
    };
    match hasher() {
        Ok(argon) => argon.verify_password(password.expose().as_bytes(), &parsed).is_ok(),
        Err(_) => false,
    }
}

impl Passwords {
    pub fn new(max_concurrent: usize) -> Self {
        Passwords {
            permits: Arc::new(Semaphore::new(max_concurrent.max(1))),
            dummy_hash: Arc::new(OnceCell::new()),
        }
    }

    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ApiError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| ApiError::Internal("password hashing pool closed".into()))?;
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| ApiError::Internal(format!("password hashing task failed: {e}")))
    }

    /// Hashes a new password.
    pub async fn hash(&self, password: Secret) -> Result<String, ApiError> {
        self.run(move || hash_blocking(&password)).await?
    }

    /// Checks a password against a stored hash; with no hash (no such account) it spends the
    /// same effort and answers false.
    pub async fn verify(&self, password: Secret, hash: Option<String>) -> Result<bool, ApiError> {
        let (hash, real) = match hash {
            Some(hash) => (hash, true),
            None => (self.dummy_hash().await?, false),
        };
        let matches = self.run(move || verify_blocking(&password, &hash)).await?;
        Ok(real && matches)
    }

    async fn dummy_hash(&self) -> Result<String, ApiError> {
        self.dummy_hash
            .get_or_try_init(|| async {
                let mut bytes = [0u8; 24];
                getrandom::fill(&mut bytes)
                    .map_err(|e| ApiError::Internal(format!("random source: {e}")))?;
                let random = Secret::new(hex::encode(bytes));
                self.hash(random).await
            })
            .await
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_hash_verifies_only_its_own_password() {
        let passwords = Passwords::new(2);
        let hash = passwords.hash(Secret::new("correct horse")).await.unwrap();
        assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(passwords.verify(Secret::new("correct horse"), Some(hash.clone())).await.unwrap());
        assert!(!passwords.verify(Secret::new("wrong horse"), Some(hash)).await.unwrap());
        assert!(!passwords.verify(Secret::new("correct horse"), None).await.unwrap());
    }
}
