//! The TLS configuration every client gets: built once per process, cloned into each client.
//!
//! reqwest, left to itself, builds a rustls configuration for every `Client`, and with it a
//! `rustls_platform_verifier::Verifier`, which reads and decodes every certificate of the
//! system's store (~145 PEM files here): about 30% of a turn's CPU when each turn built its
//! provider's client. The configuration built here is the one reqwest would build (its
//! `TlsBackend::Rustls` path with default settings: the platform verifier, the installed or the
//! aws-lc-rs crypto provider, every protocol version rustls has, SNI on, no client certificate,
//! ALPN `http/1.1` since reqwest is built without HTTP/2); a clone shares the verifier (an
//! `Arc`), so the certificates are read once.

use std::sync::{Arc, OnceLock};

use rustls::ClientConfig;
use rustls::client::Resumption;
use rustls::crypto::CryptoProvider;

use crate::error::NetError;

/// The shared configuration, once built.
///
/// A process-wide static rather than something passed in: the trusted roots are a property of
/// the machine, not of any caller's settings, and reading them is the whole cost this saves.
/// (A verifier built later would see certificates added since; the server is restarted for
/// that, as for any change of its environment.)
static SHARED: OnceLock<ClientConfig> = OnceLock::new();

/// A copy of the shared configuration for one client.
///
/// A failure is not remembered: the next client tries again (a machine without certificates
/// yet, or out of file descriptors for a moment, should not need a restart). Two first callers
/// racing may both read the certificates; one result is kept.
pub(crate) fn client_config() -> Result<ClientConfig, NetError> {
    let shared = match SHARED.get() {
        Some(config) => config,
        None => {
            let built = build()?;
            SHARED.get_or_init(|| built)
        }
    };
    let mut config = shared.clone();
    // Each client keeps its own TLS session cache, as each had with reqwest's own
    // configuration: a session one client resumed is never offered by another.
    config.resumption = Resumption::default();
    Ok(config)
}

fn build() -> Result<ClientConfig, NetError> {
    // As reqwest does: a provider the process installed, else aws-lc-rs.
    let provider = CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let verifier = rustls_platform_verifier::Verifier::new(Arc::clone(&provider))
        .map_err(|err| NetError::Tls(err.to_string()))?;
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(rustls::ALL_VERSIONS)
        .map_err(|err| NetError::Tls(err.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    // reqwest sets ALPN itself only on configurations it builds; on a preconfigured one it
    // leaves them as given. What it would set with HTTP/1 only (its `http2` feature is off;
    // turning it on means offering "h2" first here too).
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    // That the certificates are read once per process, and that https works through this
    // configuration, is tested from outside in tests/it (`system_certificates_are_read_once_
    // per_process`, `https_is_verified_against_the_system_store_and_negotiates_http1`).

    #[test]
    fn configuration_is_the_one_reqwest_would_build() {
        let config = client_config().unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        assert!(config.enable_sni);
        assert!(!config.client_auth_cert_resolver.has_certs());
    }
}
