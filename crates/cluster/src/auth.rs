//! `site.secret` on `cluster_listen`: proof of the shared secret between
//! two ends of a connection, without the secret crossing it. Each side
//! contributes a fresh nonce and answers with HMAC-SHA256 over both, under
//! a label naming its role, so no proof can be replayed on another
//! connection or reflected back to its sender.
//!
//! [`accept`] and [`initiate`] run this on a node-to-node connection
//! (`site.secret`) before anything else is said, with the proofs of
//! [`framing::proof`]; the WAN uses the same proofs in its hello/welcome
//! (`wan::auth`). Only the peers are authenticated, not the frames after
//! the handshake.

use std::time::Duration;

use framing::proof::{nonce, proof, verify, Nonce, NONCE_LEN, PROOF_LEN};
use framing::tls::{PeerStream, PeerTls};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

/// What an accepting node sends first: this magic and its nonce.
const CHALLENGE_MAGIC: &[u8; 4] = b"DGAU";
/// How long each side waits for the other's part.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);

/// What an acceptor sends in place of its proof when the initiator's
/// proof is wrong, so the initiator can tell a refusal (final: the secrets
/// differ) from a connection that broke off (worth another attempt).
const REFUSAL: [u8; PROOF_LEN] = *b"DGNO: proof of site.secret wrong";

/// How every error meaning "the secrets differ" starts; any other handshake
/// error (reset, timeout) is the network's and worth retrying.
pub const REFUSED: &str = "authentication failed";
/// How a handshake error that is the network's (reset, timeout) starts.
const BROKE_OFF: &str = "site.secret handshake broke off";

const ACCEPTOR: &[u8] = b"deltagrid site acceptor";
const INITIATOR: &[u8] = b"deltagrid site initiator";

/// A random u64 from the operating system's random source (incarnations).
pub fn random_u64() -> u64 {
    u64::from_le_bytes(nonce()[..8].try_into().expect("8 bytes"))
}

async fn step<T>(
    what: &str,
    f: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, String> {
    match tokio::time::timeout(STEP_TIMEOUT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{BROKE_OFF}: {what}: {e}")),
        Err(_) => Err(format!("{BROKE_OFF}: no {what} within {STEP_TIMEOUT:?}")),
    }
}

/// The accepting side: challenges, checks the answer, proves itself.
/// Nothing happens without a secret.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    secret: Option<&[u8]>,
) -> Result<(), String> {
    let Some(secret) = secret else { return Ok(()) };
    let mine = nonce();
    let mut challenge = [0u8; 4 + NONCE_LEN];
    challenge[..4].copy_from_slice(CHALLENGE_MAGIC);
    challenge[4..].copy_from_slice(&mine);
    step("sending the challenge", stream.write_all(&challenge)).await?;
    let mut answer = [0u8; NONCE_LEN + PROOF_LEN];
    step("answer to the challenge", stream.read_exact(&mut answer)).await?;
    let theirs: Nonce = answer[..NONCE_LEN].try_into().expect("fixed size");
    if !verify(secret, INITIATOR, &mine, &theirs, &answer[NONCE_LEN..]) {
        let _ = tokio::time::timeout(STEP_TIMEOUT, stream.write_all(&REFUSAL)).await;
        return Err(format!(
            "{REFUSED}: the peer's proof does not match site.secret"
        ));
    }
    step(
        "sending our proof",
        stream.write_all(&proof(secret, ACCEPTOR, &theirs, &mine)),
    )
    .await?;
    Ok(())
}

/// The connecting side: answers the challenge, checks the acceptor's proof.
/// Nothing happens without a secret.
pub async fn initiate<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    secret: Option<&[u8]>,
) -> Result<(), String> {
    let Some(secret) = secret else { return Ok(()) };
    let mut challenge = [0u8; 4 + NONCE_LEN];
    match tokio::time::timeout(STEP_TIMEOUT, stream.read_exact(&mut challenge)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(format!("{BROKE_OFF}: challenge: {e}")),
        // An acceptor without a secret waits for us to speak first.
        Err(_) => {
            return Err(format!(
                "{REFUSED}: no challenge within {STEP_TIMEOUT:?} (has the peer no site.secret?)"
            ))
        }
    }
    if &challenge[..4] != CHALLENGE_MAGIC {
        return Err(format!(
            "{REFUSED}: the peer did not ask for site.secret (has it none?)"
        ));
    }
    let theirs: Nonce = challenge[4..].try_into().expect("fixed size");
    let mine = nonce();
    let mut answer = [0u8; NONCE_LEN + PROOF_LEN];
    answer[..NONCE_LEN].copy_from_slice(&mine);
    answer[NONCE_LEN..].copy_from_slice(&proof(secret, INITIATOR, &theirs, &mine));
    step("sending the answer", stream.write_all(&answer)).await?;
    let mut got = [0u8; PROOF_LEN];
    step("the peer's proof", stream.read_exact(&mut got)).await?;
    if got == REFUSAL {
        return Err(format!(
            "{REFUSED}: the peer refused our proof: site.secret differs"
        ));
    }
    if !verify(secret, ACCEPTOR, &mine, &theirs, &got) {
        return Err(format!(
            "{REFUSED}: the peer's proof does not match site.secret"
        ));
    }
    Ok(())
}

/// `[site] tls`: the nodes' mutual TLS, each node's certificate (from the
/// site's CA) naming the site.
#[derive(Clone, Debug)]
pub struct SiteTls {
    pub tls: PeerTls,
    /// The site's name: what every node's certificate names.
    pub site: String,
}

/// A TLS handshake within [`STEP_TIMEOUT`]; a failure is a refusal (the
/// certificates do not fit), a timeout a connection that broke off.
async fn tls_handshake<T>(
    handshake: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, String> {
    tokio::time::timeout(STEP_TIMEOUT, handshake)
        .await
        .map_err(|_| format!("{BROKE_OFF}: no TLS handshake within {STEP_TIMEOUT:?}"))?
        .map_err(|e| format!("{REFUSED}: TLS handshake failed: {e}"))
}

/// The accepting end of a node-to-node connection: TLS first when the
/// site has it (the peer's certificate must be from the site's CA and
/// name the site), then the proof of `site.secret` when there is one.
pub async fn secure_accept(
    stream: TcpStream,
    secret: Option<&[u8]>,
    tls: Option<&SiteTls>,
) -> Result<PeerStream, String> {
    let mut stream = match tls {
        None => PeerStream::Plain(stream),
        Some(t) => {
            let s = tls_handshake(t.tls.accept(stream)).await?;
            if !framing::tls::peer_is(&s, &t.site) {
                return Err(format!(
                    "{REFUSED}: the peer's TLS certificate does not name site {:?}",
                    t.site
                ));
            }
            PeerStream::Server(Box::new(s))
        }
    };
    accept(&mut stream, secret).await?;
    Ok(stream)
}

/// The connecting end: TLS first when the site has it (the acceptor's
/// certificate must name the site), then the proof of `site.secret`.
pub async fn secure_initiate(
    stream: TcpStream,
    secret: Option<&[u8]>,
    tls: Option<&SiteTls>,
) -> Result<PeerStream, String> {
    let mut stream = match tls {
        None => PeerStream::Plain(stream),
        Some(t) => {
            let s = tls_handshake(t.tls.connect(stream, &t.site)).await?;
            PeerStream::Client(Box::new(s))
        }
    };
    initiate(&mut stream, secret).await?;
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// Both ends of a real loopback connection: (accepted, connecting).
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let c = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        (listener.accept().await.unwrap().0, c)
    }

    /// Runs both sides over a real loopback connection.
    async fn handshake(
        acceptor: Option<&'static [u8]>,
        initiator: Option<&'static [u8]>,
    ) -> (Result<(), String>, Result<(), String>) {
        let (mut s, mut c) = pair().await;
        let server = tokio::spawn(async move {
            let r = accept(&mut s, acceptor).await;
            // Closing tells a waiting initiator it was refused.
            drop(s);
            r
        });
        let client = initiate(&mut c, initiator).await;
        drop(c);
        (server.await.unwrap(), client)
    }

    #[tokio::test]
    async fn both_sides_must_hold_the_same_secret() {
        assert_eq!(
            handshake(Some(b"s3cret"), Some(b"s3cret")).await,
            (Ok(()), Ok(()))
        );
        assert_eq!(handshake(None, None).await, (Ok(()), Ok(())));
        let (a, i) = handshake(Some(b"s3cret"), Some(b"guess")).await;
        assert!(a.unwrap_err().contains("does not match site.secret"));
        let i = i.unwrap_err();
        assert!(
            i.starts_with(REFUSED) && i.contains("refused our proof"),
            "{i}"
        );
        // An acceptor with a secret lets nothing through from a peer that
        // does not answer its challenge.
        let (a, _) = handshake(Some(b"s3cret"), None).await;
        assert!(a
            .unwrap_err()
            .contains("handshake broke off: answer to the challenge"));
    }

    #[tokio::test]
    async fn a_peer_without_the_secret_gets_no_further_than_the_challenge() {
        let (mut s, mut c) = pair().await;
        let server = tokio::spawn(async move { accept(&mut s, Some(b"s3cret")).await });
        let mut challenge = [0u8; 20];
        c.read_exact(&mut challenge).await.unwrap();
        assert_eq!(&challenge[..4], b"DGAU");
        c.write_all(&[0x42; 48]).await.unwrap();
        let err = server.await.unwrap().unwrap_err();
        assert!(err.contains("does not match site.secret"), "{err}");
        // Nothing more than the refusal is sent: the connection is closed.
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).await.unwrap();
        assert_eq!(rest, REFUSAL);
    }

    #[tokio::test]
    async fn a_handshake_that_breaks_off_is_not_a_refusal() {
        let (mut s, mut c) = pair().await;
        let server = tokio::spawn(async move {
            // Challenges, then goes away without judging the answer.
            let mut challenge = [0u8; 20];
            challenge[..4].copy_from_slice(CHALLENGE_MAGIC);
            s.write_all(&challenge).await.unwrap();
            let mut answer = [0u8; NONCE_LEN + PROOF_LEN];
            s.read_exact(&mut answer).await.unwrap();
        });
        let err = initiate(&mut c, Some(b"s3cret")).await.unwrap_err();
        server.await.unwrap();
        assert!(!err.starts_with(REFUSED), "{err}");
        assert!(err.contains("broke off"), "{err}");
    }
}
