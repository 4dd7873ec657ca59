//! The envelope of the binary stored objects (index `DGBI`, resolved
//! `DGBR`): four magic bytes, a format version byte, then one zstd frame of
//! the body. Unwrapping bounds the decompressed size, so a forged frame
//! cannot make a huge allocation; checksums live in the manifest.

use std::io::Read;

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("bad magic (not a deltagrid backup {0})")]
    Magic(&'static str),
    #[error("format version {got} is not supported (this build reads {want})")]
    Version { got: u8, want: u8 },
    #[error("does not decompress: {0}")]
    Compression(String),
    #[error("decompresses past {0} bytes")]
    TooLarge(u64),
}

pub fn wrap(magic: &[u8; 4], version: u8, body: &[u8]) -> Vec<u8> {
    let mut out = magic.to_vec();
    out.push(version);
    out.extend_from_slice(&zstd::bulk::compress(body, 3).unwrap_or_default());
    out
}

/// The body of an object wrapped by [`wrap`]; `what` names the kind of
/// object in the bad-magic error.
pub fn unwrap(
    data: &[u8],
    magic: &[u8; 4],
    version: u8,
    max: u64,
    what: &'static str,
) -> Result<Vec<u8>, FrameError> {
    if data.len() < 5 || &data[..4] != magic {
        return Err(FrameError::Magic(what));
    }
    if data[4] != version {
        return Err(FrameError::Version {
            got: data[4],
            want: version,
        });
    }
    let decoder = zstd::stream::Decoder::new(&data[5..])
        .map_err(|e| FrameError::Compression(e.to_string()))?;
    let mut body = Vec::new();
    decoder
        .take(max + 1)
        .read_to_end(&mut body)
        .map_err(|e| FrameError::Compression(e.to_string()))?;
    if body.len() as u64 > max {
        return Err(FrameError::TooLarge(max));
    }
    Ok(body)
}
