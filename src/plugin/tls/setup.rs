//! The `tls` directive's Corefile syntax (see this folder's README), parsed into a [`TlsConfig`],
//! and its [`Configured`] impl: what the configured directive sets for its block.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};

use crate::chain::{BlockSettings, Configured, SetupCtx};
use crate::corefile::{CorefileError, Directive, Token};

/// Which client certificates a server asks for (`client_auth`). rustls verifies every
/// certificate it receives, so Go's "ask but do not verify" policies verify too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// `nocert` (the default): none asked for.
    #[default]
    NoCert,
    /// `request` and `verify_if_given`: asked for, verified when given.
    VerifyIfGiven,
    /// `require` and `require_and_verify`: required and verified.
    RequireAndVerify,
}

/// A block's `tls CERT KEY [CA] { client_auth ... }`.
#[derive(Clone)]
pub struct TlsConfig {
    /// The files, for messages and for telling two configurations apart.
    pub files: Vec<PathBuf>,
    /// The client certificate policy.
    pub client_auth: ClientAuth,
    /// The server configuration built from the files, with no ALPN protocols (the listener
    /// adds its own: `dot`, or `h2` and `http/1.1`).
    pub server: Arc<ServerConfig>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("files", &self.files)
            .field("client_auth", &self.client_auth)
            .finish_non_exhaustive()
    }
}

impl Configured for TlsConfig {
    fn configure(&self, settings: &mut BlockSettings) {
        settings.listener.tls = Some(self.server.clone());
    }
}

/// The `tls` directive's setup: `tls CERT KEY [CA] [{ client_auth POLICY }]`, once per block.
pub fn setup(d: &Directive, ctx: &SetupCtx<'_>) -> Result<Arc<dyn Configured>, CorefileError> {
    ctx.refuse_twice(d)?;
    let (cert, key, ca) = match d.args.as_slice() {
        [cert, key] => (cert, key, None),
        [cert, key, ca] => (cert, key, Some(ca)),
        _ => {
            return Err(
                d.error("expected CERT KEY [CA]: a certificate file, its key file and optionally a CA file")
            );
        }
    };
    let mut client_auth = ClientAuth::NoCert;
    for opt in &d.block {
        match opt.name.text.as_str() {
            "client_auth" => {
                let v = d.option_arg(opt)?;
                client_auth = match v.text.as_str() {
                    "nocert" => ClientAuth::NoCert,
                    "request" | "verify_if_given" => ClientAuth::VerifyIfGiven,
                    "require" | "require_and_verify" => ClientAuth::RequireAndVerify,
                    other => {
                        return Err(d.error_at(
                            v,
                            format!(
                                "client_auth: unknown policy '{other}' (nocert, request, require, verify_if_given or require_and_verify)"
                            ),
                        ));
                    }
                };
            }
            other => return Err(d.error_at(&opt.name, format!("unknown property '{other}'"))),
        }
    }
    let read = |t: &Token| -> Result<(PathBuf, Vec<u8>), CorefileError> {
        let path = resolve(ctx.dir, &t.text);
        let bytes = std::fs::read(&path)
            .map_err(|e| d.error_at(t, format!("cannot read {}: {e}", path.display())))?;
        Ok((path, bytes))
    };
    let (cert_path, cert_pem) = read(cert)?;
    let (key_path, key_pem) = read(key)?;
    let ca = ca.map(|t| read(t).map(|r| (t, r))).transpose()?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| d.error_at(cert, format!("{}: {e}", cert_path.display())))?;
    if chain.is_empty() {
        return Err(d.error_at(cert, format!("{} holds no PEM certificate", cert_path.display())));
    }
    let private_key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| d.error_at(key, format!("{}: {e}", key_path.display())))?;
    let builder = ServerConfig::builder();
    let builder = match client_auth {
        ClientAuth::NoCert => builder.with_no_client_auth(),
        policy => {
            let mut roots = RootCertStore::empty();
            match &ca {
                Some((t, (path, pem))) => {
                    for c in CertificateDer::pem_slice_iter(pem) {
                        let c = c.map_err(|e| d.error_at(t, format!("{}: {e}", path.display())))?;
                        roots
                            .add(c)
                            .map_err(|e| d.error_at(t, format!("{}: {e}", path.display())))?;
                    }
                }
                None => {
                    for c in rustls_native_certs::load_native_certs().certs {
                        let _ = roots.add(c);
                    }
                }
            }
            if roots.is_empty() {
                return Err(d.error("client_auth: no CA certificate to verify clients with"));
            }
            let verifier = WebPkiClientVerifier::builder(Arc::new(roots));
            let verifier = if policy == ClientAuth::VerifyIfGiven {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| d.error(format!("client_auth: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let server = builder
        .with_single_cert(chain, private_key)
        .map_err(|e| d.error(format!("the certificate and key do not go together: {e}")))?;
    let mut files = vec![cert_path, key_path];
    files.extend(ca.map(|(_, (p, _))| p));
    Ok(Arc::new(TlsConfig {
        files,
        client_auth,
        server: Arc::new(server),
    }))
}

fn resolve(dir: &Path, file: &str) -> PathBuf {
    if Path::new(file).is_absolute() {
        PathBuf::from(file)
    } else {
        dir.join(file)
    }
}
