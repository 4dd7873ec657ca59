//! Where backups live: a directory (`file:///path`) or an S3-compatible
//! bucket (`s3://bucket/prefix`, with the `s3` feature; endpoint and
//! credentials from the usual `AWS_*` environment variables), through
//! object_store. Every error names the object it was about.

use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload};

use crate::Error;

#[derive(Clone)]
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    prefix: Path,
    url: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

impl Store {
    /// Opens the store a URL names; a directory is created if missing.
    pub fn open(url: &str) -> Result<Store, Error> {
        let parsed = url::Url::parse(url).map_err(|e| Error::Url(format!("{url}: {e}")))?;
        let (inner, prefix): (Arc<dyn ObjectStore>, Path) = match parsed.scheme() {
            "file" => {
                let dir = parsed
                    .to_file_path()
                    .map_err(|_| Error::Url(format!("{url}: not a local path")))?;
                std::fs::create_dir_all(&dir).map_err(|e| Error::Url(format!("{url}: {e}")))?;
                let fs = object_store::local::LocalFileSystem::new_with_prefix(&dir)
                    .map_err(|e| Error::Url(format!("{url}: {e}")))?;
                (Arc::new(fs), Path::default())
            }
            "s3" => open_s3(&parsed)?,
            other => {
                return Err(Error::Url(format!(
                    "{url}: unsupported scheme {other:?} (use file:// or s3://)"
                )))
            }
        };
        Ok(Store {
            inner,
            prefix,
            url: url.trim_end_matches('/').to_string(),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    fn path(&self, name: &str) -> Path {
        name.split('/')
            .fold(self.prefix.clone(), |p, part| p.child(part))
    }

    /// Where `name` is, for messages.
    pub fn describe(&self, name: &str) -> String {
        format!("{}/{name}", self.url)
    }

    pub async fn put(&self, name: &str, data: Bytes) -> Result<(), Error> {
        self.inner
            .put(&self.path(name), PutPayload::from_bytes(data))
            .await
            .map(|_| ())
            .map_err(|e| Error::Store {
                object: self.describe(name),
                reason: e.to_string(),
            })
    }

    /// The object's bytes; a missing object is [`Error::Missing`].
    pub async fn get(&self, name: &str) -> Result<Bytes, Error> {
        let got = match self.inner.get(&self.path(name)).await {
            Ok(r) => r.bytes().await,
            Err(e) => Err(e),
        };
        got.map_err(|e| match e {
            object_store::Error::NotFound { .. } => Error::Missing {
                object: self.describe(name),
            },
            e => Error::Store {
                object: self.describe(name),
                reason: e.to_string(),
            },
        })
    }

    /// Byte ranges of an object (nearby ranges are fetched together).
    pub async fn get_ranges(
        &self,
        name: &str,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<Vec<Bytes>, Error> {
        self.inner
            .get_ranges(&self.path(name), ranges)
            .await
            .map_err(|e| match e {
                object_store::Error::NotFound { .. } => Error::Missing {
                    object: self.describe(name),
                },
                e => Error::Store {
                    object: self.describe(name),
                    reason: e.to_string(),
                },
            })
    }

    /// Names of the top-level folders (one per backup id, whether or not
    /// its manifest was written).
    pub async fn folders(&self) -> Result<Vec<String>, Error> {
        let prefix = (!self.prefix.as_ref().is_empty()).then_some(&self.prefix);
        let listing = self
            .inner
            .list_with_delimiter(prefix)
            .await
            .map_err(|e| Error::Store {
                object: self.url.clone(),
                reason: e.to_string(),
            })?;
        Ok(listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect())
    }

    /// Removes every object under `folder` (a backup being deleted), its
    /// manifest first: from then on the backup does not exist.
    pub async fn remove_folder(&self, folder: &str) -> Result<(), Error> {
        let path = self.path(folder);
        let manifest = path.child("manifest.json");
        match self.inner.delete(&manifest).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => {
                return Err(Error::Store {
                    object: format!("{}/{manifest}", self.url),
                    reason: e.to_string(),
                })
            }
        }
        let names: Vec<Path> = self
            .inner
            .list(Some(&path))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(|e| Error::Store {
                object: self.describe(folder),
                reason: e.to_string(),
            })?;
        for name in names {
            self.inner.delete(&name).await.map_err(|e| Error::Store {
                object: format!("{}/{name}", self.url),
                reason: e.to_string(),
            })?;
        }
        Ok(())
    }
}

#[cfg(feature = "s3")]
fn open_s3(url: &url::Url) -> Result<(Arc<dyn ObjectStore>, Path), Error> {
    let bucket = url
        .host_str()
        .ok_or_else(|| Error::Url(format!("{url}: no bucket")))?;
    let s3 = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(bucket)
        .build()
        .map_err(|e| Error::Url(format!("{url}: {e}")))?;
    let prefix = Path::from(url.path().trim_matches('/'));
    Ok((Arc::new(s3), prefix))
}

#[cfg(not(feature = "s3"))]
fn open_s3(url: &url::Url) -> Result<(Arc<dyn ObjectStore>, Path), Error> {
    Err(Error::Url(format!(
        "{url}: this build has no S3 support (build with `--features s3`)"
    )))
}
