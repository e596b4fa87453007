//! The two-variable statistics of `(y, x)` (`covar_*`, `regr_*`): which one, and the
//! retractable sums they are computed from. `corr` and `regr_r2` never reach a view: the
//! PostgreSQL rewrite (`pg/rewrite.rs`, `regression`) computes them from `regr_sxx/syy/sxy`.

use super::{DdSum, Fsum};

/// Which two-variable statistic (PostgreSQL's names and NULL rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegrFn {
    CovarPop,
    CovarSamp,
    Count,
    AvgX,
    AvgY,
    Sxx,
    Syy,
    Sxy,
    Slope,
    Intercept,
}

impl RegrFn {
    /// The function of that name (`covar_pop`, `regr_slope`, ...).
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "covar_pop" => RegrFn::CovarPop,
            "covar_samp" | "covar" => RegrFn::CovarSamp,
            "regr_count" => RegrFn::Count,
            "regr_avgx" => RegrFn::AvgX,
            "regr_avgy" => RegrFn::AvgY,
            "regr_sxx" => RegrFn::Sxx,
            "regr_syy" => RegrFn::Syy,
            "regr_sxy" => RegrFn::Sxy,
            "regr_slope" => RegrFn::Slope,
            "regr_intercept" => RegrFn::Intercept,
            _ => return None,
        })
    }

}

/// Sums of `x - kx`, `y - ky`, their squares and their product over the rows where both are
/// non-null, `kx`/`ky` being the first pair since the group was last empty (keeps the
/// statistics accurate for large values). The sums are double-doubles fed exact differences
/// and products, so retracting a pair far from the others leaves their statistics exact.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CoMoments {
    pub(super) n: i64,
    pub(super) kx: f64,
    pub(super) ky: f64,
    pub(super) sx: DdSum,
    pub(super) sy: DdSum,
    pub(super) sxx: DdSum,
    pub(super) syy: DdSum,
    pub(super) sxy: DdSum,
}

impl CoMoments {
    pub(super) fn new() -> Self {
        let z = DdSum::default();
        CoMoments { n: 0, kx: f64::NAN, ky: f64::NAN, sx: z, sy: z, sxx: z, syy: z, sxy: z }
    }

    /// Adds (`sign` 1) or retracts (-1) the pair.
    pub(super) fn add(&mut self, x: f64, y: f64, sign: i64) {
        if self.n == 0 {
            // Start afresh: no rounding residue of retracted rows is carried on.
            *self = CoMoments { kx: x, ky: y, ..CoMoments::new() };
        }
        let (dx, dy, s) = (Fsum::diff(x, self.kx), Fsum::diff(y, self.ky), sign as f64);
        self.sx.add(dx, s);
        self.sy.add(dy, s);
        self.sxx.add(dx.mul(dx), s);
        self.syy.add(dy.mul(dy), s);
        self.sxy.add(dx.mul(dy), s);
        self.n += sign;
    }

    /// Statistic `f`; `None` where SQL says NULL.
    pub(super) fn value(&self, f: RegrFn) -> Option<f64> {
        let CoMoments { n, kx, ky, .. } = *self;
        let [sx, sy, sxx, syy, sxy] = [self.sx, self.sy, self.sxx, self.syy, self.sxy].map(|s| s.total());
        if n <= 0 {
            return None;
        }
        let nf = n as f64;
        // Centred sums of squares and products; rounding may leave a square a hair below 0.
        let cxx = sxx.sub(sx.mul(sx).div(nf)).value().max(0.0);
        let cyy = syy.sub(sy.mul(sy).div(nf)).value().max(0.0);
        let cxy = sxy.sub(sx.mul(sy).div(nf)).value();
        let (avgx, avgy) = (kx + sx.div(nf).value(), ky + sy.div(nf).value());
        match f {
            RegrFn::Count => Some(nf),
            RegrFn::AvgX => Some(avgx),
            RegrFn::AvgY => Some(avgy),
            RegrFn::Sxx => Some(cxx),
            RegrFn::Syy => Some(cyy),
            RegrFn::Sxy => Some(cxy),
            RegrFn::CovarPop => Some(cxy / nf),
            RegrFn::CovarSamp => (n > 1).then(|| cxy / (nf - 1.0)),
            RegrFn::Slope => (cxx != 0.0).then(|| cxy / cxx),
            RegrFn::Intercept => (cxx != 0.0).then(|| avgy - avgx * cxy / cxx),
        }
    }
}
