//! The two-variable statistics of `(y, x)` (`covar_*`, `regr_*`): which one, and the
//! retractable sums they are computed from. `corr` and `regr_r2` never reach a view: the
//! PostgreSQL rewrite (`pg/rewrite.rs`, `regression`) computes them from `regr_sxx/syy/sxy`.

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
/// statistics accurate for large values; retraction is exact up to rounding, which stays
/// small while the values stay near the shift).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CoMoments {
    pub(super) n: i64,
    pub(super) kx: f64,
    pub(super) ky: f64,
    pub(super) sx: f64,
    pub(super) sy: f64,
    pub(super) sxx: f64,
    pub(super) syy: f64,
    pub(super) sxy: f64,
}

impl CoMoments {
    pub(super) fn new() -> Self {
        CoMoments { n: 0, kx: f64::NAN, ky: f64::NAN, sx: 0.0, sy: 0.0, sxx: 0.0, syy: 0.0, sxy: 0.0 }
    }

    /// Adds (`sign` 1) or retracts (-1) the pair.
    pub(super) fn add(&mut self, x: f64, y: f64, sign: i64) {
        if self.n == 0 {
            // Start afresh: no rounding residue of retracted rows is carried on.
            *self = CoMoments { kx: x, ky: y, ..CoMoments::new() };
        }
        let (dx, dy, s) = (x - self.kx, y - self.ky, sign as f64);
        self.sx += s * dx;
        self.sy += s * dy;
        self.sxx += s * dx * dx;
        self.syy += s * dy * dy;
        self.sxy += s * dx * dy;
        self.n += sign;
    }

    /// Statistic `f`; `None` where SQL says NULL.
    pub(super) fn value(&self, f: RegrFn) -> Option<f64> {
        let CoMoments { n, kx, ky, sx, sy, sxx, syy, sxy } = *self;
        if n <= 0 {
            return None;
        }
        let nf = n as f64;
        // Centred sums of squares and products; rounding may leave a square a hair below 0.
        let cxx = (sxx - sx * sx / nf).max(0.0);
        let cyy = (syy - sy * sy / nf).max(0.0);
        let cxy = sxy - sx * sy / nf;
        let (avgx, avgy) = (kx + sx / nf, ky + sy / nf);
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
