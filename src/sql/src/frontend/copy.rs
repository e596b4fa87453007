//! `COPY ... FROM STDIN`: the statement's options. The data itself is parsed by
//! [`crate::frontend::copy_in`].

use datafusion::sql::sqlparser::ast::{CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget};
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, Result};

use crate::frontend::copy_in::{CopyFormat, CopyIn};
use crate::frontend::names::{normalize_ident, resolve_name};
use crate::frontend::output::Output;
use crate::frontend::session::Session;

impl Session {
    pub(crate) fn copy(
        &mut self,
        source: &CopySource,
        to: bool,
        target: &CopyTarget,
        options: &[CopyOption],
        legacy: &[CopyLegacyOption],
    ) -> Result<Output> {
        if to || !matches!(target, CopyTarget::Stdin) {
            return Err(not_supported!("only COPY ... FROM STDIN is supported"));
        }
        let CopySource::Table { table_name, columns } = source else {
            return Err(not_supported!("COPY (query) FROM is not valid"));
        };
        let (schema, name) = resolve_name(self, table_name)?;
        let table = self
            .engine
            .catalog()
            .table(&schema, &name)
            .cloned()
            .ok_or_else(|| user_err!(sqlstate::UNDEFINED_TABLE, "relation \"{name}\" does not exist"))?;
        let cols = if columns.is_empty() {
            (0..table.columns.len()).collect()
        } else {
            columns
                .iter()
                .map(|c| {
                    let n = normalize_ident(&c.to_string());
                    table.columns.iter().position(|tc| tc.name == n).ok_or_else(|| {
                        user_err!(sqlstate::UNDEFINED_COLUMN, "column \"{n}\" of relation \"{name}\" does not exist")
                    })
                })
                .collect::<Result<Vec<_>>>()?
        };
        let mut copy = CopyIn { table, columns: cols, format: CopyFormat::Text, delimiter: '\t', null: "\\N".into(), header: false, quote: '"' };
        let mut delimiter = None;
        let mut null = None;
        for o in options {
            match o {
                CopyOption::Format(f) => match f.value.to_ascii_lowercase().as_str() {
                    "csv" => copy.format = CopyFormat::Csv,
                    "text" => copy.format = CopyFormat::Text,
                    other => return Err(not_supported!("COPY format \"{other}\" is not supported")),
                },
                CopyOption::Delimiter(c) => delimiter = Some(*c),
                CopyOption::Null(s) => null = Some(s.clone()),
                CopyOption::Header(h) => copy.header = *h,
                CopyOption::Quote(q) => copy.quote = *q,
                _ => {}
            }
        }
        for o in legacy {
            match o {
                CopyLegacyOption::Csv(csv_opts) => {
                    copy.format = CopyFormat::Csv;
                    for c in csv_opts {
                        match c {
                            CopyLegacyCsvOption::Header => copy.header = true,
                            CopyLegacyCsvOption::Quote(q) => copy.quote = *q,
                            _ => {}
                        }
                    }
                }
                CopyLegacyOption::Delimiter(c) => delimiter = Some(*c),
                CopyLegacyOption::Null(s) => null = Some(s.clone()),
                CopyLegacyOption::Header => copy.header = true,
                _ => {}
            }
        }
        if copy.format == CopyFormat::Csv {
            copy.delimiter = ',';
            copy.null = String::new();
        }
        if let Some(d) = delimiter {
            copy.delimiter = d;
        }
        if let Some(n) = null {
            copy.null = n;
        }
        Ok(Output::CopyIn(copy))
    }
}

