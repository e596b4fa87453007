//! The stored form of a group's state: row count, accumulators, last emitted row.

use std::collections::BTreeMap;

use eddy_common::{internal_err, Result};

use super::{Acc, CoMoments, DdSum, Fsum, Group, Multiset};

fn put_dd_sum(out: &mut Vec<u8>, s: &DdSum) {
    for f in [s.main.hi, s.main.lo, s.err] {
        out.extend_from_slice(&f.to_be_bytes());
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

/// Heap bytes of a `BTreeMap` node of a multiset (eleven keys and counts, links).
const BTREE_NODE_BYTES: usize = 400;

/// Bytes an allocator spends on one small allocation beyond its length.
const ALLOCATION_BYTES: usize = 16;

/// Estimated bytes a group takes in memory, decoded (its cache entry's size).
pub(super) fn group_bytes(g: &Group) -> usize {
    let accs: usize = g
        .accs
        .iter()
        .map(|a| match a {
            Acc::Values(m) if !m.is_empty() => {
                BTREE_NODE_BYTES * (m.len() / 6 + 1) + m.keys().map(|k| k.capacity() + ALLOCATION_BYTES).sum::<usize>()
            }
            Acc::Bits { ones, .. } => ones.capacity() * 8 + ALLOCATION_BYTES,
            _ => 0,
        })
        .sum();
    std::mem::size_of::<Group>()
        + g.accs.capacity() * std::mem::size_of::<Acc>()
        + ALLOCATION_BYTES
        + g.emitted.as_ref().map_or(0, |e| e.capacity() + ALLOCATION_BYTES)
        + accs
}

/// Estimated bytes of a fresh group once its first row is in: [`group_bytes`] with one value
/// in each multiset and an emitted row of `row_bytes`.
pub(super) fn fresh_group_bytes(g: &Group, row_bytes: usize) -> usize {
    let multisets = g.accs.iter().filter(|a| matches!(a, Acc::Values(_))).count();
    group_bytes(g) + multisets * (BTREE_NODE_BYTES + 2 * ALLOCATION_BYTES) + row_bytes + ALLOCATION_BYTES
}

pub(super) fn encode_group(g: &Group) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&g.rows.to_be_bytes());
    match &g.emitted {
        Some(e) => {
            out.push(1);
            put_bytes(&mut out, e);
        }
        None => out.push(0),
    }
    out.extend_from_slice(&(g.accs.len() as u32).to_be_bytes());
    for a in &g.accs {
        match a {
            Acc::Count(c) => {
                out.push(0);
                out.extend_from_slice(&c.to_be_bytes());
            }
            Acc::SumInt { sum, n } => {
                out.push(1);
                out.extend_from_slice(&sum.to_be_bytes());
                out.extend_from_slice(&n.to_be_bytes());
            }
            Acc::SumFloat { sum, n, nan, pos_inf, neg_inf } => {
                out.push(10);
                out.extend_from_slice(&sum.hi.to_be_bytes());
                out.extend_from_slice(&sum.lo.to_be_bytes());
                for c in [n, nan, pos_inf, neg_inf] {
                    out.extend_from_slice(&c.to_be_bytes());
                }
            }
            // The values are rows of their own (see `multiset`).
            Acc::Values(_) => out.push(13),
            Acc::Moments { n, shift, sum, sumsq } => {
                out.push(14);
                out.extend_from_slice(&n.to_be_bytes());
                out.extend_from_slice(&shift.to_be_bytes());
                for s in [sum, sumsq] {
                    put_dd_sum(&mut out, s);
                }
            }
            Acc::Bits { n, ones } => {
                out.push(7);
                out.extend_from_slice(&n.to_be_bytes());
                for c in ones {
                    out.extend_from_slice(&c.to_be_bytes());
                }
            }
            Acc::CoMoments(CoMoments { n, kx, ky, sx, sy, sxx, syy, sxy }) => {
                out.push(12);
                out.extend_from_slice(&n.to_be_bytes());
                for f in [kx, ky] {
                    out.extend_from_slice(&f.to_be_bytes());
                }
                for s in [sx, sy, sxx, syy, sxy] {
                    put_dd_sum(&mut out, s);
                }
            }
            Acc::SumInterval(s) => {
                out.push(8);
                out.extend_from_slice(&s.months.to_be_bytes());
                out.extend_from_slice(&s.days.to_be_bytes());
                out.extend_from_slice(&s.nanos.to_be_bytes());
                out.extend_from_slice(&s.n.to_be_bytes());
            }
            Acc::Bools { trues, falses } => {
                out.push(4);
                out.extend_from_slice(&trues.to_be_bytes());
                out.extend_from_slice(&falses.to_be_bytes());
            }
        }
    }
    out
}

/// Reads the encoding of [`encode_group`].
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.b.len() < n {
            return Err(internal_err!("truncated aggregation state"));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().map_err(|_| internal_err!("bad u32"))?))
    }
    fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_be_bytes(self.take(8)?.try_into().map_err(|_| internal_err!("bad i64"))?))
    }
    fn bytes(&mut self) -> Result<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
}

pub(super) fn decode_group(b: &[u8]) -> Result<Group> {
    let mut r = Reader { b };
    let rows = r.i64()?;
    let emitted = if r.u8()? == 1 { Some(r.bytes()?) } else { None };
    let n = r.u32()?;
    let mut accs = Vec::with_capacity(n as usize);
    for _ in 0..n {
        accs.push(match r.u8()? {
            0 => Acc::Count(r.i64()?),
            1 => {
                let sum = i128::from_be_bytes(r.take(16)?.try_into().map_err(|_| internal_err!("bad i128"))?);
                Acc::SumInt { sum, n: r.i64()? }
            }
            // Written before NaN and infinities were counted apart.
            2 => {
                let sum = f64::from_be_bytes(r.take(8)?.try_into().map_err(|_| internal_err!("bad f64"))?);
                Acc::SumFloat { sum: Fsum::new(sum, 0.0), n: r.i64()?, nan: 0, pos_inf: 0, neg_inf: 0 }
            }
            // Tags 6 and 5: written before the sums were compensated.
            6 => {
                let n = r.i64()?;
                let mut f = || -> Result<f64> { Ok(f64::from_be_bytes(r.take(8)?.try_into().map_err(|_| internal_err!("bad f64"))?)) };
                let shift = f()?;
                let mut s = || -> Result<DdSum> { Ok(DdSum { main: Fsum::new(f()?, 0.0), err: 0.0 }) };
                Acc::Moments { n, shift, sum: s()?, sumsq: s()? }
            }
            11 => {
                let n = r.i64()?;
                let mut f = || -> Result<f64> { Ok(f64::from_be_bytes(r.take(8)?.try_into().map_err(|_| internal_err!("bad f64"))?)) };
                let shift = f()?;
                let mut s = || -> Result<DdSum> { Ok(DdSum { main: Fsum::new(f()?, f()?), err: 0.0 }) };
                Acc::Moments { n, shift, sum: s()?, sumsq: s()? }
            }
            14 => {
                let n = r.i64()?;
                let mut f = || -> Result<f64> { Ok(f64::from_be_bytes(r.take(8)?.try_into().map_err(|_| internal_err!("bad f64"))?)) };
                let shift = f()?;
                let mut s = || -> Result<DdSum> { Ok(DdSum { main: Fsum::new(f()?, f()?), err: f()? }) };
                Acc::Moments { n, shift, sum: s()?, sumsq: s()? }
            }
            5 => {
                let sum = f64::from_be_bytes(r.take(8)?.try_into().map_err(|_| internal_err!("bad f64"))?);
                Acc::SumFloat { sum: Fsum::new(sum, 0.0), n: r.i64()?, nan: r.i64()?, pos_inf: r.i64()?, neg_inf: r.i64()? }
            }
            10 => {
                let mut f = || -> Result<f64> { Ok(f64::from_be_bytes(r.take(8)?.try_into().map_err(|_| internal_err!("bad f64"))?)) };
                let sum = Fsum::new(f()?, f()?);
                Acc::SumFloat { sum, n: r.i64()?, nan: r.i64()?, pos_inf: r.i64()?, neg_inf: r.i64()? }
            }
            // Written when a multiset was stored inline: its values are written as rows at the
            // group's next write.
            3 => {
                let m = r.u32()?;
                let mut map = BTreeMap::new();
                for _ in 0..m {
                    let k = r.bytes()?;
                    map.insert(k, r.i64()?);
                }
                Acc::Values(Multiset::unwritten(map))
            }
            // Filled from the group's value rows by the loader.
            13 => Acc::Values(Multiset::default()),
            4 => Acc::Bools { trues: r.i64()?, falses: r.i64()? },
            9 => {
                let n = r.i64()?;
                let mut f = || -> Result<f64> { Ok(f64::from_be_bytes(r.take(8)?.try_into().map_err(|_| internal_err!("bad f64"))?)) };
                // Written before the sums were double-doubles.
                let (kx, ky) = (f()?, f()?);
                let mut s = || -> Result<DdSum> { Ok(DdSum { main: Fsum::new(f()?, 0.0), err: 0.0 }) };
                Acc::CoMoments(CoMoments { n, kx, ky, sx: s()?, sy: s()?, sxx: s()?, syy: s()?, sxy: s()? })
            }
            12 => {
                let n = r.i64()?;
                let mut f = || -> Result<f64> { Ok(f64::from_be_bytes(r.take(8)?.try_into().map_err(|_| internal_err!("bad f64"))?)) };
                let (kx, ky) = (f()?, f()?);
                let mut s = || -> Result<DdSum> { Ok(DdSum { main: Fsum::new(f()?, f()?), err: f()? }) };
                Acc::CoMoments(CoMoments { n, kx, ky, sx: s()?, sy: s()?, sxx: s()?, syy: s()?, sxy: s()? })
            }
            7 => {
                let n = r.i64()?;
                let ones = (0..64).map(|_| r.i64()).collect::<Result<Vec<_>>>()?;
                Acc::Bits { n, ones }
            }
            8 => {
                let (months, days) = (r.i64()?, r.i64()?);
                let nanos = i128::from_be_bytes(r.take(16)?.try_into().map_err(|_| internal_err!("bad i128"))?);
                Acc::SumInterval(eddy_common::interval::IntervalSums { months, days, nanos, n: r.i64()? })
            }
            t => return Err(internal_err!("unknown accumulator tag {t}")),
        });
    }
    Ok(Group { rows, accs, emitted })
}
