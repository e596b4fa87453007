//! `serial` / `bigserial` / `smallserial` and identity columns: a per-column counter.
//!
//! The column's DEFAULT is PostgreSQL's `nextval('<table>_<column>_seq'::regclass)` (so clients
//! reflecting the catalog see an auto-increment column); the planner evaluates it with
//! `eddy_nextval(table id, column index)` over these counters. Counters live in memory: at startup each resumes
//! after the largest value in its column, and an INSERT of explicit values moves it past them,
//! so a generated value never overwrites an existing row. Values are unique and increasing
//! but, as in PostgreSQL, not gap-free.

use std::collections::HashMap;

use arrow::array::{Array, Int64Array};
use arrow::datatypes::DataType;
use parking_lot::Mutex;

/// `serial` spellings and the integer type they stand for.
pub fn serial_type(sql_type: &str) -> Option<eddy_common::ColumnType> {
    use eddy_common::ColumnType as C;
    Some(match sql_type.trim().to_ascii_lowercase().as_str() {
        "serial" | "serial4" => C::Int4,
        "bigserial" | "serial8" => C::Int8,
        "smallserial" | "serial2" => C::Int2,
        _ => return None,
    })
}

/// The DEFAULT text of a serial column, as PostgreSQL shows it.
pub fn serial_default(table: &str, column: &str) -> String {
    format!("nextval('{}'::regclass)", format!("{table}_{column}_seq").replace('\'', "''"))
}

/// True for a DEFAULT that draws from a sequence.
pub fn is_serial_default(default: &str) -> bool {
    default.trim_start().to_ascii_lowercase().starts_with("nextval(")
}

/// Next values of every serial column, by (table id, column index).
#[derive(Debug, Default)]
pub struct Sequences {
    next: Mutex<HashMap<(u32, usize), i64>>,
}

impl Sequences {
    /// Reserves `n` consecutive values.
    pub fn take(&self, table: u32, column: usize, n: usize) -> std::ops::Range<i64> {
        let mut next = self.next.lock();
        let v = next.entry((table, column)).or_insert(1);
        let start = *v;
        *v += n as i64;
        start..start + n as i64
    }

    /// Makes the next value larger than `used`.
    pub fn advance_past(&self, table: u32, column: usize, used: i64) {
        let mut next = self.next.lock();
        let v = next.entry((table, column)).or_insert(1);
        *v = (*v).max(used.saturating_add(1));
    }

    /// Forgets a dropped table's counters.
    pub fn drop_table(&self, table: u32) {
        self.next.lock().retain(|(t, _), _| *t != table);
    }
}

/// The largest value of an integer column (`None` when empty or all NULL).
pub fn column_max(col: &dyn Array) -> Option<i64> {
    // Only non-integer columns fail to cast (overflow yields NULL); they have no serial maximum.
    let as_i64 = arrow::compute::cast(&arrow::array::make_array(col.to_data()), &DataType::Int64).ok()?;
    arrow::compute::max(as_i64.as_any().downcast_ref::<Int64Array>()?)
}
