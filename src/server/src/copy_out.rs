//! `COPY ... TO STDOUT`: rows encoded as PostgreSQL's text or CSV COPY format, one CopyData
//! message per row, as the statement produces them (a `COPY (SUBSCRIBE ...)` never ends).

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use bytes::Bytes;
use datafusion::execution::SendableRecordBatchStream;
use eddy_sql::frontend::copy_in::{CopyFormat, CopyOptions};
use futures::StreamExt;
use pgwire::api::results::CopyResponse;
use pgwire::error::PgWireResult;
use pgwire::messages::copy::CopyData;

use crate::encode::write_text;
use crate::respond::to_pg;

/// The COPY OUT response for `stream`, with its header line if asked for. The header travels
/// in the first row's CopyData (the sender counts CopyData messages as rows); with no rows it
/// goes alone.
pub(crate) fn copy_out_response(schema: SchemaRef, stream: SendableRecordBatchStream, format: CopyOptions, sql: String) -> CopyResponse {
    let columns = schema.fields().len();
    let header = format.header.then(|| {
        let names: Vec<String> = schema.fields().iter().map(|f| field_text(f.name(), &format)).collect();
        format!("{}\n", names.join(&format.delimiter.to_string()))
    });
    let header = Arc::new(parking_lot::Mutex::new(header));
    let first = header.clone();
    let rows = crate::panics::guard_stream(stream).flat_map(move |item| {
        let mut out: Vec<PgWireResult<CopyData>> = match item {
            Err(p) => vec![Err(to_pg(crate::panics::report(p, &sql)))],
            Ok(Err(e)) => vec![Err(to_pg(e.into()))],
            Ok(Ok(batch)) => encode(&batch, &format),
        };
        if let Some(Ok(row)) = out.first_mut() {
            if let Some(h) = first.lock().take() {
                let mut data = h.into_bytes();
                data.extend_from_slice(&row.data);
                *row = CopyData::new(Bytes::from(data));
            }
        }
        futures::stream::iter(out)
    });
    let alone = futures::stream::once(async move { header.lock().take() }).filter_map(|h| async move { h.map(|h| Ok(CopyData::new(Bytes::from(h)))) });
    CopyResponse::new(0, columns, rows.chain(alone))
}

fn encode(batch: &RecordBatch, format: &CopyOptions) -> Vec<PgWireResult<CopyData>> {
    let schema = batch.schema();
    let mut out = Vec::with_capacity(batch.num_rows());
    let mut value = String::new();
    for r in 0..batch.num_rows() {
        let mut line = String::new();
        for (c, field) in schema.fields().iter().enumerate() {
            if c > 0 {
                line.push(format.delimiter);
            }
            value.clear();
            match write_text(batch.column(c), r, field, &mut value) {
                Ok(true) => line.push_str(&field_text(&value, format)),
                Ok(false) => line.push_str(&format.null),
                Err(e) => return vec![Err(to_pg(e))],
            }
        }
        line.push('\n');
        out.push(Ok(CopyData::new(Bytes::from(line))));
    }
    out
}

/// One non-NULL value as the format writes it.
fn field_text(v: &str, format: &CopyOptions) -> String {
    match format.format {
        CopyFormat::Text => {
            let mut s = String::with_capacity(v.len());
            for ch in v.chars() {
                match ch {
                    '\\' => s.push_str("\\\\"),
                    '\n' => s.push_str("\\n"),
                    '\r' => s.push_str("\\r"),
                    '\t' => s.push_str("\\t"),
                    c if c == format.delimiter => {
                        s.push('\\');
                        s.push(c);
                    }
                    c => s.push(c),
                }
            }
            s
        }
        CopyFormat::Csv => {
            let q = format.quote;
            let needs = v.is_empty() && format.null.is_empty()
                || v == format.null
                || v.contains([format.delimiter, q, '\n', '\r'])
                || v.starts_with("\\.");
            if !needs {
                return v.to_string();
            }
            let mut s = String::with_capacity(v.len() + 2);
            s.push(q);
            for ch in v.chars() {
                if ch == q {
                    s.push(q);
                }
                s.push(ch);
            }
            s.push(q);
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(format: CopyFormat) -> CopyOptions {
        let csv = format == CopyFormat::Csv;
        CopyOptions { format, delimiter: if csv { ',' } else { '\t' }, null: if csv { String::new() } else { "\\N".into() }, header: false, quote: '"' }
    }

    #[test]
    fn values_are_escaped_as_postgres_writes_them() {
        let text = opts(CopyFormat::Text);
        assert_eq!(field_text("a\tb\\c\nd", &text), "a\\tb\\\\c\\nd");
        let csv = opts(CopyFormat::Csv);
        assert_eq!(field_text("plain", &csv), "plain");
        assert_eq!(field_text("a,b", &csv), "\"a,b\"");
        assert_eq!(field_text("say \"hi\"", &csv), "\"say \"\"hi\"\"\"");
        assert_eq!(field_text("", &csv), "\"\"");
        assert_eq!(field_text("line\nbreak", &csv), "\"line\nbreak\"");
    }
}
