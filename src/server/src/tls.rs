//! TLS on the PostgreSQL port: `--tls-cert` and `--tls-key` (PEM) give pgwire a rustls
//! acceptor, so a client's SSLRequest is accepted and `sslmode=require` works; without them the
//! server answers `N` and clients that require TLS refuse to connect. Uses the `ring` provider
//! pgwire is built with; no other TLS stack is linked.

use std::path::Path;
use std::sync::Arc;

use eddy_common::error::sqlstate;
use eddy_common::{user_err, Result};
use pgwire::tokio::tokio_rustls::rustls::pki_types::pem::PemObject;
use pgwire::tokio::tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use pgwire::tokio::tokio_rustls::rustls::{self, ServerConfig as TlsConfig};
use pgwire::tokio::TlsAcceptor;

use crate::config::ServerConfig;

/// The TLS acceptor `config` asks for, if any. Both files or neither must be given; files that
/// cannot be read or hold no usable certificate or key are an error at startup.
pub fn acceptor(config: &ServerConfig) -> Result<Option<TlsAcceptor>> {
    let (cert, key) = match (&config.tls_cert, &config.tls_key) {
        (None, None) => return Ok(None),
        (Some(c), Some(k)) => (c, k),
        _ => return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "--tls-cert and --tls-key must be given together")),
    };
    let certs = read_certs(cert)?;
    let key = read_key(key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = TlsConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "invalid TLS certificate or key: {e}"))?;
    // Direct TLS (PostgreSQL 17's sslnegotiation=direct) is recognised by this ALPN protocol.
    tls.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(Some(TlsAcceptor::from(Arc::new(tls))))
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot read TLS {what} {}: {e}", path.display()))
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let pem = read(path, "certificate")?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "invalid PEM certificate in {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "no certificate in {}", path.display()));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    let pem = read(path, "key")?;
    PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "no usable private key in {}: {e}", path.display()))
}
