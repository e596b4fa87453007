//! `connector = 'datagen'` (RisingWave's options): rows of sequence or random fields at a rate.
//!
//! * `datagen.rows.per.second` (default 10, as in RisingWave) across all splits;
//!   `datagen.split.num` (default 1). Split `k` of `n` generates rows `k, k + n, k + 2n, ...`.
//! * Per column `fields.<col>.kind = 'sequence' | 'random'` (default random):
//!   - sequence (integers, floats, numerics, strings of digits): `start` (default 0) and `end`
//!     (default unbounded); row `r` has `start + r`; a split ends after `end`.
//!   - random integers / floats / numerics: `min` (default 0) and `max` (default 32767);
//!     strings: `length` (default 10) letters; booleans; dates; timestamps within
//!     `max_past` (default 1 day) before the source's creation time; `seed` (default 0).
//!     Values are a function of seed, column and row number, so a resumed split repeats
//!     nothing and skips nothing.

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, RecordBatch, StringBuilder};
use arrow::datatypes::{DataType, SchemaRef, TimeUnit};
use eddy_common::error::sqlstate;
use eddy_common::{not_supported, user_err, Result};
use eddy_stream::SplitReader;
use tokio::time::Instant;

use crate::options::Options;
use crate::random::{hash_name, Rng};
use crate::{decode_u64, Seekable};

/// Option set at creation (internal): the creation time in microseconds since the epoch, the
/// base of generated timestamps, so that a replay generates the same values.
pub const BASE_TIME_OPTION: &str = "_eddy.base_time_us";

/// How one column is generated.
#[derive(Debug, Clone)]
enum Field {
    /// `start + row` (its `end` bounds the split's rows).
    Sequence { start: i64 },
    /// Uniform in `[min, max]`.
    RandomNumber { min: f64, max: f64, seed: u64 },
    /// `length` letters.
    RandomString { length: usize, seed: u64 },
    RandomBool { seed: u64 },
    /// Microseconds in `[base - max_past, base]`.
    RandomTime { base: i64, max_past_us: i64, seed: u64 },
}

/// The generator of one split.
struct DatagenSplit {
    /// Columns to produce, in order, with their types.
    schema: SchemaRef,
    fields: Vec<Field>,
    /// Split `index` of `count`.
    index: u64,
    count: u64,
    /// Rows this split generated (its position).
    local: u64,
    /// Rows per second for this split (`None`: unlimited).
    rate: Option<f64>,
    /// Rate accounting: when this reader started and rows since then.
    since: Instant,
    since_rows: u64,
    /// Last row number (global) a sequence allows.
    last_row: Option<u64>,
}

/// The splits of a datagen source.
pub(crate) fn splits(options: &Options, schema: &SchemaRef) -> Result<Vec<Box<dyn Seekable>>> {
    let count: u64 = options.number("datagen.split.num", 1u64)?.max(1);
    let rps: f64 = options.number("datagen.rows.per.second", 10.0)?;
    let rate = (rps > 0.0).then_some(rps / count as f64);
    let base: i64 = options.number(BASE_TIME_OPTION, 0i64)?;
    let mut fields = Vec::new();
    let mut last_row: Option<u64> = None;
    for f in schema.fields() {
        let opt = |k: &str| format!("fields.{}.{k}", f.name());
        let kind = options.get(&opt("kind")).unwrap_or("random").to_ascii_lowercase();
        let seed: u64 = options.number(&opt("seed"), 0u64)? ^ hash_name(f.name());
        let field = match (kind.as_str(), f.data_type()) {
            ("sequence", DataType::Int16 | DataType::Int32 | DataType::Int64 | DataType::Float32 | DataType::Float64 | DataType::Decimal128(..) | DataType::Utf8) => {
                let start: i64 = options.number(&opt("start"), 0i64)?;
                let end: Option<i64> = options.get(&opt("end")).map(|_| options.number(&opt("end"), 0i64)).transpose()?;
                if let Some(e) = end {
                    if e < start {
                        return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "fields.{}.end is before its start", f.name()));
                    }
                    let rows = (e - start) as u64;
                    last_row = Some(last_row.map_or(rows, |l| l.min(rows)));
                }
                Field::Sequence { start }
            }
            ("sequence", t) => return Err(not_supported!("datagen: a sequence of type {t} (column {})", f.name())),
            ("random", DataType::Int16 | DataType::Int32 | DataType::Int64 | DataType::Float32 | DataType::Float64 | DataType::Decimal128(..)) => {
                let min: f64 = options.number(&opt("min"), 0.0)?;
                let max: f64 = options.number(&opt("max"), 32767.0)?;
                if max < min {
                    return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "fields.{}.max is below its min", f.name()));
                }
                Field::RandomNumber { min, max, seed }
            }
            ("random", DataType::Utf8) => Field::RandomString { length: options.number(&opt("length"), 10usize)?.min(1 << 20), seed },
            ("random", DataType::Boolean) => Field::RandomBool { seed },
            ("random", DataType::Timestamp(TimeUnit::Microsecond, _) | DataType::Date32) => {
                let past = options.duration(&opt("max_past"), Duration::from_secs(86400))?;
                Field::RandomTime { base, max_past_us: past.as_micros().min(i64::MAX as u128) as i64, seed }
            }
            ("random", t) => return Err(not_supported!("datagen: random values of type {t} (column {})", f.name())),
            (k, _) => return Err(user_err!(sqlstate::INVALID_PARAMETER_VALUE, "fields.{}.kind must be 'sequence' or 'random', not '{k}'", f.name())),
        };
        fields.push(field);
    }
    Ok((0..count)
        .map(|index| {
            Box::new(DatagenSplit {
                schema: schema.clone(),
                fields: fields.clone(),
                index,
                count,
                local: 0,
                rate,
                since: Instant::now(),
                since_rows: 0,
                last_row,
            }) as Box<dyn Seekable>
        })
        .collect())
}

impl DatagenSplit {
    /// Global number of this split's `k`-th row.
    fn row(&self, k: u64) -> u64 {
        self.index + k * self.count
    }

    fn column(&self, f: &Field, dt: &DataType, rows: &[u64]) -> Result<ArrayRef> {
        let col: ArrayRef = match f {
            Field::Sequence { start, .. } => match dt {
                DataType::Utf8 => {
                    let mut b = StringBuilder::new();
                    for r in rows {
                        b.append_value((start + *r as i64).to_string());
                    }
                    Arc::new(b.finish())
                }
                _ => {
                    let mut b = Int64Builder::with_capacity(rows.len());
                    b.extend(rows.iter().map(|r| Some(start + *r as i64)));
                    Arc::new(b.finish())
                }
            },
            Field::RandomNumber { min, max, seed } => {
                let integral = matches!(dt, DataType::Int16 | DataType::Int32 | DataType::Int64);
                if integral {
                    let (lo, hi) = (*min as i64, *max as i64);
                    let span = (hi - lo) as u64 + 1;
                    let mut b = Int64Builder::with_capacity(rows.len());
                    b.extend(rows.iter().map(|r| Some(lo + Rng::new(*seed, *r).below(span) as i64)));
                    Arc::new(b.finish())
                } else {
                    let mut b = Float64Builder::with_capacity(rows.len());
                    b.extend(rows.iter().map(|r| Some(min + Rng::new(*seed, *r).unit() * (max - min))));
                    Arc::new(b.finish())
                }
            }
            Field::RandomString { length, seed } => {
                let mut b = StringBuilder::new();
                let mut s = String::new();
                for r in rows {
                    s.clear();
                    Rng::new(*seed, *r).letters(*length, &mut s);
                    b.append_value(&s);
                }
                Arc::new(b.finish())
            }
            Field::RandomBool { seed } => {
                let mut b = BooleanBuilder::with_capacity(rows.len());
                b.extend(rows.iter().map(|r| Some(Rng::new(*seed, *r).below(2) == 1)));
                Arc::new(b.finish())
            }
            Field::RandomTime { base, max_past_us, seed } => {
                let mut b = Int64Builder::with_capacity(rows.len());
                b.extend(rows.iter().map(|r| Some(base - Rng::new(*seed, *r).below(*max_past_us as u64 + 1) as i64)));
                let us = b.finish();
                let ts = arrow::compute::cast(&us, &DataType::Timestamp(TimeUnit::Microsecond, None))?;
                return Ok(arrow::compute::cast(&ts, dt)?);
            }
        };
        eddy_common::cast::cast_checked(&col, dt)
    }
}

impl SplitReader for DatagenSplit {
    fn next_batch(&mut self, max_rows: usize) -> Result<Option<RecordBatch>> {
        let mut n = max_rows as u64;
        if let Some(rate) = self.rate {
            let due = (self.since.elapsed().as_secs_f64() * rate) as u64 + 1;
            n = n.min(due.saturating_sub(self.since_rows).max(1));
        }
        if let Some(last) = self.last_row {
            let next = self.row(self.local);
            let left = if next > last { 0 } else { (last - next) / self.count + 1 };
            n = n.min(left);
            if n == 0 {
                return Ok(None);
            }
        }
        let rows: Vec<u64> = (0..n).map(|k| self.row(self.local + k)).collect();
        let columns = self
            .fields
            .iter()
            .zip(self.schema.fields())
            .map(|(f, field)| self.column(f, field.data_type(), &rows))
            .collect::<Result<Vec<_>>>()?;
        self.local += n;
        self.since_rows += n;
        Ok(Some(RecordBatch::try_new(self.schema.clone(), columns)?))
    }

    fn position(&self) -> Vec<u8> {
        self.local.to_be_bytes().to_vec()
    }

    fn ready_at(&self) -> Option<Instant> {
        let rate = self.rate?;
        Some(self.since + Duration::from_secs_f64(self.since_rows as f64 / rate))
    }

    /// Rows still to come up to the end of a bounded sequence, or those due by now at the
    /// rate (`None`: an endless stream read as fast as it can be).
    fn backlog(&self) -> Option<u64> {
        if let Some(last) = self.last_row {
            let next = self.row(self.local);
            return Some(if next > last { 0 } else { (last - next) / self.count + 1 });
        }
        let rate = self.rate?;
        let due = (self.since.elapsed().as_secs_f64() * rate) as u64;
        Some(due.saturating_sub(self.since_rows))
    }
}

impl Seekable for DatagenSplit {
    fn seek(&mut self, position: &[u8]) -> Result<()> {
        self.local = decode_u64(position)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{Field as ArrowField, Schema};

    use super::*;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            ArrowField::new("id", DataType::Int64, true),
            ArrowField::new("v", DataType::Int32, true),
            ArrowField::new("s", DataType::Utf8, true),
        ]))
    }

    fn opts(pairs: &[(&str, &str)]) -> Options {
        Options::new(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn a_sequence_ends_and_a_resumed_split_continues_exactly() {
        let o = opts(&[("datagen.rows.per.second", "0"), ("fields.id.kind", "sequence"), ("fields.id.start", "1"), ("fields.id.end", "10"), ("fields.v.max", "5")]);
        let mut s = splits(&o, &schema()).unwrap().pop().unwrap();
        assert_eq!(s.backlog(), Some(10));
        let a = s.next_batch(4).unwrap().unwrap();
        assert_eq!(s.backlog(), Some(6));
        let pos = s.position();
        let b = s.next_batch(100).unwrap().unwrap();
        assert_eq!(a.num_rows() + b.num_rows(), 10);
        assert_eq!(s.backlog(), Some(0));
        assert!(s.next_batch(100).unwrap().is_none());
        let mut again = splits(&o, &schema()).unwrap().pop().unwrap();
        again.seek(&pos).unwrap();
        assert_eq!(again.next_batch(100).unwrap().unwrap(), b, "the same rows after the same position");
    }

    #[test]
    fn splits_share_the_rows_between_them() {
        let o = opts(&[("datagen.rows.per.second", "0"), ("datagen.split.num", "3"), ("fields.id.kind", "sequence"), ("fields.id.end", "9")]);
        let mut ids = Vec::new();
        for mut s in splits(&o, &schema()).unwrap() {
            while let Some(b) = s.next_batch(2).unwrap() {
                let c = b.column(0).as_any().downcast_ref::<arrow::array::Int64Array>().unwrap().clone();
                ids.extend(c.values().iter().copied());
            }
        }
        ids.sort();
        assert_eq!(ids, (0..=9).collect::<Vec<i64>>());
    }

    #[test]
    fn bad_options_name_the_field() {
        let e = splits(&opts(&[("fields.v.kind", "zigzag")]), &schema()).err().unwrap();
        assert!(e.message.contains("fields.v.kind"), "{}", e.message);
        let e = splits(&opts(&[("fields.v.min", "9"), ("fields.v.max", "1")]), &schema()).err().unwrap();
        assert!(e.message.contains("fields.v.max"), "{}", e.message);
    }
}
