//! `connector = 'posix_fs'` (alias `'file'`): rows from local files, so another engine can be
//! fed byte-identical input.
//!
//! Files: `posix_fs.root` (a directory) with `match_pattern` (a glob of `*` and `?`, default
//! `*`), as in RisingWave, or `path` (a file, or a glob in its last component). Each file is a
//! split, in name order. `FORMAT PLAIN ENCODE CSV [(without_header = 'true', delimiter = ',')]`
//! (a header line is skipped by default, as RisingWave does) or `ENCODE JSON` (one object per
//! line, fields by column name). A split's position is the byte offset of its next record, so a
//! restarted reader continues exactly where the committed epoch ended. Files are read once to
//! their end (no tailing).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, SchemaRef};
use eddy_common::error::sqlstate;
use eddy_common::{internal_err, not_supported, user_err, EddyError, Result};
use eddy_stream::SplitReader;

use crate::options::Options;
use crate::{decode_u64, Seekable};

/// Bytes read from a file per batch.
const READ_BYTES: usize = 1 << 20;

/// How records are encoded.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Encoding {
    Csv { delimiter: u8, header: bool },
    Json,
}

/// One file.
struct FileSplit {
    path: PathBuf,
    schema: SchemaRef,
    encoding: Encoding,
    /// Byte offset of the next record.
    offset: u64,
    /// Bytes read past `offset` that did not yet end a record.
    pending: Vec<u8>,
    /// The file ended (everything up to it is in `pending`).
    eof: bool,
    file: Option<File>,
    /// Line (record) number of the next record, for error messages.
    line: u64,
}

/// `*` and `?` glob matching.
fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    match (pattern.first(), name.first()) {
        (None, None) => true,
        (Some(b'*'), _) => glob_match(&pattern[1..], name) || (!name.is_empty() && glob_match(pattern, &name[1..])),
        (Some(b'?'), Some(_)) => glob_match(&pattern[1..], &name[1..]),
        (Some(p), Some(n)) if p == n => glob_match(&pattern[1..], &name[1..]),
        _ => false,
    }
}

/// The files a source reads, sorted.
fn files(options: &Options) -> Result<Vec<PathBuf>> {
    let (dir, pattern) = match (options.get("posix_fs.root"), options.get("path")) {
        (Some(root), _) => (PathBuf::from(root), options.get("match_pattern").unwrap_or("*").to_string()),
        (None, Some(path)) => {
            let p = Path::new(path);
            match p.file_name().map(|n| n.to_string_lossy().to_string()) {
                Some(name) if name.contains(['*', '?']) => (p.parent().map(Path::to_path_buf).unwrap_or_default(), name),
                _ => return Ok(vec![p.to_path_buf()]),
            }
        }
        (None, None) => return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "a file source needs posix_fs.root (with match_pattern) or path")),
    };
    let entries = std::fs::read_dir(&dir).map_err(|e| user_err!(sqlstate::INVALID_PARAMETER_VALUE, "cannot list {}: {e}", dir.display()))?;
    let mut out: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
        .filter(|e| glob_match(pattern.as_bytes(), e.file_name().to_string_lossy().as_bytes()))
        .map(|e| e.path())
        .collect();
    out.sort();
    Ok(out)
}

/// The splits of a file source.
pub(crate) fn splits(options: &Options, schema: &SchemaRef) -> Result<Vec<Box<dyn Seekable>>> {
    let encoding = match options.get("encode").map(str::to_ascii_uppercase).as_deref() {
        Some("CSV") | None => {
            Encoding::Csv { delimiter: options.csv_delimiter()?, header: !options.flag("encode.without_header", false)? }
        }
        Some("JSON") => Encoding::Json,
        Some(other) => return Err(not_supported!("ENCODE {other} for a file source (CSV or JSON)")),
    };
    for f in schema.fields() {
        if matches!(f.data_type(), DataType::Interval(_) | DataType::Binary) {
            return Err(not_supported!("file sources cannot read column \"{}\" of type {}", f.name(), f.data_type()));
        }
    }
    let files = files(options)?;
    if files.is_empty() {
        return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "the file source matches no file"));
    }
    Ok(files
        .into_iter()
        .map(|path| {
            let header = matches!(encoding, Encoding::Csv { header: true, .. });
            Box::new(FileSplit { path, schema: schema.clone(), encoding, offset: 0, pending: Vec::new(), eof: false, file: None, line: u64::from(header) })
                as Box<dyn Seekable>
        })
        .collect())
}

impl FileSplit {
    fn io_err(&self, e: std::io::Error) -> EddyError {
        EddyError::external(format!("file source {}: {e}", self.path.display()))
    }

    /// Reads more of the file into `pending`.
    fn fill(&mut self) -> Result<()> {
        if self.file.is_none() {
            let mut f = File::open(&self.path).map_err(|e| self.io_err(e))?;
            f.seek(SeekFrom::Start(self.offset)).map_err(|e| self.io_err(e))?;
            self.file = Some(f);
            // At the start of a CSV file with a header, the header is not a record.
            if self.offset == 0 && matches!(self.encoding, Encoding::Csv { header: true, .. }) {
                self.skip_header()?;
            }
        }
        let mut buf = vec![0u8; READ_BYTES];
        let Some(f) = self.file.as_mut() else { return Ok(()) };
        let n = f.read(&mut buf).map_err(|e| EddyError::external(format!("file source: {e}")))?;
        if n == 0 {
            self.eof = true;
        }
        self.pending.extend_from_slice(&buf[..n]);
        Ok(())
    }

    fn skip_header(&mut self) -> Result<()> {
        loop {
            if let Some(nl) = self.pending.iter().position(|b| *b == b'\n') {
                self.pending.drain(..=nl);
                self.offset += nl as u64 + 1;
                return Ok(());
            }
            let mut buf = vec![0u8; 64 << 10];
            let Some(f) = self.file.as_mut() else { return Ok(()) };
            let n = f.read(&mut buf).map_err(|e| EddyError::external(format!("file source: {e}")))?;
            if n == 0 {
                self.offset += self.pending.len() as u64;
                self.pending.clear();
                return Ok(());
            }
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    /// Parses `data` (complete records) into a batch.
    fn parse(&self, data: &[u8]) -> Result<RecordBatch> {
        let bad = |e: arrow::error::ArrowError| {
            user_err!(sqlstate::BAD_COPY_FILE_FORMAT, "file source {}, near record {}: {e}", self.path.display(), self.line)
        };
        let rows = data.iter().filter(|b| **b == b'\n').count() + 1;
        let mut batches = Vec::new();
        match self.encoding {
            Encoding::Csv { delimiter, .. } => {
                let reader = arrow::csv::ReaderBuilder::new(self.schema.clone())
                    .with_header(false)
                    .with_delimiter(delimiter)
                    .with_batch_size(rows)
                    .build(data)
                    .map_err(bad)?;
                for b in reader {
                    batches.push(b.map_err(bad)?);
                }
            }
            Encoding::Json => {
                let reader = arrow::json::ReaderBuilder::new(self.schema.clone()).with_batch_size(rows).build(data).map_err(bad)?;
                for b in reader {
                    batches.push(b.map_err(bad)?);
                }
            }
        }
        Ok(arrow::compute::concat_batches(&self.schema, &batches)?)
    }
}

/// The end of the last complete record in `data` (after its last newline outside quotes).
fn last_record_end(data: &[u8], csv: bool) -> Option<usize> {
    if !csv {
        return data.iter().rposition(|b| *b == b'\n').map(|p| p + 1);
    }
    let mut in_quotes = false;
    let mut end = None;
    for (i, b) in data.iter().enumerate() {
        if *b == b'"' {
            in_quotes = !in_quotes;
        } else if *b == b'\n' && !in_quotes {
            end = Some(i + 1);
        }
    }
    end
}

impl SplitReader for FileSplit {
    fn next_batch(&mut self, _max_rows: usize) -> Result<Option<RecordBatch>> {
        let csv = matches!(self.encoding, Encoding::Csv { .. });
        loop {
            let end = match last_record_end(&self.pending, csv) {
                Some(e) => e,
                None if self.eof && self.pending.iter().all(u8::is_ascii_whitespace) => return Ok(None),
                None if self.eof => self.pending.len(),
                None => {
                    self.fill()?;
                    continue;
                }
            };
            let data: Vec<u8> = self.pending.drain(..end).collect();
            let batch = self.parse(&data)?;
            self.offset += end as u64;
            self.line += batch.num_rows() as u64;
            if self.pending.is_empty() && !self.eof && batch.num_rows() == 0 {
                continue;
            }
            return Ok(Some(batch));
        }
    }

    fn position(&self) -> Vec<u8> {
        self.offset.to_be_bytes().to_vec()
    }

    /// Records not read yet, estimated from the bytes left in the file and the bytes per
    /// record read so far (unknown before this reader has read any).
    fn backlog(&self) -> Option<u64> {
        let len = std::fs::metadata(&self.path).ok()?.len();
        let left = len.saturating_sub(self.offset);
        if left == 0 {
            return Some(0);
        }
        let records = self.line.saturating_sub(u64::from(matches!(self.encoding, Encoding::Csv { header: true, .. })));
        if records == 0 || self.offset == 0 {
            return None;
        }
        Some((u128::from(left) * u128::from(records) / u128::from(self.offset)) as u64)
    }
}

impl Seekable for FileSplit {
    fn seek(&mut self, position: &[u8]) -> Result<()> {
        self.offset = decode_u64(position)?;
        self.file = None;
        self.pending.clear();
        self.eof = false;
        if self.offset > 0 {
            // A header was skipped before this position was committed.
            let len = std::fs::metadata(&self.path).map_err(|e| self.io_err(e))?.len();
            if self.offset > len {
                return Err(internal_err!("file source {} is shorter than its committed position", self.path.display()));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Array, Int64Array};
    use arrow::datatypes::{Field, Schema, TimeUnit};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("auction", DataType::Int64, true),
            Field::new("channel", DataType::Utf8, true),
            Field::new("date_time", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        ]))
    }

    #[test]
    fn globs_match_like_shells() {
        assert!(glob_match(b"*.csv", b"bids.csv"));
        assert!(glob_match(b"part_0?", b"part_07"));
        assert!(!glob_match(b"*.csv", b"bids.json"));
    }

    #[test]
    fn a_headerless_csv_file_is_read_whole_and_resumes_at_a_record_boundary() {
        let dir = std::env::temp_dir().join(format!("eddy-file-source-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bids.csv");
        let mut text = String::new();
        for i in 0..10_000 {
            text.push_str(&format!("{i},\"Goo,gle\",2023-11-14 22:13:20.{:03}\n", i % 1000));
        }
        std::fs::write(&path, &text).unwrap();
        let opts = Options::new([
            ("path".to_string(), path.display().to_string()),
            ("encode".to_string(), "CSV".to_string()),
            ("encode.without_header".to_string(), "true".to_string()),
        ]);
        let mut s = splits(&opts, &schema()).unwrap().pop().unwrap();
        assert_eq!(s.backlog(), None, "unknown before any record is read");
        let first = s.next_batch(100).unwrap().unwrap();
        let pos = s.position();
        // Estimated from the bytes per record so far (these records are 38 to 41 bytes).
        let (left, exact) = (s.backlog().unwrap() as f64, (10_000 - first.num_rows()) as f64);
        assert!((left - exact).abs() <= exact * 0.1, "{left} records left, {exact} in fact");
        let mut ids: Vec<i64> = first.column(0).as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec();
        let mut resumed = splits(&opts, &schema()).unwrap().pop().unwrap();
        resumed.seek(&pos).unwrap();
        while let Some(b) = resumed.next_batch(100).unwrap() {
            ids.extend(b.column(0).as_any().downcast_ref::<Int64Array>().unwrap().values());
        }
        assert_eq!(ids, (0..10_000).collect::<Vec<i64>>());
        assert_eq!(resumed.backlog(), Some(0));
        assert_eq!(first.column(1).as_any().downcast_ref::<arrow::array::StringArray>().unwrap().value(0), "Goo,gle");
        assert!(first.column(2).is_valid(0));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
