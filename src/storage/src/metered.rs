//! [`MeteredStore`]: the object store every [`crate::StateStore`] runs on, wrapped to count
//! requests, bytes and errors per kind of request for metrics. Counting is a few relaxed
//! atomic adds per request; the wrapped store does all the work.

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload,
    PutResult, RenameOptions, UploadPart,
};

/// Kinds of object-store request, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    Get,
    Put,
    Delete,
    List,
}

impl RequestKind {
    pub const ALL: [RequestKind; 4] = [RequestKind::Get, RequestKind::Put, RequestKind::Delete, RequestKind::List];

    pub fn name(self) -> &'static str {
        match self {
            RequestKind::Get => "get",
            RequestKind::Put => "put",
            RequestKind::Delete => "delete",
            RequestKind::List => "list",
        }
    }
}

/// Counters of one store.
#[derive(Debug, Default)]
pub struct ObjectStoreStats {
    requests: [AtomicU64; 4],
    errors: [AtomicU64; 4],
    /// Bytes received by GETs.
    pub bytes_read: AtomicU64,
    /// Bytes sent by PUTs (multipart parts included).
    pub bytes_written: AtomicU64,
}

impl ObjectStoreStats {
    pub fn requests(&self, k: RequestKind) -> u64 {
        self.requests[k as usize].load(Relaxed)
    }

    pub fn errors(&self, k: RequestKind) -> u64 {
        self.errors[k as usize].load(Relaxed)
    }

    fn count<T>(&self, k: RequestKind, r: &object_store::Result<T>) {
        self.requests[k as usize].fetch_add(1, Relaxed);
        if r.as_ref().is_err_and(is_failure) {
            self.errors[k as usize].fetch_add(1, Relaxed);
        }
    }
}

/// An object store that counts what passes through it.
#[derive(Clone)]
pub struct MeteredStore {
    inner: Arc<dyn ObjectStore>,
    stats: Arc<ObjectStoreStats>,
}

impl MeteredStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self { inner, stats: Arc::default() }
    }

    pub fn stats(&self) -> &Arc<ObjectStoreStats> {
        &self.stats
    }

    async fn counted<T>(&self, k: RequestKind, request: impl Future<Output = object_store::Result<T>>) -> object_store::Result<T> {
        let r = request.await;
        self.stats.count(k, &r);
        r
    }
}

impl fmt::Debug for MeteredStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MeteredStore({})", self.inner)
    }
}

impl fmt::Display for MeteredStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

/// The boxed future `#[async_trait]` methods return (implemented by hand, as in
/// [`crate::testing`], to avoid a proc-macro dependency).
type BoxFut<'a, T> = Pin<Box<dyn Future<Output = object_store::Result<T>> + Send + 'a>>;

impl ObjectStore for MeteredStore {
    fn put_opts<'life0, 'life1, 'async_trait>(&'life0 self, location: &'life1 Path, payload: PutPayload, opts: PutOptions) -> BoxFut<'async_trait, PutResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let bytes = payload.content_length() as u64;
            let r = self.counted(RequestKind::Put, self.inner.put_opts(location, payload, opts)).await;
            if r.is_ok() {
                self.stats.bytes_written.fetch_add(bytes, Relaxed);
            }
            r
        })
    }

    fn put_multipart_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        opts: PutMultipartOptions,
    ) -> BoxFut<'async_trait, Box<dyn MultipartUpload>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let upload = self.counted(RequestKind::Put, self.inner.put_multipart_opts(location, opts)).await?;
            Ok(Box::new(MeteredUpload { inner: upload, stats: self.stats.clone() }) as Box<dyn MultipartUpload>)
        })
    }

    fn get_opts<'life0, 'life1, 'async_trait>(&'life0 self, location: &'life1 Path, options: GetOptions) -> BoxFut<'async_trait, GetResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let head = options.head;
            let r = self.counted(RequestKind::Get, self.inner.get_opts(location, options)).await;
            if let Ok(g) = &r {
                // What the body will carry (a HEAD carries none).
                if !head {
                    self.stats.bytes_read.fetch_add(g.range.end.saturating_sub(g.range.start), Relaxed);
                }
            }
            r
        })
    }

    fn get_ranges<'life0, 'life1, 'life2, 'async_trait>(&'life0 self, location: &'life1 Path, ranges: &'life2 [Range<u64>]) -> BoxFut<'async_trait, Vec<Bytes>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let r = self.counted(RequestKind::Get, self.inner.get_ranges(location, ranges)).await;
            if let Ok(parts) = &r {
                self.stats.bytes_read.fetch_add(parts.iter().map(|b| b.len() as u64).sum(), Relaxed);
            }
            r
        })
    }

    fn delete_stream(&self, locations: BoxStream<'static, object_store::Result<Path>>) -> BoxStream<'static, object_store::Result<Path>> {
        let stats = self.stats.clone();
        self.inner
            .delete_stream(locations)
            .map(move |r| {
                stats.count(RequestKind::Delete, &r);
                r
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.stats.requests[RequestKind::List as usize].fetch_add(1, Relaxed);
        let stats = self.stats.clone();
        self.inner.list(prefix).inspect(move |r| count_list_error(&stats, r)).boxed()
    }

    fn list_with_offset(&self, prefix: Option<&Path>, offset: &Path) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.stats.requests[RequestKind::List as usize].fetch_add(1, Relaxed);
        let stats = self.stats.clone();
        self.inner.list_with_offset(prefix, offset).inspect(move |r| count_list_error(&stats, r)).boxed()
    }

    fn list_with_delimiter<'life0, 'life1, 'async_trait>(&'life0 self, prefix: Option<&'life1 Path>) -> BoxFut<'async_trait, ListResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.counted(RequestKind::List, self.inner.list_with_delimiter(prefix)).await })
    }

    fn copy_opts<'life0, 'life1, 'life2, 'async_trait>(&'life0 self, from: &'life1 Path, to: &'life2 Path, options: CopyOptions) -> BoxFut<'async_trait, ()>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.counted(RequestKind::Put, self.inner.copy_opts(from, to, options)).await })
    }

    fn rename_opts<'life0, 'life1, 'life2, 'async_trait>(&'life0 self, from: &'life1 Path, to: &'life2 Path, options: RenameOptions) -> BoxFut<'async_trait, ()>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.counted(RequestKind::Put, self.inner.rename_opts(from, to, options)).await })
    }
}

/// True for an error that is a failure, not an answer: a missing object or a lost
/// conditional write is how the LSM asks questions, not a fault.
fn is_failure(e: &object_store::Error) -> bool {
    use object_store::Error::*;
    !matches!(e, NotFound { .. } | AlreadyExists { .. } | Precondition { .. } | NotModified { .. })
}

fn count_list_error(stats: &ObjectStoreStats, r: &object_store::Result<ObjectMeta>) {
    if r.as_ref().is_err_and(is_failure) {
        stats.errors[RequestKind::List as usize].fetch_add(1, Relaxed);
    }
}

/// A multipart upload whose parts count as written bytes.
#[derive(Debug)]
struct MeteredUpload {
    inner: Box<dyn MultipartUpload>,
    stats: Arc<ObjectStoreStats>,
}

impl MultipartUpload for MeteredUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        self.stats.bytes_written.fetch_add(data.content_length() as u64, Relaxed);
        self.inner.put_part(data)
    }

    fn complete<'life0, 'async_trait>(&'life0 mut self) -> BoxFut<'async_trait, PutResult>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            let r = self.inner.complete().await;
            self.stats.count(RequestKind::Put, &r);
            r
        })
    }

    fn abort<'life0, 'async_trait>(&'life0 mut self) -> BoxFut<'async_trait, ()>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.inner.abort().await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::ObjectStoreExt;

    #[tokio::test]
    async fn requests_and_bytes_are_counted_and_missing_objects_are_no_errors() {
        let s = MeteredStore::new(Arc::new(InMemory::new()));
        let p = Path::from("a/b");
        s.put(&p, Bytes::from_static(b"hello").into()).await.unwrap();
        assert_eq!(s.get(&p).await.unwrap().bytes().await.unwrap().as_ref(), b"hello");
        assert!(s.get(&Path::from("missing")).await.is_err());
        let listed: Vec<_> = s.list(None).collect().await;
        assert_eq!(listed.len(), 1);
        let st = s.stats();
        assert_eq!((st.requests(RequestKind::Put), st.requests(RequestKind::Get), st.requests(RequestKind::List)), (1, 2, 1));
        assert_eq!(st.errors(RequestKind::Get), 0, "a missing object is an answer, not a failure");
        assert_eq!(st.bytes_written.load(Relaxed), 5);
        assert_eq!(st.bytes_read.load(Relaxed), 5);
    }
}
