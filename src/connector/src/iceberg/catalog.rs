//! Where an Iceberg table's current metadata file is recorded, and the atomic swap that makes
//! a commit: `catalog.type = 'storage'` keeps it in the warehouse itself, `'sql'` in the SQL
//! catalog tables pyiceberg's `SqlCatalog` (and Iceberg's JDBC catalog) read.
//!
//! * storage: `<table>/metadata/v<N>.metadata.json`, written only if absent (a put that fails
//!   when the file exists), then `version-hint.text` = N. A reader trusts the hint and then
//!   looks for later versions, so a crash between the two steps loses nothing.
//! * sql (sqlite): `iceberg_tables(catalog_name, table_namespace, table_name,
//!   metadata_location, previous_metadata_location)`; a commit is an `UPDATE ... WHERE
//!   metadata_location = <the one it started from>`, so a concurrent writer's commit is never
//!   overwritten.

use std::path::PathBuf;

use bytes::Bytes;
use eddy_common::error::sqlstate;
use eddy_common::{user_err, EddyError, Result};
use iceberg::spec::TableMetadata;

use super::storage::Warehouse;

/// A table's catalog entry kind.
#[derive(Debug, Clone)]
pub enum Catalog {
    Storage,
    /// A sqlite database file and the catalog's name in it.
    Sql { path: PathBuf, name: String },
}

/// A table's current metadata and where it is.
pub struct Current {
    pub location: String,
    pub metadata: TableMetadata,
    /// The version number of the metadata file.
    pub version: u64,
}

/// The table a sink writes.
#[derive(Debug, Clone)]
pub struct TableRef {
    pub catalog: Catalog,
    pub namespace: String,
    pub name: String,
    /// `<warehouse>/<namespace>/<name>`, for a table the sink creates.
    pub location: String,
}

fn conflict(t: &TableRef) -> EddyError {
    EddyError::external(format!("iceberg table {}.{} was changed by another writer during a commit", t.namespace, t.name))
}

fn sql_error(e: rusqlite::Error) -> EddyError {
    EddyError::external(format!("iceberg sql catalog: {e}"))
}

impl Catalog {
    /// The catalog of `catalog.type` (`storage` by default) and `catalog.uri`/`catalog.name`.
    pub fn from_options(kind: Option<&str>, uri: Option<&str>, name: Option<&str>) -> Result<Self> {
        match kind.map(str::to_ascii_lowercase).as_deref() {
            None | Some("storage") | Some("hadoop") => Ok(Catalog::Storage),
            Some("sql") | Some("jdbc") => {
                let uri = uri.ok_or_else(|| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "iceberg sink option 'catalog.uri' is required with catalog.type = 'sql' (e.g. 'sqlite:///path/catalog.db')"))?;
                let rest = uri.strip_prefix("jdbc:").unwrap_or(uri);
                let path = rest.strip_prefix("sqlite:").ok_or_else(|| {
                    user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "iceberg sql catalog '{uri}' is not supported: use a sqlite:///path/catalog.db URI")
                })?;
                let path = path.strip_prefix("//").unwrap_or(path);
                let path = if path.starts_with('/') { format!("/{}", path.trim_start_matches('/')) } else { path.to_string() };
                if path.is_empty() {
                    return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "catalog.uri '{uri}' names no file"));
                }
                Ok(Catalog::Sql { path: PathBuf::from(path), name: name.unwrap_or("default").to_string() })
            }
            Some("rest") | Some("glue") | Some("hive") => {
                Err(user_err!(sqlstate::FEATURE_NOT_SUPPORTED, "iceberg catalog.type '{}' is not supported yet (supported: storage, sql)", kind.unwrap_or_default()))
            }
            Some(other) => Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "iceberg sink option 'catalog.type' must be 'storage' or 'sql', not '{other}'")),
        }
    }
}

impl TableRef {
    /// The table's current metadata (`None`: no such table).
    pub async fn load(&self, wh: &Warehouse) -> Result<Option<Current>> {
        let location = match &self.catalog {
            Catalog::Storage => {
                let hint = match wh.get(&self.hint_url()).await? {
                    Some(b) => String::from_utf8_lossy(&b).trim().parse::<u64>().map_err(|_| EddyError::external(format!("corrupt {}", self.hint_url())))?,
                    None if wh.get(&self.storage_metadata_url(1)).await?.is_some() => 1,
                    None => return Ok(None),
                };
                let mut version = hint;
                while wh.get(&self.storage_metadata_url(version + 1)).await?.is_some() {
                    version += 1;
                }
                self.storage_metadata_url(version)
            }
            Catalog::Sql { .. } => match self.sql_location().await? {
                Some(l) => l,
                None => return Ok(None),
            },
        };
        let bytes = wh.get(&location).await?.ok_or_else(|| EddyError::external(format!("iceberg metadata file {location} is missing")))?;
        let metadata: TableMetadata = serde_json::from_slice(&bytes).map_err(|e| EddyError::external(format!("cannot read iceberg metadata {location}: {e}")))?;
        let version = version_of(&location);
        Ok(Some(Current { location, metadata, version }))
    }

    /// Writes `metadata` as the version after `previous` (`None`: a new table) and makes it
    /// current, or fails without effect if someone else committed first.
    pub async fn commit(&self, wh: &Warehouse, previous: Option<&Current>, metadata: &TableMetadata) -> Result<Current> {
        let version = previous.map(|c| c.version + 1).unwrap_or(1);
        let bytes = Bytes::from(serde_json::to_vec(metadata).map_err(|e| EddyError::external(format!("cannot encode iceberg metadata: {e}")))?);
        let location = match &self.catalog {
            Catalog::Storage => self.storage_metadata_url(version),
            Catalog::Sql { .. } => format!("{}/metadata/{version:05}-{}.metadata.json", metadata.location(), uuid_like()),
        };
        if !wh.create(&location, bytes).await? {
            return Err(conflict(self));
        }
        match &self.catalog {
            Catalog::Storage => wh.put(&self.hint_url(), Bytes::from(version.to_string())).await?,
            Catalog::Sql { .. } => self.sql_swap(previous.map(|c| c.location.clone()), location.clone()).await?,
        }
        Ok(Current { location, metadata: metadata.clone(), version })
    }

    fn metadata_dir(&self) -> String {
        format!("{}/metadata", self.location)
    }

    fn hint_url(&self) -> String {
        format!("{}/version-hint.text", self.metadata_dir())
    }

    fn storage_metadata_url(&self, version: u64) -> String {
        format!("{}/v{version}.metadata.json", self.metadata_dir())
    }

    async fn sql<T: Send + 'static>(&self, f: impl FnOnce(&rusqlite::Connection, &str) -> rusqlite::Result<T> + Send + 'static) -> Result<T> {
        let Catalog::Sql { path, name } = self.catalog.clone() else { unreachable!("a sql call on a storage catalog") };
        tokio::task::spawn_blocking(move || {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| EddyError::external(format!("cannot create {}: {e}", dir.display())))?;
            }
            let c = rusqlite::Connection::open(&path).map_err(sql_error)?;
            c.busy_timeout(std::time::Duration::from_secs(10)).map_err(sql_error)?;
            c.execute_batch(
                "CREATE TABLE IF NOT EXISTS iceberg_tables (
                    catalog_name VARCHAR(255) NOT NULL, table_namespace VARCHAR(255) NOT NULL,
                    table_name VARCHAR(255) NOT NULL, metadata_location VARCHAR(1000),
                    previous_metadata_location VARCHAR(1000), iceberg_type VARCHAR(5),
                    PRIMARY KEY (catalog_name, table_namespace, table_name));
                 CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
                    catalog_name VARCHAR(255) NOT NULL, namespace VARCHAR(255) NOT NULL,
                    property_key VARCHAR(255) NOT NULL, property_value VARCHAR(1000) NOT NULL,
                    PRIMARY KEY (catalog_name, namespace, property_key));",
            )
            .map_err(sql_error)?;
            f(&c, &name).map_err(sql_error)
        })
        .await
        .map_err(|e| EddyError::external(format!("iceberg sql catalog task failed: {e}")))?
    }

    async fn sql_location(&self) -> Result<Option<String>> {
        let (ns, t) = (self.namespace.clone(), self.name.clone());
        self.sql(move |c, cat| {
            let mut q = c.prepare("SELECT metadata_location FROM iceberg_tables WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3")?;
            let mut rows = q.query(rusqlite::params![cat, ns, t])?;
            match rows.next()? {
                Some(r) => r.get::<_, Option<String>>(0),
                None => Ok(None),
            }
        })
        .await
    }

    async fn sql_swap(&self, previous: Option<String>, location: String) -> Result<()> {
        let (ns, t) = (self.namespace.clone(), self.name.clone());
        let changed = self
            .sql(move |c, cat| match &previous {
                None => {
                    c.execute(
                        "INSERT OR IGNORE INTO iceberg_namespace_properties (catalog_name, namespace, property_key, property_value) VALUES (?1, ?2, 'exists', 'true')",
                        rusqlite::params![cat, ns],
                    )?;
                    c.execute(
                        "INSERT OR IGNORE INTO iceberg_tables (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location, iceberg_type) VALUES (?1, ?2, ?3, ?4, NULL, 'TABLE')",
                        rusqlite::params![cat, ns, t, location],
                    )
                }
                Some(old) => c.execute(
                    "UPDATE iceberg_tables SET metadata_location = ?4, previous_metadata_location = ?5 WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3 AND metadata_location = ?5",
                    rusqlite::params![cat, ns, t, location, old],
                ),
            })
            .await?;
        if changed == 1 {
            Ok(())
        } else {
            Err(conflict(self))
        }
    }
}

/// The version number in a metadata file name (`v3.metadata.json`, `00003-<uuid>.metadata.json`).
fn version_of(location: &str) -> u64 {
    let file = location.rsplit('/').next().unwrap_or_default();
    let digits: String = file.trim_start_matches('v').chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().unwrap_or(0)
}

/// A random UUID (version 4) as text, for metadata file names.
fn uuid_like() -> String {
    let b: [u8; 16] = rand::random();
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-4{}-a{}-{}", &h[0..8], &h[8..12], &h[13..16], &h[17..20], &h[20..32])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_options_are_checked() {
        assert!(matches!(Catalog::from_options(None, None, None), Ok(Catalog::Storage)));
        match Catalog::from_options(Some("sql"), Some("sqlite:///tmp/x/c.db"), None).unwrap() {
            Catalog::Sql { path, name } => assert_eq!((path.to_str().unwrap(), name.as_str()), ("/tmp/x/c.db", "default")),
            other => panic!("{other:?}"),
        }
        match Catalog::from_options(Some("sql"), Some("sqlite:////tmp/c.db"), Some("eddy")).unwrap() {
            Catalog::Sql { path, name } => assert_eq!((path.to_str().unwrap(), name.as_str()), ("/tmp/c.db", "eddy")),
            other => panic!("{other:?}"),
        }
        assert_eq!(Catalog::from_options(Some("sql"), None, None).unwrap_err().sqlstate, sqlstate::INVALID_PARAMETER_VALUE);
        assert_eq!(Catalog::from_options(Some("sql"), Some("postgresql://h/db"), None).unwrap_err().sqlstate, sqlstate::FEATURE_NOT_SUPPORTED);
        assert_eq!(Catalog::from_options(Some("rest"), None, None).unwrap_err().sqlstate, sqlstate::FEATURE_NOT_SUPPORTED);
        assert_eq!(Catalog::from_options(Some("nope"), None, None).unwrap_err().sqlstate, sqlstate::INVALID_PARAMETER_VALUE);
    }

    #[test]
    fn metadata_versions_are_read_from_file_names() {
        assert_eq!(version_of("file:///w/d/t/metadata/v12.metadata.json"), 12);
        assert_eq!(version_of("s3://b/w/d/t/metadata/00007-0a1b.metadata.json"), 7);
        assert_eq!(uuid_like().len(), 36);
    }
}
