//! Mutual TLS for the peer links (WAN between sites; node to node): both
//! ends show a certificate from the configured CA (rustls, TLS 1.2/1.3,
//! PEM files), and a certificate says *who* its holder is by the DNS
//! names it is valid for: a site's certificate names the site (`london`).
//! The connecting end checks that the other end's certificate names the
//! peer it meant to reach; the accepting end checks, once the peer said
//! who it is (its hello), that its certificate names that ([`peer_is`]).
//! rustls refuses expired certificates, other CAs and broken records (a
//! flipped byte ends the connection): the error says which.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The files of one link's TLS (`tls_cert_file`, `tls_key_file`,
/// `tls_ca_cert_file` of its section).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    pub ca_cert_file: PathBuf,
}

/// Both ends of a peer link's TLS, loaded.
#[derive(Clone)]
pub struct PeerTls {
    connector: TlsConnector,
    acceptor: TlsAcceptor,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerTls")
    }
}

/// Reading half of a peer link, plain or TLS.
pub type Reader = Box<dyn AsyncRead + Send + Unpin>;
/// Writing half of a peer link, plain or TLS.
pub type Writer = Box<dyn AsyncWrite + Send + Unpin>;

/// Splits a stream into boxed halves (one type for plain and TLS links).
pub fn split<S: AsyncRead + AsyncWrite + Send + 'static>(s: S) -> (Reader, Writer) {
    let (r, w) = tokio::io::split(s);
    (Box::new(r), Box::new(w))
}

fn certs(path: &Path, key: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect())
        .map_err(|e| format!("{key} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{key} {}: no certificate in it", path.display()));
    }
    Ok(certs)
}

impl PeerTls {
    /// Loads the files; `section` names them in errors (`wan`, `site`).
    pub fn load(files: &TlsFiles, section: &str) -> Result<PeerTls, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key_name = |k: &str| format!("{section}.{k}");
        let chain = certs(&files.cert_file, &key_name("tls_cert_file"))?;
        let key = PrivateKeyDer::from_pem_file(&files.key_file).map_err(|e| {
            format!(
                "{} {}: {e}",
                key_name("tls_key_file"),
                files.key_file.display()
            )
        })?;
        let mut roots = RootCertStore::empty();
        for ca in certs(&files.ca_cert_file, &key_name("tls_ca_cert_file"))? {
            roots.add(ca).map_err(|e| {
                format!(
                    "{} {}: {e}",
                    key_name("tls_ca_cert_file"),
                    files.ca_cert_file.display()
                )
            })?;
        }
        let roots = Arc::new(roots);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| format!("{}: {e}", key_name("tls_ca_cert_file")))?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| {
                format!(
                    "{} {}: {e}",
                    key_name("tls_key_file"),
                    files.key_file.display()
                )
            })?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| {
                format!(
                    "{} {}: {e}",
                    key_name("tls_key_file"),
                    files.key_file.display()
                )
            })?;
        Ok(PeerTls {
            connector: TlsConnector::from(Arc::new(client)),
            acceptor: TlsAcceptor::from(Arc::new(server)),
        })
    }

    /// TLS over `stream` to a peer whose certificate must name `peer`
    /// (e.g. the site name), showing ours.
    pub async fn connect(
        &self,
        stream: TcpStream,
        peer: &str,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let name = ServerName::try_from(peer.to_string()).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{peer:?} cannot be a certificate's DNS name"),
            )
        })?;
        self.connector.connect(name, stream).await
    }

    /// TLS over `stream` from a peer that must show a certificate from our
    /// CA; who it is, [`peer_is`] tells once it said.
    pub async fn accept(
        &self,
        stream: TcpStream,
    ) -> std::io::Result<tokio_rustls::server::TlsStream<TcpStream>> {
        self.acceptor.accept(stream).await
    }
}

/// Whether the certificate the accepted peer showed names `who` (one of
/// the DNS names it is valid for).
pub fn peer_is(stream: &tokio_rustls::server::TlsStream<TcpStream>, who: &str) -> bool {
    let (_, conn) = stream.get_ref();
    let Some(cert) = conn.peer_certificates().and_then(|c| c.first()) else {
        return false;
    };
    let Ok(name) = ServerName::try_from(who.to_string()) else {
        return false;
    };
    webpki::EndEntityCert::try_from(cert)
        .is_ok_and(|ee| ee.verify_is_valid_for_subject_name(&name).is_ok())
}

/// A peer link's stream: plain TCP, or TLS from either end.
pub enum PeerStream {
    Plain(TcpStream),
    Client(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    Server(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl PeerStream {
    /// Whether the link is TLS.
    pub fn is_tls(&self) -> bool {
        !matches!(self, PeerStream::Plain(_))
    }
}

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            PeerStream::Plain($s) => {
                let $s = std::pin::Pin::new($s);
                $e
            }
            PeerStream::Client($s) => {
                let $s = std::pin::Pin::new(&mut **$s);
                $e
            }
            PeerStream::Server($s) => {
                let $s = std::pin::Pin::new(&mut **$s);
                $e
            }
        }
    };
}

impl AsyncRead for PeerStream {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        each!(self, s => s.poll_read(cx, buf))
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        each!(self, s => s.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        each!(self, s => s.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            PeerStream::Plain(s) => s.is_write_vectored(),
            PeerStream::Client(s) => s.is_write_vectored(),
            PeerStream::Server(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        each!(self, s => s.poll_flush(cx))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        each!(self, s => s.poll_shutdown(cx))
    }
}
