//! An INSERT's VALUES rows give their `date` and `timestamp` columns PostgreSQL's other date
//! forms (`'Jun 1, 2020 10:00'`, `'2020/06/01'`: `eddy_common::date_text`) in ISO form, and a
//! `timestamp` column's text without its zone (which PostgreSQL ignores there). DataFusion
//! casts VALUES literals to the target's types while planning, before the analyzer rule that
//! reads those forms in other casts runs.

use datafusion::sql::sqlparser::ast::{Expr, SetExpr, Statement, TableObject, Value};
use eddy_common::ColumnType;

use crate::frontend::names::{normalize_ident, resolve_name};
use crate::frontend::session::Session;

impl Session {
    /// Rewrites `stmt`'s date and timestamp literals if it is an INSERT of VALUES.
    pub(crate) fn insert_date_literals(&self, stmt: &mut Statement) {
        let Statement::Insert(ins) = stmt else { return };
        let TableObject::TableName(name) = &ins.table else { return };
        let Some(SetExpr::Values(values)) = ins.source.as_mut().map(|q| q.body.as_mut()) else { return };
        let Ok((schema, rel)) = resolve_name(self, name) else { return };
        let catalog = self.engine.catalog();
        let Some(table) = catalog.table(&schema, &rel) else { return };
        let visible: Vec<_> = table.columns.iter().filter(|c| !c.hidden).collect();
        let targets: Vec<Option<&ColumnType>> = if ins.columns.is_empty() {
            visible.iter().map(|c| Some(&c.ty)).collect()
        } else {
            ins.columns
                .iter()
                .map(|n| {
                    let n = normalize_ident(&n.to_string());
                    visible.iter().find(|c| c.name == n).map(|c| &c.ty)
                })
                .collect()
        };
        for row in &mut values.rows {
            for (cell, ty) in row.content.iter_mut().zip(&targets) {
                let (date_only, naive) = match ty {
                    Some(ColumnType::Date) => (true, false),
                    Some(ColumnType::Timestamp) => (false, true),
                    Some(ColumnType::Timestamptz) => (false, false),
                    _ => continue,
                };
                if let Expr::Value(v) = cell {
                    if let Value::SingleQuotedString(text) = &mut v.value {
                        if let Some(iso) = eddy_common::date_text::iso_date_text(text, date_only) {
                            *text = iso;
                        }
                        // A timestamp without time zone ignores a zone in its text.
                        if let Some(unzoned) = naive.then(|| eddy_common::date_text::without_zone(text)).flatten() {
                            *text = unzoned;
                        }
                    }
                }
            }
        }
    }
}
