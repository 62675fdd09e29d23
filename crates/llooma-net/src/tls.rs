//! The TLS configuration every client gets: built once per process, cloned into each client.
//!
//! Building a rustls configuration with the platform verifier reads and decodes every
//! certificate of the system's store; done for every client, that was most of what building a
//! provider's client cost, and a turn built one. The configuration built here verifies as a
//! default reqwest client would (the platform verifier, the installed or the aws-lc-rs crypto
//! provider, every protocol version rustls has, SNI on, no client certificate, ALPN
//! `http/1.1`: our connections speak HTTP/1); a clone shares the verifier (an `Arc`), so the
//! certificates are read once.

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
    // Each client keeps its own TLS session cache: a session one client resumed is never
    // offered by another (a client per purpose, so a page read cannot resume a provider's).
    config.resumption = Resumption::default();
    Ok(config)
}

fn build() -> Result<ClientConfig, NetError> {
    // A provider the process installed, else aws-lc-rs.
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
    // Our connections speak HTTP/1 only (hyper's `http1` client): offering "h2" would let a
    // server choose a protocol we do not speak.
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
    fn configuration_offers_http1_with_sni_and_no_client_certificate() {
        let config = client_config().unwrap();
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
        assert!(config.enable_sni);
        assert!(!config.client_auth_cert_resolver.has_certs());
    }
}
