//! Reading frames off a connection: [`read_with`] reads until a decoder
//! takes a whole frame off the front of the buffer, keeping whatever came
//! after it there for the next; [`expect`] is that for a frame that must
//! come (a hello, a welcome, an answer) within a time.

use std::future::Future;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::{Error, Limits, Protocol};

/// Why no frame was read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError<E> {
    /// What arrived is not a frame the protocol accepts.
    #[error(transparent)]
    Frame(E),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("connection closed before the {0}")]
    Closed(&'static str),
    #[error("no {0} within {1:?}")]
    Timeout(&'static str, Duration),
}

/// Reads from `rd` into `buf` until `decode` takes a frame off its front;
/// Ok(None) when the peer closes first. `counted` is told how many bytes
/// each read brought.
pub async fn read_with<R, T, E>(
    rd: &mut R,
    buf: &mut BytesMut,
    mut decode: impl FnMut(&mut BytesMut) -> Result<Option<T>, E>,
    mut counted: impl FnMut(usize),
) -> Result<Option<T>, ReadError<E>>
where
    R: AsyncRead + Unpin,
{
    loop {
        if let Some(frame) = decode(buf).map_err(ReadError::Frame)? {
            return Ok(Some(frame));
        }
        let n = rd.read_buf(buf).await?;
        if n == 0 {
            return Ok(None);
        }
        counted(n);
    }
}

/// A frame that must come within `limit`: the peer closing first or
/// taking longer is an error naming `what`.
pub async fn expect<T, E>(
    what: &'static str,
    limit: Duration,
    read: impl Future<Output = Result<Option<T>, ReadError<E>>>,
) -> Result<T, ReadError<E>> {
    match tokio::time::timeout(limit, read).await {
        Ok(Ok(Some(frame))) => Ok(frame),
        Ok(Ok(None)) => Err(ReadError::Closed(what)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ReadError::Timeout(what, limit)),
    }
}

impl Limits {
    /// The next frame's kind and payload ([`Limits::split_frame`]).
    pub async fn read_frame<R: AsyncRead + Unpin>(
        &self,
        rd: &mut R,
        buf: &mut BytesMut,
    ) -> Result<Option<(u8, Bytes)>, ReadError<Error>> {
        read_with(rd, buf, |b| self.split_frame(b), |_| {}).await
    }
}

impl Protocol {
    /// A connection's first frame, which must be this protocol's hello
    /// within `limit`: a peer whose first bytes cannot start one is refused
    /// as they arrive ([`Protocol::check_preamble`]). Returns the frame's
    /// kind and payload, for the protocol to decode.
    pub async fn read_hello<R: AsyncRead + Unpin>(
        &self,
        rd: &mut R,
        buf: &mut BytesMut,
        limit: Duration,
    ) -> Result<(u8, Bytes), ReadError<Error>> {
        let decode = |b: &mut BytesMut| {
            self.check_preamble(b)?;
            self.limits.split_frame(b)
        };
        expect("hello", limit, read_with(rd, buf, decode, |_| {})).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode_frame;
    use tokio::io::AsyncWriteExt;

    const P: Protocol = Protocol {
        name: "test",
        magic: *b"DGTS",
        version: 1,
        hello_kind: 1,
        hello_len: None,
        limits: Limits::frames_of(1 << 10),
    };

    #[tokio::test]
    async fn frames_are_read_as_they_trickle_in() {
        let (mut a, mut b) = tokio::io::duplex(64);
        let mut out = BytesMut::new();
        encode_frame(1, b"DGTS\x01\x00rest", &mut out);
        encode_frame(5, b"next", &mut out);
        let writer = tokio::spawn(async move {
            for byte in out {
                a.write_all(&[byte]).await.unwrap();
            }
        });
        let mut buf = BytesMut::new();
        let (kind, p) = P
            .read_hello(&mut b, &mut buf, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!((kind, &p[..]), (1, &b"DGTS\x01\x00rest"[..]));
        let mut total = 0;
        let next = read_with(
            &mut b,
            &mut buf,
            |b| P.limits.split_frame(b),
            |n| total += n,
        )
        .await
        .unwrap();
        assert_eq!(next, Some((5, bytes::Bytes::from_static(b"next"))));
        writer.await.unwrap();
        assert!(P
            .limits
            .read_frame(&mut b, &mut buf)
            .await
            .unwrap()
            .is_none());
    }

    #[tokio::test]
    async fn a_stranger_a_close_and_silence_are_errors() {
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(b"*1\r\n$4\r\nPING\r\n").await.unwrap();
        let mut buf = BytesMut::new();
        let err = P
            .read_hello(&mut b, &mut buf, Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ReadError::Frame(Error::BadMagic("test"))),
            "{err}"
        );

        let (a, mut b) = tokio::io::duplex(64);
        let limit = Duration::from_millis(20);
        let err = P.read_hello(&mut b, &mut BytesMut::new(), limit).await;
        assert_eq!(err.unwrap_err().to_string(), "no hello within 20ms");
        drop(a);
        let err = P.read_hello(&mut b, &mut BytesMut::new(), limit).await;
        assert_eq!(
            err.unwrap_err().to_string(),
            "connection closed before the hello"
        );
    }
}
