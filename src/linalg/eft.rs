//! Error-free transformations: TwoSum, TwoProduct (by FMA) and the cascaded
//! summation Sum2 with its a priori bound ([`proofs/compensated-sum.md`](crate::proofs::compensated_sum), L12).

use super::rounding::{self as r, ETA, U};

/// TwoSum (Knuth): `a + b = s + e` exactly, in round-to-nearest.
#[inline]
pub(crate) fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bp = s - a;
    (s, (a - (s - bp)) + (b - bp))
}

/// Running Sum2 (cascaded TwoSum) with the data for the bound of L12.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sum2 {
    sum: f64,
    comp: f64,
    abs: f64,
    n: usize,
}

impl Sum2 {
    /// An empty sum.
    pub(crate) fn new() -> Self {
        Self {
            sum: 0.0,
            comp: 0.0,
            abs: 0.0,
            n: 0,
        }
    }
    #[inline]
    /// Adds one exactly representable term.
    pub(crate) fn add(&mut self, v: f64) {
        let (s2, e2) = two_sum(self.sum, v);
        self.sum = s2;
        self.comp += e2;
        self.abs += v.abs(); // RN sum of |terms|; bounded in finish()
        self.n += 1;
    }
    /// Adds `a * b` exactly (TwoProduct by FMA; an underflowing error term is
    /// covered by the eta term of the bound).
    #[inline]
    pub(crate) fn add_prod(&mut self, a: f64, b: f64) {
        let h = a * b;
        let l = a.mul_add(b, -h);
        self.add(h);
        self.add(l);
    }
    /// `(res, err)` with `|res - exact| <= err` (L12).
    pub(crate) fn finish(&self) -> (f64, f64) {
        let res = self.sum + self.comp;
        let g = r::gamma_ru(self.n.max(2));
        // sum |t_i| <= bound of the RN sum of nonnegative terms (L3 b).
        let abs_hi = r::nonneg_sum_ru(self.abs, self.n.max(1));
        let big_g = r::add_ru(
            r::mul_ru(r::mul_ru(g, g), abs_hi),
            r::mul_ru((self.n + 1) as f64, ETA),
        );
        let err = r::add_ru(
            r::div_ru(r::mul_ru(U, r::add_ru(res.abs(), big_g)), 1.0 - 2.0 * U),
            big_g,
        );
        (res, err)
    }
}

impl Sum2 {
    /// Lower and upper bounds of the exact sum of all terms added (L12).
    pub(crate) fn bounds(&self) -> (f64, f64) {
        let (res, err) = self.finish();
        (r::sub_rd(res, err), r::add_ru(res, err))
    }
}
