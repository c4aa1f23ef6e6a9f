//! TLS for the fake API server, so tests meet the API connection as a cluster serves it: a
//! throwaway CA and the certificates it signs, made in memory with rcgen ([`TestPki`]), and the
//! server side ([`ServerTls`]: the server's certificate, optionally a CA whose client
//! certificates it requires).

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};

/// A certificate and its private key, in PEM (for files a client reads) and DER.
#[derive(Clone)]
pub struct Identity {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// Its PKCS#8 private key, PEM.
    pub key_pem: String,
    cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity").finish_non_exhaustive()
    }
}

/// A test certificate authority.
pub struct TestPki {
    /// The CA certificate, PEM (what a client trusts).
    pub ca_pem: String,
    ca_der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for TestPki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestPki").finish_non_exhaustive()
    }
}

impl TestPki {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Self {
            ca_pem: cert.pem(),
            ca_der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        })
    }

    fn issue(&self, mut params: CertificateParams, common_name: &str) -> Result<Identity, rcgen::Error> {
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Identity {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            cert_der: cert.der().clone(),
            key_der: key.serialize_der(),
        })
    }

    /// A server certificate for `names` (IP addresses or DNS names), valid now.
    pub fn server(&self, names: &[&str]) -> Result<Identity, rcgen::Error> {
        self.server_params(names, false)
    }

    /// A server certificate for `names` that expired yesterday.
    pub fn expired_server(&self, names: &[&str]) -> Result<Identity, rcgen::Error> {
        self.server_params(names, true)
    }

    fn server_params(&self, names: &[&str], expired: bool) -> Result<Identity, rcgen::Error> {
        let mut params = CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        if expired {
            let now = std::time::SystemTime::now();
            let day = std::time::Duration::from_secs(86_400);
            params.not_before = (now - 30 * day).into();
            params.not_after = (now - day).into();
        }
        self.issue(params, names.first().copied().unwrap_or("fake-apiserver"))
    }

    /// A client certificate for the user `user` (its common name, as Kubernetes reads it).
    pub fn client(&self, user: &str) -> Result<Identity, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::new())?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.issue(params, user)
    }
}

/// How the fake serves TLS.
#[derive(Debug, Clone)]
pub struct ServerTls {
    identity: Identity,
    client_ca: Option<CertificateDer<'static>>,
}

impl ServerTls {
    /// Serves `identity` and asks for no client certificate.
    pub fn new(identity: Identity) -> Self {
        Self {
            identity,
            client_ca: None,
        }
    }

    /// Requires a client certificate signed by `pki` (the handshake fails without one).
    pub fn require_client_certs(mut self, pki: &TestPki) -> Self {
        self.client_ca = Some(pki.ca_der.clone());
        self
    }

    /// The rustls configuration (ring, as kube's client uses: one provider in the process).
    pub(crate) fn server_config(&self) -> Result<Arc<ServerConfig>, rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder =
            ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
        let builder = match &self.client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                roots.add(ca.clone())?;
                let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|e| rustls::Error::General(e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.identity.key_der.clone()));
        let mut config = builder.with_single_cert(vec![self.identity.cert_der.clone()], key)?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}
