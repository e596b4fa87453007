//! `COPY table [(cols)] FROM STDIN` data in PostgreSQL's text and CSV formats, parsed as it
//! arrives ([`CopyParser::feed`]) into bounded batches of rows: complete records are split into
//! per-column text builders, and every [`CHUNK_ROWS`] rows (or [`CHUNK_BYTES`] of text) become
//! one typed batch, cast with PostgreSQL's input syntax. Memory stays bounded by the chunk size
//! whatever the input size; the statement stays atomic because the chunks are staged with the
//! table's writer and applied together at the end (see `copy.rs`).
//!
//! Why not arrow-csv: PostgreSQL's CSV distinguishes an unquoted empty field (NULL) from a
//! quoted one (`""`, the empty string), and its text format has backslash escapes and a
//! configurable NULL marker; arrow-csv's reader sees neither quoting nor escapes.

use std::borrow::Cow;
use std::sync::Arc;

use arrow::array::{ArrayRef, StringArray, StringBuilder};
use eddy_common::error::sqlstate;
use eddy_common::text::cast_text;
use eddy_common::{user_err, EddyError, Result};

use crate::catalog::TableCatalog;

/// Rows per staged batch.
pub const CHUNK_ROWS: usize = 8_192;
/// Bytes of field text per staged batch.
pub const CHUNK_BYTES: usize = 4 << 20;

/// Input format of a COPY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyFormat {
    /// Tab-separated, `\N` for NULL, backslash escapes.
    Text,
    /// RFC 4180 CSV; an unquoted empty field is NULL.
    Csv,
}

/// Format options of a COPY, in either direction.
#[derive(Debug, Clone)]
pub struct CopyOptions {
    /// Text or CSV.
    pub format: CopyFormat,
    /// Field delimiter.
    pub delimiter: char,
    /// The string that means NULL.
    pub null: String,
    /// A header line (skipped on input, written on output).
    pub header: bool,
    /// CSV quote character.
    pub quote: char,
}

/// A COPY FROM STDIN that is waiting for its data.
#[derive(Debug, Clone)]
pub struct CopyIn {
    /// Target table.
    pub table: Arc<TableCatalog>,
    /// Indices of the columns present in the data, in data order.
    pub columns: Vec<usize>,
    /// Format.
    pub format: CopyFormat,
    /// Field delimiter.
    pub delimiter: char,
    /// The string that means NULL.
    pub null: String,
    /// Skip the first line.
    pub header: bool,
    /// CSV quote character.
    pub quote: char,
}

fn bad_copy(line: usize, msg: impl std::fmt::Display) -> EddyError {
    user_err!(sqlstate::BAD_COPY_FILE_FORMAT, "COPY: line {line}: {msg}")
}

/// Unescapes one text-format field; `None` for the NULL marker.
fn text_field<'a>(raw: &'a str, null: &str) -> Option<Cow<'a, str>> {
    if raw == null {
        return None;
    }
    if !raw.contains('\\') {
        return Some(Cow::Borrowed(raw));
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('v') => out.push('\u{b}'),
            Some(d) if d.is_digit(8) => {
                let mut v = d.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(x) => {
                            v = v * 8 + x;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    Some(Cow::Owned(out))
}

/// Incremental parser of one COPY's data.
pub struct CopyParser {
    /// The statement's options.
    spec: CopyIn,
    /// Bytes of an incomplete record carried over to the next piece of data.
    carry: Vec<u8>,
    /// One text builder per data column.
    builders: Vec<StringBuilder>,
    /// Rows in the builders.
    rows: usize,
    /// Bytes of text in the builders.
    bytes: usize,
    /// Line number of the next record (for error messages).
    line: usize,
    /// The header line is still to be skipped.
    skip_header: bool,
    /// The end-of-data marker `\.` was seen: later data is ignored.
    ended: bool,
}

impl CopyParser {
    /// A parser for `spec`'s format and columns.
    pub fn new(spec: CopyIn) -> Self {
        let builders = spec.columns.iter().map(|_| StringBuilder::new()).collect();
        let skip_header = spec.header;
        Self { spec, carry: Vec::new(), builders, rows: 0, bytes: 0, line: 1, skip_header, ended: false }
    }

    /// The statement's options.
    pub fn spec(&self) -> &CopyIn {
        &self.spec
    }

    /// True when a batch is due.
    pub fn is_full(&self) -> bool {
        self.rows >= CHUNK_ROWS || self.bytes >= CHUNK_BYTES
    }

    /// Parses the complete records of `data` (after what was carried over); an incomplete last
    /// record waits for more data.
    pub fn feed(&mut self, data: &[u8]) -> Result<()> {
        if self.ended {
            return Ok(());
        }
        self.carry.extend_from_slice(data);
        let end = match self.spec.format {
            CopyFormat::Text => self.carry.iter().rposition(|b| *b == b'\n').map(|p| p + 1),
            CopyFormat::Csv => last_csv_record_end(&self.carry, self.spec.quote as u8),
        };
        let Some(end) = end else { return Ok(()) };
        let rest = self.carry.split_off(end);
        let complete = std::mem::replace(&mut self.carry, rest);
        self.parse_records(&complete)
    }

    /// Parses what is left at the end of the data (a last record without a newline).
    pub fn finish(&mut self) -> Result<()> {
        if self.ended || self.carry.is_empty() {
            return Ok(());
        }
        let last = std::mem::take(&mut self.carry);
        if self.spec.format == CopyFormat::Csv && last_csv_record_end(&last, self.spec.quote as u8).is_none() && has_open_quote(&last, self.spec.quote as u8) {
            return Err(bad_copy(self.line, "unterminated CSV quoted field"));
        }
        self.parse_records(&last)
    }

    /// Takes the parsed rows as text columns (in data order), if any.
    pub fn take_text(&mut self) -> Option<Vec<StringArray>> {
        if self.rows == 0 {
            return None;
        }
        self.rows = 0;
        self.bytes = 0;
        Some(self.builders.iter_mut().map(|b| b.finish()).collect())
    }

    /// Casts text columns to the table's types: the columns of its user schema, NULL where the
    /// data has no column (defaults are filled in by the caller).
    pub fn typed(&self, text: &[StringArray]) -> Result<Vec<Option<ArrayRef>>> {
        let table = &self.spec.table;
        let schema = table.planning_schema(false);
        let mut out: Vec<Option<ArrayRef>> = vec![None; schema.fields().len()];
        for (pos, &col) in self.spec.columns.iter().enumerate() {
            let target = schema.field(col).data_type();
            let typed = cast_text(&text[pos], target).map_err(|e| {
                user_err!(
                    sqlstate::INVALID_TEXT_REPRESENTATION,
                    "COPY {}, column {}: invalid input for type {}: {e}",
                    table.name,
                    table.columns[col].name,
                    table.columns[col].ty.pg_name()
                )
            })?;
            out[col] = Some(typed);
        }
        Ok(out)
    }

    fn parse_records(&mut self, data: &[u8]) -> Result<()> {
        let text = std::str::from_utf8(data).map_err(|e| {
            user_err!(sqlstate::CHARACTER_NOT_IN_REPERTOIRE, "invalid byte sequence for encoding \"UTF8\" in COPY data: {e}")
        })?;
        match self.spec.format {
            CopyFormat::Text => self.parse_text(text),
            CopyFormat::Csv => self.parse_csv(text),
        }
    }

    fn push_record<S: AsRef<str>>(&mut self, fields: &mut dyn Iterator<Item = Option<S>>) -> Result<()> {
        push_fields(&mut self.builders, &mut self.bytes, self.line, fields)?;
        self.rows += 1;
        Ok(())
    }

    fn parse_text(&mut self, text: &str) -> Result<()> {
        let delim = self.spec.delimiter;
        let null = self.spec.null.clone();
        for line in text.split_inclusive('\n') {
            let l = line.strip_suffix('\n').unwrap_or(line);
            let l = l.strip_suffix('\r').unwrap_or(l);
            if l == "\\." {
                self.ended = true;
                return Ok(());
            }
            if std::mem::take(&mut self.skip_header) || l.is_empty() {
                self.line += 1;
                continue;
            }
            self.push_record(&mut l.split(delim).map(|f| text_field(f, &null)))?;
            self.line += 1;
        }
        Ok(())
    }

    fn parse_csv(&mut self, text: &str) -> Result<()> {
        if self.spec.delimiter.is_ascii() && self.spec.quote.is_ascii() {
            return self.parse_csv_bytes(text);
        }
        self.parse_csv_chars(text)
    }

    /// CSV with single-byte delimiter and quote (PostgreSQL requires them): fields are cut
    /// out of the data as slices and appended to the builders without allocating per field.
    fn parse_csv_bytes(&mut self, text: &str) -> Result<()> {
        let b = text.as_bytes();
        let (delim, quote) = (self.spec.delimiter as u8, self.spec.quote as u8);
        let width = self.spec.columns.len();
        // One reusable buffer per field of the current record, and whether each was quoted.
        let mut fields: Vec<String> = Vec::with_capacity(width + 1);
        let mut quoted: Vec<bool> = Vec::with_capacity(width + 1);
        let mut pos = 0;
        while pos < b.len() {
            let mut nf = 0;
            let mut lines = 1;
            // One record: fields until an unquoted newline or the end of the data.
            let at_end = loop {
                if nf == fields.len() {
                    fields.push(String::new());
                    quoted.push(false);
                }
                let f = &mut fields[nf];
                f.clear();
                quoted[nf] = false;
                nf += 1;
                let mut in_quotes = false;
                // A field: unquoted runs and quoted runs, as many as it has.
                let end = loop {
                    if in_quotes {
                        let Some(q) = b[pos..].iter().position(|c| *c == quote) else {
                            return Err(bad_copy(self.line, "unterminated CSV quoted field"));
                        };
                        let part = &text[pos..pos + q];
                        lines += part.bytes().filter(|c| *c == b'\n').count();
                        f.push_str(part);
                        pos += q + 1;
                        if b.get(pos) == Some(&quote) {
                            f.push(quote as char);
                            pos += 1;
                        } else {
                            in_quotes = false;
                        }
                        continue;
                    }
                    let run = b[pos..].iter().position(|c| *c == delim || *c == quote || *c == b'\n' || *c == b'\r');
                    let stop = run.map_or(b.len(), |r| pos + r);
                    f.push_str(&text[pos..stop]);
                    pos = stop;
                    match b.get(pos) {
                        None => break None,
                        Some(c) if *c == quote => {
                            in_quotes = true;
                            quoted[nf - 1] = true;
                            pos += 1;
                        }
                        Some(c) if *c == delim => {
                            pos += 1;
                            break Some(false);
                        }
                        Some(_) => {
                            // A newline ends the record (\r\n counts as one).
                            if b[pos] == b'\r' && b.get(pos + 1) == Some(&b'\n') {
                                pos += 1;
                            }
                            pos += 1;
                            break Some(true);
                        }
                    }
                };
                match end {
                    Some(false) => continue,
                    Some(true) => break false,
                    None => break true,
                }
            };
            if nf == 1 && !quoted[0] && fields[0] == "\\." {
                self.ended = true;
                self.line += lines;
                return Ok(());
            }
            if std::mem::take(&mut self.skip_header) {
                self.line += lines;
                if at_end {
                    break;
                }
                continue;
            }
            let null = self.spec.null.as_str();
            let mut record = (0..nf).map(|i| if !quoted[i] && fields[i] == null { None } else { Some(fields[i].as_str()) });
            push_fields(&mut self.builders, &mut self.bytes, self.line, &mut record)?;
            self.rows += 1;
            self.line += lines;
            if at_end {
                break;
            }
        }
        Ok(())
    }

    /// CSV with multi-byte delimiter or quote characters.
    fn parse_csv_chars(&mut self, text: &str) -> Result<()> {
        let (delim, quote) = (self.spec.delimiter, self.spec.quote);
        let null = self.spec.null.clone();
        let mut record: Vec<Option<String>> = Vec::with_capacity(self.spec.columns.len());
        let mut field = String::new();
        let (mut quoted, mut in_quotes, mut any) = (false, false, false);
        let mut lines_in_record = 1;
        let mut chars = text.chars().peekable();
        let finish_field = |field: &mut String, quoted: &mut bool| -> Option<String> {
            let f = std::mem::take(field);
            let was_quoted = std::mem::replace(quoted, false);
            if !was_quoted && f == null {
                None
            } else {
                Some(f)
            }
        };
        while let Some(c) = chars.next() {
            any = true;
            if in_quotes {
                if c == quote {
                    if chars.peek() == Some(&quote) {
                        field.push(quote);
                        chars.next();
                    } else {
                        in_quotes = false;
                    }
                } else {
                    if c == '\n' {
                        lines_in_record += 1;
                    }
                    field.push(c);
                }
                continue;
            }
            if c == quote {
                in_quotes = true;
                quoted = true;
            } else if c == delim {
                record.push(finish_field(&mut field, &mut quoted));
            } else if c == '\n' || c == '\r' {
                if c == '\r' && chars.peek() == Some(&'\n') {
                    chars.next();
                }
                record.push(finish_field(&mut field, &mut quoted));
                self.csv_record(std::mem::take(&mut record))?;
                self.line += lines_in_record;
                lines_in_record = 1;
                any = false;
                if self.ended {
                    return Ok(());
                }
            } else {
                field.push(c);
            }
        }
        if in_quotes {
            return Err(bad_copy(self.line, "unterminated CSV quoted field"));
        }
        if any {
            record.push(finish_field(&mut field, &mut quoted));
            self.csv_record(record)?;
            self.line += lines_in_record;
        }
        Ok(())
    }

    fn csv_record(&mut self, record: Vec<Option<String>>) -> Result<()> {
        // (parse_csv_chars only)
        if record.len() == 1 && record[0].as_deref() == Some("\\.") {
            self.ended = true;
            return Ok(());
        }
        if std::mem::take(&mut self.skip_header) {
            return Ok(());
        }
        // An empty line is a record of one NULL field, as in PostgreSQL.
        self.push_record(&mut record.into_iter())
    }
}

/// Appends one record's fields to the builders (one per column); counts their bytes.
fn push_fields<S: AsRef<str>>(builders: &mut [StringBuilder], bytes: &mut usize, line: usize, fields: &mut dyn Iterator<Item = Option<S>>) -> Result<()> {
    let width = builders.len();
    let mut n = 0;
    for f in fields {
        if n < width {
            match f {
                Some(v) => {
                    let v = v.as_ref();
                    *bytes += v.len();
                    builders[n].append_value(v);
                }
                None => builders[n].append_null(),
            }
        }
        n += 1;
    }
    if n != width {
        // The COPY fails as a whole: the builders' partial row is dropped with them.
        let what = if n < width { "missing data for column" } else { "extra data after last expected column" };
        return Err(bad_copy(line, format!("{what} (expected {width} fields, found {n})")));
    }
    Ok(())
}

/// The end of the last complete CSV record in `data` (after a newline outside quotes).
fn last_csv_record_end(data: &[u8], quote: u8) -> Option<usize> {
    let mut in_quotes = false;
    let mut end = None;
    for (i, b) in data.iter().enumerate() {
        if *b == quote {
            in_quotes = !in_quotes;
        } else if *b == b'\n' && !in_quotes {
            end = Some(i + 1);
        }
    }
    end
}

/// True if `data` ends inside a quoted field.
fn has_open_quote(data: &[u8], quote: u8) -> bool {
    data.iter().filter(|b| **b == quote).count() % 2 == 1
}

#[cfg(test)]
mod tests {
    use arrow::array::Array;

    use super::*;
    use crate::catalog::{ColumnCatalog, RelationKind};

    fn spec(format: CopyFormat, header: bool) -> CopyIn {
        let col = |n: &str| ColumnCatalog { name: n.into(), ty: eddy_common::ColumnType::Text, not_null: false, default: None, hidden: false };
        let table = TableCatalog { schema: "public".into(), ..TableCatalog::unlisted(9, "t", RelationKind::Table, vec![col("a"), col("b")]) };
        let (delimiter, null) = if format == CopyFormat::Csv { (',', String::new()) } else { ('\t', "\\N".to_string()) };
        CopyIn { table: Arc::new(table), columns: vec![0, 1], format, delimiter, null, header, quote: '"' }
    }

    fn values(p: &mut CopyParser) -> Vec<Vec<Option<String>>> {
        let cols = p.take_text().unwrap_or_default();
        let n = cols.first().map(|c| c.len()).unwrap_or(0);
        (0..n).map(|r| cols.iter().map(|c| c.is_valid(r).then(|| c.value(r).to_string())).collect()).collect()
    }

    #[test]
    fn text_format_unescapes_and_recognizes_null() {
        assert_eq!(text_field("a\\tb\\\\c", "\\N").as_deref(), Some("a\tb\\c"));
        assert_eq!(text_field("\\N", "\\N"), None);
        assert_eq!(text_field("\\101", "\\N").as_deref(), Some("A"));
    }

    #[test]
    fn csv_handles_quotes_embedded_newlines_and_null() {
        let mut p = CopyParser::new(spec(CopyFormat::Csv, false));
        p.feed(b"1,\"a,\"\"b\"\"\nc\"\n2,\"\"\n").unwrap();
        assert_eq!(values(&mut p), vec![vec![Some("1".into()), Some("a,\"b\"\nc".into())], vec![Some("2".into()), Some("".into())]]);
        p.feed(b"3,\n").unwrap();
        assert_eq!(values(&mut p), vec![vec![Some("3".into()), None]]);
    }

    #[test]
    fn records_split_across_pieces_of_data_are_joined() {
        let mut p = CopyParser::new(spec(CopyFormat::Csv, true));
        for piece in [&b"a,b\n1,\"x"[..], b"\ny\"\n2", b",z"] {
            p.feed(piece).unwrap();
        }
        p.finish().unwrap();
        assert_eq!(values(&mut p), vec![vec![Some("1".into()), Some("x\ny".into())], vec![Some("2".into()), Some("z".into())]]);
        let mut t = CopyParser::new(spec(CopyFormat::Text, false));
        t.feed("é\t€".as_bytes().split_at(1).0).unwrap();
        t.feed(&"é\t€\n\\.\nignored\t1\n".as_bytes()[1..]).unwrap();
        assert_eq!(values(&mut t), vec![vec![Some("é".into()), Some("€".into())]]);
    }

    #[test]
    fn a_record_with_the_wrong_field_count_names_its_line() {
        let mut p = CopyParser::new(spec(CopyFormat::Text, false));
        let e = p.feed(b"1\t2\n3\n").unwrap_err();
        assert_eq!(e.sqlstate, sqlstate::BAD_COPY_FILE_FORMAT);
        assert!(e.message.contains("line 2"), "{}", e.message);
    }

    #[test]
    fn the_byte_csv_parser_agrees_with_the_char_parser_on_random_input() {
        // Small alphabet so quotes, delimiters, newlines and NULL markers collide often.
        let alphabet = [b'a', b',', b'"', b'\n', b'\r', b'x', b' ', b'\\', b'.'];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..3000 {
            let len = (next() % 24) as usize;
            let text: String = (0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize] as char).collect();
            let header = next() % 4 == 0;
            let run = |bytes: bool| {
                let mut p = CopyParser::new(spec(CopyFormat::Csv, header));
                let r = if bytes { p.parse_csv_bytes(&text) } else { p.parse_csv_chars(&text) };
                let ok = r.is_ok();
                (r.map_err(|e| e.message), if ok { values(&mut p) } else { vec![] }, p.ended, p.line)
            };
            let (fast, slow) = (run(true), run(false));
            assert_eq!(fast.0.is_ok(), slow.0.is_ok(), "{text:?}: {:?} vs {:?}", fast.0, slow.0);
            if fast.0.is_ok() {
                assert_eq!(fast, slow, "{text:?}");
            }
        }
    }

    #[test]
    fn an_unterminated_quote_at_the_end_is_an_error() {
        let mut p = CopyParser::new(spec(CopyFormat::Csv, false));
        p.feed(b"1,\"abc").unwrap();
        assert!(p.finish().is_err());
    }
}
