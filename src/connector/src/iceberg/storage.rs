//! The Iceberg crate's file access ([`iceberg::io::Storage`]) over `object_store`, so an
//! Iceberg warehouse is reached the way Eddy reaches its own state: a local directory
//! (`file:///...`) or an S3-compatible bucket (`s3://bucket/prefix`, with the sink's
//! `s3.endpoint`, `s3.region`, `s3.access.key`, `s3.secret.key`).
//!
//! Paths are full URLs (`file:///abs/path/x.parquet`, `s3://bucket/key`), as Iceberg metadata
//! stores them; each is mapped to a key of the one store the warehouse lives in.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use bytes::Bytes;
use eddy_common::error::sqlstate;
use eddy_common::{user_err, EddyError, Result};
use eddy_storage::object_store::aws::AmazonS3Builder;
use eddy_storage::object_store::local::LocalFileSystem;
use eddy_storage::object_store::path::Path;
use eddy_storage::object_store::{self, ObjectStore, ObjectStoreExt, PutMode, PutPayload};
use futures::stream::BoxStream;
use futures::StreamExt;
use iceberg::io::{FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage, StorageConfig, StorageFactory};
use serde::{Deserialize, Serialize};

/// Where a warehouse lives: the store and the URL prefix its paths start with.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Warehouse {
    /// `file://` or `s3://bucket` (no trailing slash).
    root: String,
    /// The sink's `s3.*` options.
    s3: BTreeMap<String, String>,
    #[serde(skip)]
    store: Arc<OnceLock<Arc<dyn ObjectStore>>>,
}

impl Warehouse {
    /// The warehouse of `warehouse.path` (a `file://` or `s3://` URL, or an absolute local
    /// path) with the sink's S3 options; the normalized warehouse URL alongside.
    pub fn open(url: &str, s3: BTreeMap<String, String>) -> Result<(Self, String)> {
        let bad = |m: String| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "{m}");
        let (root, url) = if let Some(rest) = url.strip_prefix("s3://").or_else(|| url.strip_prefix("s3a://")) {
            let bucket = rest.split('/').next().unwrap_or_default();
            if bucket.is_empty() {
                return Err(bad(format!("warehouse.path '{url}' names no bucket")));
            }
            (format!("s3://{bucket}"), format!("s3://{}", rest.trim_end_matches('/')))
        } else {
            let local = url.strip_prefix("file://").unwrap_or(url);
            if !local.starts_with('/') {
                return Err(bad(format!("warehouse.path '{url}' must be an s3:// URL or an absolute file:// path")));
            }
            ("file://".to_string(), format!("file://{}", local.trim_end_matches('/')))
        };
        let w = Warehouse { root, s3, store: Arc::default() };
        w.store()?;
        Ok((w, url))
    }

    fn store(&self) -> Result<Arc<dyn ObjectStore>> {
        if let Some(s) = self.store.get() {
            return Ok(s.clone());
        }
        let store: Arc<dyn ObjectStore> = match self.root.strip_prefix("s3://") {
            Some(bucket) => {
                let get = |k: &str| self.s3.get(k).map(String::as_str);
                let mut b = AmazonS3Builder::from_env().with_bucket_name(bucket).with_region(get("s3.region").unwrap_or("us-east-1"));
                if let Some(endpoint) = get("s3.endpoint") {
                    b = b.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
                }
                if let (Some(k), Some(s)) = (get("s3.access.key"), get("s3.secret.key")) {
                    b = b.with_access_key_id(k).with_secret_access_key(s);
                }
                Arc::new(b.build().map_err(|e| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot use the iceberg warehouse {}: {e}", self.root))?)
            }
            None => Arc::new(LocalFileSystem::new().with_fsync(true)),
        };
        Ok(self.store.get_or_init(|| store).clone())
    }

    /// The store key of `url`.
    fn key(&self, url: &str) -> Result<Path> {
        let url = match url.strip_prefix("s3a://") {
            Some(rest) => format!("s3://{rest}"),
            None => url.to_string(),
        };
        let rest = url
            .strip_prefix(self.root.as_str())
            .ok_or_else(|| EddyError::external(format!("iceberg file {url} is outside the warehouse {}", self.root)))?;
        Path::parse(rest.trim_start_matches('/')).map_err(|e| EddyError::external(format!("bad iceberg file path {url}: {e}")))
    }

    /// Writes `bytes` to `url` only if nothing is there yet (`false`: something was).
    pub async fn create(&self, url: &str, bytes: Bytes) -> Result<bool> {
        let key = self.key(url)?;
        match self.store()?.put_opts(&key, PutPayload::from(bytes), PutMode::Create.into()).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(store_error(url, e)),
        }
    }

    /// Writes (or replaces) `url`.
    pub async fn put(&self, url: &str, bytes: Bytes) -> Result<()> {
        let key = self.key(url)?;
        self.store()?.put(&key, PutPayload::from(bytes)).await.map(|_| ()).map_err(|e| store_error(url, e))
    }

    /// The contents of `url` (`None`: there is no such file).
    pub async fn get(&self, url: &str) -> Result<Option<Bytes>> {
        let key = self.key(url)?;
        match self.store()?.get(&key).await {
            Ok(r) => Ok(Some(r.bytes().await.map_err(|e| store_error(url, e))?)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(store_error(url, e)),
        }
    }

    /// The iceberg crate's view of this warehouse.
    pub fn file_io(&self) -> iceberg::io::FileIO {
        iceberg::io::FileIOBuilder::new(Arc::new(self.clone())).build()
    }
}

fn store_error(url: &str, e: object_store::Error) -> EddyError {
    EddyError::external(format!("iceberg storage error at {url}: {e}"))
}

fn ice(e: EddyError) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.message)
}

fn ice_store(url: &str, e: object_store::Error) -> iceberg::Error {
    ice(store_error(url, e))
}

#[typetag::serde]
impl StorageFactory for Warehouse {
    fn build(&self, _config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(self.clone()))
    }
}

#[async_trait]
#[typetag::serde]
impl Storage for Warehouse {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        match self.store().map_err(ice)?.head(&self.key(path).map_err(ice)?).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(ice_store(path, e)),
        }
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        let meta = self.store().map_err(ice)?.head(&self.key(path).map_err(ice)?).await.map_err(|e| ice_store(path, e))?;
        Ok(FileMetadata { size: meta.size })
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        self.get(path).await.map_err(ice)?.ok_or_else(|| iceberg::Error::new(iceberg::ErrorKind::Unexpected, format!("iceberg file {path} does not exist")))
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        Ok(Box::new(Reader { store: self.store().map_err(ice)?, key: self.key(path).map_err(ice)?, url: path.to_string() }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        self.put(path, bs).await.map_err(ice)
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        Ok(Box::new(Writer { warehouse: self.clone(), url: path.to_string(), buf: Vec::new() }))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        match self.store().map_err(ice)?.delete(&self.key(path).map_err(ice)?).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(ice_store(path, e)),
        }
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        let store = self.store().map_err(ice)?;
        let prefix = self.key(path).map_err(ice)?;
        let mut listed = store.list(Some(&prefix));
        while let Some(meta) = listed.next().await {
            let meta = meta.map_err(|e| ice_store(path, e))?;
            store.delete(&meta.location).await.map_err(|e| ice_store(path, e))?;
        }
        Ok(())
    }

    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        while let Some(p) = paths.next().await {
            Storage::delete(self, &p).await?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

/// Ranged reads of one file.
struct Reader {
    store: Arc<dyn ObjectStore>,
    key: Path,
    url: String,
}

#[async_trait]
impl FileRead for Reader {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        self.store.get_range(&self.key, range).await.map_err(|e| ice_store(&self.url, e))
    }
}

/// A file written in one put when closed (data files are rolled at a bounded size, so the
/// buffer is bounded too).
struct Writer {
    warehouse: Warehouse,
    url: String,
    buf: Vec<u8>,
}

#[async_trait]
impl FileWrite for Writer {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        self.buf.extend_from_slice(&bs);
        Ok(())
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        let bytes = Bytes::from(std::mem::take(&mut self.buf));
        self.warehouse.put(&self.url, bytes).await.map_err(ice)
    }
}
