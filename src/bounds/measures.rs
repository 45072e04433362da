//! Norm-based generalization measures of the raw weight matrices
//! `W_1..W_d` of the blocks (Jiang et al. 2019, "Fantastic generalization
//! measures", arXiv 1912.02178; Bartlett, Foster & Telgarsky 2017),
//! evaluated in interval arithmetic from certified norms. `docs/measures.md`
//! gives each measure's source, equation and exact definition, and where
//! this tool departs from the paper.
//!
//! Every value is an inari interval containing the exact value of the
//! formula for the stored weights, given intervals containing the exact
//! norms: the formulas are compositions of inari's outward-rounded `+`,
//! `*`, `/`, `sqr`, `ln` and `pow`, each with the inclusion property, and
//! the exponents `2/3`, `3/2` and the count `d` are held as intervals
//! containing the exact rationals ([`proofs/measures.md`](crate::proofs::measures), L26).

use inari::Interval;

/// Certified norms of one matrix `A` (a raw weight `W`, or its distance
/// `W - W0` from the initialisation).
#[derive(Clone, Copy, Debug)]
pub struct NormIntervals {
    /// Encloses `||A||_2`.
    pub spectral: Interval,
    /// Encloses `||A||_F`.
    pub frobenius: Interval,
    /// Encloses `||A^T||_{2,1}`, the sum of the l2 norms of `A`'s rows
    /// (`A` as a map `x -> A x`, torch's `[out, in]`).
    pub norm_21_rows: Interval,
}

/// The measures of the weights alone.
#[derive(Clone, Debug)]
pub(crate) struct Measures {
    /// `sum_i ln ||W_i||_2^2` (Jiang eq. 32).
    pub log_prod_of_spec: Interval,
    /// `ln d + (1/d) sum_i ln ||W_i||_2^2` (Jiang eq. 35).
    pub log_sum_of_spec: Interval,
    /// `sum_i ln ||W_i||_F^2` (Jiang eq. 37).
    pub log_prod_of_fro: Interval,
    /// `ln d + (1/d) sum_i ln ||W_i||_F^2` (Jiang eq. 39).
    pub log_sum_of_fro: Interval,
    /// `sum_i ||W_i||_F^2` (Jiang eq. 42).
    pub param_norm: Interval,
    /// `ln( prod_i ||W_i||_2^2 * sum_i ||W_i||_F^2 / ||W_i||_2^2 )`
    /// (Jiang eq. 30 without the margin).
    pub log_spec_orig: Interval,
    /// Spectral complexity with reference matrices 0 (Bartlett et al.):
    /// `prod_i ||W_i||_2 * ( sum_i (||W_i^T||_{2,1} / ||W_i||_2)^(2/3) )^(3/2)`.
    pub bartlett: Interval,
    /// `ln` of [`Measures::bartlett`], evaluated as a sum of logs (finite
    /// where the product overflows binary64).
    pub log_bartlett: Interval,
}

/// The measures that need the initialisation `W0_i`.
#[derive(Clone, Debug)]
pub(crate) struct InitMeasures {
    /// `sum_i ||W_i - W0_i||_F^2` (Jiang eq. 40).
    pub frobenius_distance: Interval,
    /// `sum_i ||W_i - W0_i||_2^2` (Jiang eq. 41).
    pub dist_spec_init: Interval,
    /// `ln( prod_i ||W_i||_2^2 * sum_i ||W_i - W0_i||_F^2 / ||W_i||_2^2 )`
    /// (Jiang eq. 29 without the margin).
    pub log_spec_init: Interval,
    /// Spectral complexity with `M_i = W0_i`:
    /// `prod_i ||W_i||_2 * ( sum_i (||(W_i - W0_i)^T||_{2,1} / ||W_i||_2)^(2/3) )^(3/2)`.
    pub bartlett_init: Interval,
    /// `ln` of [`InitMeasures::bartlett_init`], as a sum of logs.
    pub log_bartlett_init: Interval,
}

fn pt(x: f64) -> Interval {
    Interval::try_from((x, x)).expect("finite point")
}

/// `2 ln x`, the log of `x^2` evaluated without squaring (so that no
/// `x` of binary64 over- or underflows in between; L26).
fn log_sq(x: Interval) -> Interval {
    pt(2.0) * x.ln()
}

/// `sum_i ln(s_i)` and `prod_i s_i` of the spectral norms, and
/// `(sum_i (n_i / s_i)^(2/3))` for the (2,1) norms `n_i` given.
fn spectral_complexity(w: &[NormIntervals], n21: &[Interval]) -> (Interval, Interval, Interval) {
    let two_thirds = pt(2.0) / pt(3.0);
    let mut log_prod = pt(0.0);
    let mut prod = pt(1.0);
    let mut sum = pt(0.0);
    for (x, n) in w.iter().zip(n21) {
        log_prod += x.spectral.ln();
        prod *= x.spectral;
        sum += (*n / x.spectral).pow(two_thirds);
    }
    (log_prod, prod, sum)
}

/// Evaluates the measures of the weights from their certified norms
/// (`w` holds the d raw weight matrices). Logs of squares are evaluated
/// as `2 ln x` and the ratios `||W||_F^2 / ||W||_2^2` as `(F / S)^2`, so
/// that a norm anywhere in binary64's range gives finite log measures.
///
/// *Guarantee: certified enclosure* of every measure, given enclosures of
/// the norms ([`proofs/measures.md`](crate::proofs::measures), L26). A measure whose exact value is
/// infinite or undefined (a weight whose spectral norm is not certified
/// positive), or outside binary64's range, comes back unbounded, never as
/// a finite wrong interval.
pub(crate) fn evaluate(w: &[NormIntervals]) -> Measures {
    let d = pt(w.len() as f64);
    let three_halves = pt(3.0) / pt(2.0);
    let mut log_spec = pt(0.0);
    let mut log_fro = pt(0.0);
    let mut fro_sq = pt(0.0);
    let mut ratio = pt(0.0);
    for x in w {
        log_spec += log_sq(x.spectral);
        log_fro += log_sq(x.frobenius);
        fro_sq += x.frobenius.sqr();
        ratio += (x.frobenius / x.spectral).sqr();
    }
    let n21: Vec<Interval> = w.iter().map(|x| x.norm_21_rows).collect();
    let (log_prod, prod, sum) = spectral_complexity(w, &n21);
    Measures {
        log_prod_of_spec: log_spec,
        log_sum_of_spec: d.ln() + log_spec / d,
        log_prod_of_fro: log_fro,
        log_sum_of_fro: d.ln() + log_fro / d,
        param_norm: fro_sq,
        log_spec_orig: log_spec + ratio.ln(),
        bartlett: prod * sum.pow(three_halves),
        log_bartlett: log_prod + three_halves * sum.ln(),
    }
}

/// Evaluates the measures that need the initialisation, from the
/// certified norms of the weights `w` and of their distances `dist[i]`
/// (of `W_i - W0_i`, index-matched), in log space as [`evaluate`].
///
/// *Guarantee: certified enclosure* of every measure, given enclosures of
/// the norms ([`proofs/measures.md`](crate::proofs::measures), L26); unbounded where the exact value
/// is infinite (a zero distance under a log) or outside binary64's range.
pub(crate) fn evaluate_init(w: &[NormIntervals], dist: &[NormIntervals]) -> InitMeasures {
    assert_eq!(w.len(), dist.len(), "one distance per weight");
    let three_halves = pt(3.0) / pt(2.0);
    let mut log_spec = pt(0.0);
    let mut fro_sq = pt(0.0);
    let mut spec_sq = pt(0.0);
    let mut ratio = pt(0.0);
    for (x, e) in w.iter().zip(dist) {
        log_spec += log_sq(x.spectral);
        fro_sq += e.frobenius.sqr();
        spec_sq += e.spectral.sqr();
        ratio += (e.frobenius / x.spectral).sqr();
    }
    let n21: Vec<Interval> = dist.iter().map(|x| x.norm_21_rows).collect();
    let (log_prod, prod, sum) = spectral_complexity(w, &n21);
    InitMeasures {
        frobenius_distance: fro_sq,
        dist_spec_init: spec_sq,
        log_spec_init: log_spec + ratio.ln(),
        bartlett_init: prod * sum.pow(three_halves),
        log_bartlett_init: log_prod + three_halves * sum.ln(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(x: f64) -> Interval {
        pt(x)
    }

    #[test]
    fn measures_of_two_identities_are_exact_where_the_arithmetic_is() {
        // Two 2x2 identities: spectral 1, Frobenius sqrt 2, (2,1) rows 2.
        let id = NormIntervals {
            spectral: iv(1.0),
            frobenius: iv(2.0).sqrt(),
            norm_21_rows: iv(2.0),
        };
        let m = evaluate(&[id, id]);
        assert!(m.log_prod_of_spec.contains(0.0));
        assert!(m.param_norm.contains(4.0));
        let z = NormIntervals {
            spectral: iv(0.0),
            frobenius: iv(0.0),
            norm_21_rows: iv(0.0),
        };
        let i = evaluate_init(&[id, id], &[z, z]);
        assert!(i.frobenius_distance.contains(0.0));
        assert!(!i.log_spec_init.inf().is_finite(), "ln 0 is unbounded");
    }
}
