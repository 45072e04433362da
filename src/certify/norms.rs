//! Certified norms of a raw weight matrix (spectral, Frobenius, (2,1))
//! and of its distance to an initialisation, the inputs of the norm-based
//! measures (`docs/measures.md`).

use crate::bounds::{self};
use crate::enclosure::{Enclosure, Inconclusive};
use crate::linalg::{certify_singular_values, Precision, SvdOptions};
use inari::Interval;

/// Certified norms of the matrix `A` given as its transpose `at` (`A^T`,
/// so that the sum of `at`'s column norms is `||A^T||_{2,1}`): `||A||_2` is
/// sigma_1 of the certified spectrum (L15 a, with the lemmas
/// `certify_singular_values` names), capped by the Frobenius upper bound
/// (`sigma_1 <= ||A||_F`); `||A||_F` and the (2,1)-norm from the entries.
///
/// *Guarantee: certified enclosure* of the three norms
/// ([`proofs/derived-quantities.md`](crate::proofs::derived_quantities), L15 a, d, e; [`proofs/compensated-sum.md`](crate::proofs::compensated_sum),
/// L12; [`proofs/residual-single-pair.md`](crate::proofs::residual_single_pair), L6, and the other lemmas of
/// `linalg::certify_singular_values`).
pub fn certify_raw_norms(
    at: &crate::matrix::DenseMatrix,
    opts: &SvdOptions,
) -> Result<bounds::measures::NormIntervals, Inconclusive> {
    certify_raw_norms_with(at, opts, None)
}

/// [`certify_raw_norms`], with `sigma_1` taken from `known` when given: an
/// enclosure of the spectral norm of `at` or of its transpose (the same
/// value), already certified (the proxy `M_in` or `M_out` is the
/// transposed raw feed-forward weight of an ungated block).
///
/// *Guarantee: certified enclosure* of the three norms, as
/// [`certify_raw_norms`] ([`proofs/derived-quantities.md`](crate::proofs::derived_quantities), L15 a, d, e;
/// [`proofs/compensated-sum.md`](crate::proofs::compensated_sum), L12), given that `known` encloses sigma_1.
pub(crate) fn certify_raw_norms_with(
    at: &crate::matrix::DenseMatrix,
    opts: &SvdOptions,
    known: Option<Enclosure>,
) -> Result<bounds::measures::NormIntervals, Inconclusive> {
    let (frob, n21) = raw_entry_norms(at, opts.precision)?;
    let s1 = match known {
        Some(k) => k,
        None => certify_singular_values(at, opts)?
            .values
            .first()
            .map(|v| v.enclosure)
            .ok_or_else(|| Inconclusive::new("no singular value"))?,
    };
    let spectral = Interval::try_from((s1.lo().max(0.0), s1.hi().min(frob.hi())))
        .map_err(|_| Inconclusive::new("sigma_1 and the Frobenius norm disagree"))?;
    Ok(bounds::measures::NormIntervals {
        spectral,
        frobenius: frob.to_interval(),
        norm_21_rows: n21.to_interval(),
    })
}

/// The Frobenius and (2,1) norms of `at` (the sum of its column norms)
/// from the entries, as tight as `precision` asks
/// ([`crate::spectral::enclose_entry_norms_at`]: binary64, and MPFR sums at
/// `extended` and `mpfr:N`, intersected).
///
/// *Guarantee: certified enclosures* of both norms, as
/// [`crate::spectral::enclose_entry_norms_at`] ([`proofs/compensated-sum.md`](crate::proofs::compensated_sum),
/// L12; [`proofs/mpfr-directed.md`](crate::proofs::mpfr_directed), L13; [`proofs/derived-quantities.md`](crate::proofs::derived_quantities),
/// L15 d, e; [`proofs/sorting-lemma.md`](crate::proofs::sorting_lemma), L10 b).
fn raw_entry_norms(
    at: &crate::matrix::DenseMatrix,
    precision: Precision,
) -> Result<(Enclosure, Enclosure), Inconclusive> {
    let (frob, n21, _) = crate::spectral::enclose_entry_norms_at(at, precision)?;
    Ok((frob, n21))
}

/// Certified norms of `A - A0`, both given transposed: `D = fl(A - A0)` and
/// its rounding error `E = (A - A0) - D`, exact by TwoSum, entry by entry;
/// the norms of `D` are certified as [`certify_raw_norms`] does, and widened
/// by those of `E` (triangle inequality; Weyl for sigma_1). `E` is exactly 0
/// (no widening) whenever every pair of entries is close enough in
/// exponent, which holds for float32 weights whose exponents differ by at
/// most 29.
///
/// *Guarantee: certified enclosure* of the three norms of the exact
/// difference ([`proofs/exact-difference.md`](crate::proofs::exact_difference), L25; [`proofs/compensated-sum.md`](crate::proofs::compensated_sum),
/// L12 a; [`proofs/weyl.md`](crate::proofs::weyl), L9; and the lemmas of [`certify_raw_norms`]).
pub fn certify_distance_norms(
    at: &crate::matrix::DenseMatrix,
    a0t: &crate::matrix::DenseMatrix,
    opts: &SvdOptions,
) -> Result<bounds::measures::NormIntervals, Inconclusive> {
    use crate::linalg::rounding as r;
    if (at.rows, at.cols) != (a0t.rows, a0t.cols) {
        return Err(Inconclusive::new(format!(
            "the initialisation is {}x{}, the weight {}x{}",
            a0t.cols, a0t.rows, at.cols, at.rows
        )));
    }
    if at.data.iter().chain(&a0t.data).any(|x| !x.is_finite()) {
        return Err(Inconclusive::new("matrix has non-finite entries"));
    }
    let mut d = Vec::with_capacity(at.data.len());
    let mut e = Vec::with_capacity(at.data.len());
    for (&a, &b) in at.data.iter().zip(&a0t.data) {
        let (s, err) = crate::linalg::eft::two_sum(a, -b);
        d.push(s);
        e.push(err);
    }
    if d.iter().any(|x| !x.is_finite()) {
        return Err(Inconclusive::new("the difference overflowed"));
    }
    let dm = crate::matrix::DenseMatrix {
        rows: at.rows,
        cols: at.cols,
        data: d,
    };
    let base = if dm.data.iter().all(|&x| x == 0.0) {
        let z = Interval::try_from((0.0, 0.0)).expect("finite");
        bounds::measures::NormIntervals {
            spectral: z,
            frobenius: z,
            norm_21_rows: z,
        }
    } else {
        certify_raw_norms(&dm, opts)?
    };
    if e.iter().all(|&x| x == 0.0) {
        return Ok(base);
    }
    let em = crate::matrix::DenseMatrix {
        rows: at.rows,
        cols: at.cols,
        data: e,
    };
    let ef = crate::spectral::enclose_frobenius_from_entries(&em)?.hi();
    let (en21, _) = crate::spectral::enclose_entry_norms(&em)?;
    let widen = |x: Interval, by: f64| {
        Interval::try_from((r::sub_rd(x.inf(), by).max(0.0), r::add_ru(x.sup(), by)))
            .map_err(|_| Inconclusive::new("the difference's norms overflowed"))
    };
    Ok(bounds::measures::NormIntervals {
        spectral: widen(base.spectral, ef)?,
        frobenius: widen(base.frobenius, ef)?,
        norm_21_rows: widen(base.norm_21_rows, en21.hi())?,
    })
}
