//! TLS on the client port, Redis's `tls-port` model: a second listener
//! (`tls_listen`) beside or instead of the plain one, rustls (no OpenSSL),
//! TLS 1.2 and 1.3 only, the certificate chain and key from PEM files, and
//! client certificates checked against a CA as `tls_auth_clients` says
//! (`yes`, Redis's default: required; `optional`: checked when given;
//! `no`: not asked for). [`Tls::reload`] reads the files again (SIGHUP):
//! new connections get the new configuration, open ones keep theirs.
//!
//! [`TlsClient`] is what a connection reads and writes once the handshake
//! is done; see [`crate::connection::ClientStream`].

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use arc_swap::ArcSwap;
use bytes::BytesMut;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// Whether clients must show a certificate (Redis's `tls-auth-clients`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthClients {
    No,
    Optional,
    Yes,
}

impl AuthClients {
    pub fn parse(s: &str) -> Option<AuthClients> {
        match s.to_ascii_lowercase().as_str() {
            "no" => Some(AuthClients::No),
            "optional" => Some(AuthClients::Optional),
            "yes" => Some(AuthClients::Yes),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            AuthClients::No => "no",
            AuthClients::Optional => "optional",
            AuthClients::Yes => "yes",
        }
    }
}

/// `[node] tls_*`: where the TLS port listens and its files.
#[derive(Clone, Debug)]
pub struct TlsSettings {
    pub listen: std::net::SocketAddr,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    /// CA certificates client certificates are checked against.
    pub ca_cert_file: Option<PathBuf>,
    pub auth_clients: AuthClients,
}

/// The TLS port's configuration, swapped whole on reload.
pub struct Tls {
    settings: parking_lot::Mutex<TlsSettings>,
    acceptor: ArcSwap<TlsAcceptor>,
}

impl Tls {
    /// Reads the files; an error names the file and what is wrong with it.
    pub fn new(settings: TlsSettings) -> Result<Tls, String> {
        let acceptor = ArcSwap::from_pointee(acceptor(&settings)?);
        Ok(Tls {
            settings: parking_lot::Mutex::new(settings),
            acceptor,
        })
    }

    /// The settings in use.
    pub fn settings(&self) -> TlsSettings {
        self.settings.lock().clone()
    }

    /// Reads the files again; on an error the configuration in use stays.
    pub fn reload(&self) -> Result<(), String> {
        self.reconfigure(|_| {})
    }

    /// Changes the settings (CONFIG SET tls-*) and reads the files they
    /// name; on an error nothing changes.
    pub fn reconfigure(&self, change: impl FnOnce(&mut TlsSettings)) -> Result<(), String> {
        let mut settings = self.settings.lock();
        let mut next = settings.clone();
        change(&mut next);
        self.acceptor.store(Arc::new(acceptor(&next)?));
        *settings = next;
        Ok(())
    }

    /// What new connections' handshakes use.
    pub fn acceptor(&self) -> Arc<TlsAcceptor> {
        self.acceptor.load_full()
    }
}

fn acceptor(s: &TlsSettings) -> Result<TlsAcceptor, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&s.cert_file)
        .and_then(|i| i.collect())
        .map_err(|e| format!("tls_cert_file {}: {e}", s.cert_file.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "tls_cert_file {}: no certificate in it",
            s.cert_file.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&s.key_file)
        .map_err(|e| format!("tls_key_file {}: {e}", s.key_file.display()))?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match (s.auth_clients, &s.ca_cert_file) {
        (AuthClients::No, _) => builder.with_no_client_auth(),
        (auth, None) => return Err(no_ca(auth)),
        (auth, Some(ca)) => {
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_file_iter(ca)
                .map_err(|e| format!("tls_ca_cert_file {}: {e}", ca.display()))?
            {
                let cert = cert.map_err(|e| format!("tls_ca_cert_file {}: {e}", ca.display()))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("tls_ca_cert_file {}: {e}", ca.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let verifier = match auth {
                AuthClients::Optional => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("tls_ca_cert_file {}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("tls_key_file {}: {e}", s.key_file.display()))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn no_ca(auth: AuthClients) -> String {
    format!(
        "tls_auth_clients = \"{}\" needs tls_ca_cert_file to check client certificates against",
        auth.name()
    )
}

/// A client connection over TLS, read as the plain one is: wait until the
/// socket is readable, then take what is there without blocking.
pub struct TlsClient {
    stream: TlsStream<TcpStream>,
    /// rustls may hold plaintext the socket no longer signals (the last
    /// read filled the buffer, or the handshake just ended): the next wait
    /// returns at once.
    more: bool,
}

impl TlsClient {
    pub fn new(stream: TlsStream<TcpStream>) -> TlsClient {
        // The handshake may have read the first requests with its last
        // flight: they wait in rustls, not in the socket.
        TlsClient { stream, more: true }
    }

    pub fn socket(&self) -> &TcpStream {
        self.stream.get_ref().0
    }

    pub async fn readable(&self) -> io::Result<()> {
        if self.more {
            return Ok(());
        }
        self.socket().readable().await
    }

    /// Decrypts what has arrived into `buf` (0: the peer closed);
    /// `WouldBlock` when no whole record is in yet. One read of the socket
    /// at most, as on a plain connection: rustls decrypts every whole
    /// record that read brought, and hands over all of it unless `buf`
    /// fills (then the next wait returns at once). A socket with more
    /// bytes still is readable again for the next wait.
    pub fn try_read_buf(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        let mut cx = Context::from_waker(Waker::noop());
        self.more = false;
        READ_BUF.with(|b| {
            let mut b = b.borrow_mut();
            let room = (buf.capacity() - buf.len()).clamp(1, b.len());
            let mut rb = ReadBuf::new(&mut b[..room]);
            match Pin::new(&mut self.stream).poll_read(&mut cx, &mut rb) {
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    buf.extend_from_slice(rb.filled());
                    self.more = n == room;
                    Ok(n)
                }
                Poll::Ready(Err(e)) => Err(e),
                Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
            }
        })
    }
}

thread_local! {
    /// Where TLS reads decrypt to before the bytes join the connection's
    /// buffer: initialized once per thread, not per read.
    static READ_BUF: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0; 16 * 1024].into_boxed_slice());
}

impl AsyncWrite for TlsClient {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
