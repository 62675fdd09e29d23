//! Integration tests of llooma-vault through its public API only.

use std::fs;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use llooma_vault::{
    InstanceSecret, Secret, SecretContext, SecretFileStatus, Vault, VaultError,
    load_or_create_secret_file, write_secret_file,
};

const CTX: SecretContext<'static> = SecretContext::new("provider_accounts", "api_key", "42");

fn vault(seed: &str) -> Vault {
    match InstanceSecret::from_env_value(&seed.repeat(32)) {
        Ok(secret) => Vault::new(&secret),
        Err(err) => panic!("{err}"),
    }
}

#[test]
fn round_trip() {
    let v = vault("a");
    for value in ["sk-test-123", "", "ünïcødé 🔑", &"x".repeat(10_000)] {
        let stored = v.encrypt(CTX, &Secret::new(value)).unwrap();
        assert!(stored.starts_with(&format!("v1.{}.", v.key_id())), "{stored}");
        assert!(!stored.contains(value) || value.is_empty());
        assert_eq!(v.decrypt(CTX, &stored).unwrap().expose(), value);
    }
}

#[test]
fn same_secret_gives_same_vault() {
    let stored = vault("a").encrypt(CTX, &Secret::new("sk")).unwrap();
    assert_eq!(vault("a").decrypt(CTX, &stored).unwrap().expose(), "sk");
}

#[test]
fn two_encryptions_of_the_same_value_differ() {
    let v = vault("a");
    let a = v.encrypt(CTX, &Secret::new("sk-same")).unwrap();
    let b = v.encrypt(CTX, &Secret::new("sk-same")).unwrap();
    assert_ne!(a, b);
}

#[test]
fn ciphertext_moved_to_another_place_fails() {
    let v = vault("a");
    let stored = v.encrypt(CTX, &Secret::new("sk-account-42")).unwrap();
    let elsewhere = [
        SecretContext::new("provider_accounts", "api_key", "43"),
        SecretContext::new("provider_accounts", "api_key", "4"),
        SecretContext::new("provider_accounts", "oauth_token", "42"),
        SecretContext::new("mcp_servers", "api_key", "42"),
        // Same concatenation, different split: the AAD is length-prefixed.
        SecretContext::new("provider_accountsapi_key", "", "42"),
        SecretContext::new("provider_accounts", "api_key4", "2"),
    ];
    for ctx in elsewhere {
        let err = v.decrypt(ctx, &stored).unwrap_err();
        assert!(matches!(err, VaultError::AuthenticationFailed { .. }), "{ctx:?}: {err:?}");
        let msg = err.to_string();
        assert!(msg.contains("another row, column or table"), "{msg}");
        assert!(msg.contains("set the secret again"), "{msg}");
    }
}

#[test]
fn any_flipped_bit_fails() {
    let v = vault("a");
    let stored = v.encrypt(CTX, &Secret::new("sk-live")).unwrap();
    let (prefix, payload) = stored.rsplit_once('.').unwrap();
    let bytes = URL_SAFE_NO_PAD.decode(payload).unwrap();
    // Every bit of nonce, ciphertext and tag.
    for bit in 0..bytes.len() * 8 {
        let mut tampered = bytes.clone();
        tampered[bit / 8] ^= 1 << (bit % 8);
        let tampered = format!("{prefix}.{}", URL_SAFE_NO_PAD.encode(&tampered));
        let err = v.decrypt(CTX, &tampered).unwrap_err();
        assert!(matches!(err, VaultError::AuthenticationFailed { .. }), "bit {bit}: {err:?}");
    }
}

#[test]
fn ciphertext_under_another_secret_reports_key_mismatch() {
    let old = vault("a");
    let new = vault("b");
    assert_ne!(old.key_id(), new.key_id());
    let stored = old.encrypt(CTX, &Secret::new("sk")).unwrap();
    let err = new.decrypt(CTX, &stored).unwrap_err();
    let VaultError::KeyMismatch { expected, found } = &err else {
        panic!("expected KeyMismatch, got {err:?}");
    };
    assert_eq!(expected, new.key_id());
    assert_eq!(found, old.key_id());
    assert!(err.to_string().contains("the instance secret does not match the data"), "{err}");
    assert_eq!(Vault::key_id_of(&stored).unwrap(), old.key_id());
}

#[test]
fn garbage_is_malformed_not_a_panic() {
    let v = vault("a");
    for stored in ["", "sk-plaintext-left-in-db", "v1..", "v1.zzzzzzzz.AAAA", "v9.00000000.AAAA"] {
        let err = v.decrypt(CTX, stored).unwrap_err();
        assert!(matches!(err, VaultError::Malformed { .. }), "{stored:?}: {err:?}");
    }
}

#[test]
fn format_v1_is_stable() {
    // Produced independently of this crate (PyNaCl's XChaCha20-Poly1305 and
    // `cryptography`'s HKDF, following the crate docs, nonce 00 01 .. 17). If
    // this stops decrypting, existing databases stop decrypting too.
    let v = Vault::new(
        &InstanceSecret::from_env_value("llooma-vault format test secret 0123456789").unwrap(),
    );
    assert_eq!(v.key_id(), KAT_KEY_ID);
    assert_eq!(v.decrypt(CTX, KAT_STORED).unwrap().expose(), "sk-known-answer");
}

const KAT_KEY_ID: &str = "f3efc488";
const KAT_STORED: &str =
    "v1.f3efc488.AAECAwQFBgcICQoLDA0ODxAREhMUFRYXMI0FvT1icVpKBnu9UtA-Wz39CSBdmpclID76gEEAQg";

#[test]
fn canary_detects_a_wrong_instance_secret() {
    let v = vault("a");
    let canary = v.make_canary().unwrap();
    v.check_canary(&canary).unwrap();
    vault("a").check_canary(&canary).unwrap();

    let err = vault("b").check_canary(&canary).unwrap_err();
    assert!(matches!(err, VaultError::KeyMismatch { .. }), "{err:?}");
    assert!(err.to_string().contains("the instance secret does not match the data"), "{err}");

    // Right key id, but not the canary: a real secret cannot pass as one.
    let other = v.encrypt(CTX, &Secret::new("llooma-vault canary v1")).unwrap();
    let err = v.check_canary(&other).unwrap_err();
    assert!(matches!(err, VaultError::CanaryMismatch), "{err:?}");

    let err = v.check_canary("not a canary").unwrap_err();
    assert!(matches!(err, VaultError::Malformed { .. }), "{err:?}");
}

#[test]
fn debug_never_shows_secret_values() {
    let secret = Secret::new("sk-very-secret-value");
    let instance =
        InstanceSecret::from_env_value("instance-secret-value-0123456789abcdef").unwrap();
    let v = Vault::new(&instance);
    for debug in [
        format!("{secret:?}"),
        format!("{secret:#?}"),
        format!("{:?}", Some(vec![secret.clone()])),
        format!("{instance:?}"),
        format!("{instance:#?}"),
        format!("{v:?}"),
    ] {
        assert!(!debug.contains("very-secret"), "{debug}");
        assert!(!debug.contains("instance-secret-value"), "{debug}");
    }
    assert_eq!(format!("{secret:?}"), "Secret([REDACTED])");
    assert_eq!(format!("{instance:?}"), "InstanceSecret([REDACTED])");
}

#[test]
fn secret_deserializes_but_never_serializes() {
    #[derive(serde::Deserialize)]
    struct Body {
        api_key: Secret,
    }
    let body: Body = serde_json::from_str(r#"{"api_key":"sk-from-request"}"#).unwrap();
    assert_eq!(body.api_key.expose(), "sk-from-request");

    // Autoref probe: the inherent method applies only when `T: Serialize`;
    // otherwise the call falls through to the trait method on `&Probe<T>`.
    struct Probe<T>(std::marker::PhantomData<T>);
    trait NotSerialize {
        fn is_serialize(&self) -> bool {
            false
        }
    }
    impl<T> NotSerialize for &Probe<T> {}
    impl<T: serde::Serialize> Probe<T> {
        fn is_serialize(&self) -> bool {
            true
        }
    }
    assert!(Probe::<String>(std::marker::PhantomData).is_serialize());
    assert!(!(&Probe::<Secret>(std::marker::PhantomData)).is_serialize());
}

#[cfg(unix)]
#[test]
fn secret_file_is_created_0600_and_read_back_equal() {
    use std::os::unix::fs::PermissionsExt as _;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("instance-secret");

    let (created, status) = load_or_create_secret_file(&path).unwrap();
    assert_eq!(status, SecretFileStatus::Created);
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "mode {mode:o}");

    let (loaded, status) = load_or_create_secret_file(&path).unwrap();
    assert_eq!(status, SecretFileStatus::Loaded { warning: None });

    let (a, b) = (Vault::new(&created), Vault::new(&loaded));
    assert_eq!(a.key_id(), b.key_id());
    let stored = a.encrypt(CTX, &Secret::new("sk")).unwrap();
    assert_eq!(b.decrypt(CTX, &stored).unwrap().expose(), "sk");

    // The file's text works unchanged as an environment value.
    let text = fs::read_to_string(&path).unwrap();
    let from_env = InstanceSecret::from_env_value(&text).unwrap();
    assert_eq!(Vault::new(&from_env).key_id(), a.key_id());
}

#[test]
fn rotation_moves_values_to_the_new_secret() {
    let old = vault("a");
    let new = vault("b");
    let stored = old.encrypt(CTX, &Secret::new("sk-rotate-me")).unwrap();

    let rotated = old.reencrypt(&new, CTX, &stored).unwrap();
    assert_eq!(Vault::key_id_of(&rotated).unwrap(), new.key_id());
    assert_eq!(new.decrypt(CTX, &rotated).unwrap().expose(), "sk-rotate-me");
    assert!(matches!(old.decrypt(CTX, &rotated), Err(VaultError::KeyMismatch { .. })));

    // Running the rotation again (e.g. after a crash) leaves done rows alone.
    assert_eq!(old.reencrypt(&new, CTX, &rotated).unwrap(), rotated);
    // ...but still verifies them.
    let moved =
        old.reencrypt(&new, SecretContext::new("provider_accounts", "api_key", "43"), &rotated);
    assert!(matches!(moved, Err(VaultError::AuthenticationFailed { .. })));
    // The context is kept: the rotated value does not decrypt elsewhere.
    assert!(new.decrypt(SecretContext::new("t", "c", "r"), &rotated).is_err());
}

#[cfg(unix)]
#[test]
fn rotated_secret_file_replaces_the_old_one() {
    use std::os::unix::fs::PermissionsExt as _;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("instance-secret");
    let (old_secret, _) = load_or_create_secret_file(&path).unwrap();
    let old = Vault::new(&old_secret);
    let stored = old.encrypt(CTX, &Secret::new("sk")).unwrap();

    let new_secret = InstanceSecret::generate().unwrap();
    let new = Vault::new(&new_secret);
    let rotated = old.reencrypt(&new, CTX, &stored).unwrap();
    write_secret_file(&path, &new_secret).unwrap();

    let (reloaded, status) = load_or_create_secret_file(&path).unwrap();
    assert_eq!(status, SecretFileStatus::Loaded { warning: None });
    let reloaded = Vault::new(&reloaded);
    assert_eq!(reloaded.key_id(), new.key_id());
    assert_eq!(reloaded.decrypt(CTX, &rotated).unwrap().expose(), "sk");
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "mode {mode:o}");
}
