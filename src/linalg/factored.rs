//! Singular values of a factored product `A = B C` (B is m x r, C is r x n,
//! r small) certified without forming `A`.
//!
//! The per-head query-key and value-output matrices of a Transformer are such
//! products of rank at most the head dimension. The `min(m, n) - r` trailing
//! singular values are exactly zero (rank(A) <= r) and are reported as
//! structural zeros. The `r` leading ones are certified with the residual
//! theorem from `r` approximate pairs whose residuals are formed through the
//! thin factors only ([`proofs/factored-product.md`](crate::proofs::factored_product), L14). When some hull
//! touches 0 the counting argument of L14 does not apply, and the product is
//! formed densely, certified, and widened by the product's rounding error
//! (Weyl, [`proofs/weyl.md`](crate::proofs::weyl), L9).

use faer::{Accum, Mat, MatRef, Par};

use super::dense::{
    self, abs_norm2_ru, pair_bounds_and_merge, residual_col_bounds, BoundedProduct,
};
use super::rounding::{self as r, ETA};
use super::{
    certify_singular_values, values_from_groups, CertifiedValue, Method, Precision, SingularValues,
    SvdOptions,
};
use crate::enclosure::{Enclosure, Inconclusive};
use crate::matrix::DenseMatrix;
use std::borrow::Cow;

fn to_faer(x: &DenseMatrix, k: i32) -> Mat<f64> {
    dense::to_faer_scaled(x, k)
}

/// Exact power-of-two prescaling exponent for one factor: the largest
/// magnitude moved into `[1, 2)`, or as close to it as exactness allows (L2).
fn scale_for(x: &DenseMatrix) -> i32 {
    dense::exact_scale_of(&x.data)
}

/// `fl(L fl(R Y))` with column error bounds (L4 applied twice, L14):
/// `||(P - L R Y) e_j|| <= gamma_r bl ||W e_j|| + sqrt(rows) r eta + bl err_W_j`.
fn two_stage_product(
    l: MatRef<'_, f64>,
    rr: MatRef<'_, f64>,
    y: MatRef<'_, f64>,
    bl: f64,
    br: f64,
    par: Par,
) -> BoundedProduct {
    let w = dense::product_with_bound(rr, y, br, par);
    let (rows, k) = (l.nrows(), l.ncols());
    let mut p = Mat::<f64>::zeros(rows, y.ncols());
    faer::linalg::matmul::matmul(&mut p, Accum::Replace, l, w.computed.as_ref(), 1.0, par);
    // The second product's own bound (one GEMM of depth k), then the
    // first product's error carried through L.
    let col_err = dense::product_col_err(k, k, rows, bl, w.computed.as_ref())
        .into_iter()
        .zip(&w.col_err)
        .map(|(e, &ew)| r::add_ru(e, r::mul_ru(bl, ew)))
        .collect();
    BoundedProduct {
        computed: p,
        col_err,
    }
}

fn structural_zero(count: usize) -> CertifiedValue {
    CertifiedValue {
        enclosure: Enclosure::exact(0.0).expect("zero"),
        method: Method::Structural,
        cluster_size: count,
        exact: None,
    }
}

/// Certified, index-matched enclosures of all `min(m, n)` singular values of
/// `B C`, where `b` is `m x r` and `c` is `r x n`.
///
/// *Guarantee: certified enclosure.* `values[i]` contains the exact i-th
/// largest singular value of the exact product of the two stored matrices;
/// the trailing `structural_zeros` values are exactly zero because
/// rank(BC) <= r, and at most the number of nonzero rows of `B`, of nonzero
/// columns of `C` and of inner indices where neither `B`'s column nor
/// `C`'s row is zero (a pruned head: the product is certified with those
/// left out, L14 e). Justification: [`proofs/factored-product.md`](crate::proofs::factored_product) (L14),
/// [`proofs/residual-single-pair.md`](crate::proofs::residual_single_pair) (L6), [`proofs/residual-cluster.md`](crate::proofs::residual_cluster) (L7),
/// [`proofs/near-orthogonal.md`](crate::proofs::near_orthogonal) (L8), [`proofs/dot-product-error.md`](crate::proofs::dot_product_error) (L4),
/// [`proofs/collatz-bound.md`](crate::proofs::collatz_bound) (L5), [`proofs/weyl.md`](crate::proofs::weyl) (L9) for the dense fallback.
///
/// The factored route runs in binary64. With `extended` or `mpfr:BITS`,
/// or when the counting condition of L14 fails, the dense fallback
/// certifies `fl(B C)` with that precision and widens by the product error;
/// `auto` takes the factored route's answer where it meets the target and
/// climbs the dense ladder only where it does not (`auto_factored`).
///
/// Where the rank is still undecided, the factors' ranks are bounded
/// exactly (`rank(B C) <= rank B, rank C`, each by exact null vectors, L30
/// within its limits; [`proofs/exact-rank.md`](crate::proofs::exact_rank), L37 e), and the values past
/// the smaller bound are exact zeros (`apply_factor_ranks`).
pub fn certify_factored(
    b: &DenseMatrix,
    c: &DenseMatrix,
    opts: &SvdOptions,
) -> Result<SingularValues, Inconclusive> {
    let mut sv = certify_factored_stages(b, c, opts)?;
    if sv.rank_undecided_at().is_some() {
        apply_factor_ranks(&mut sv, b, c)?;
    }
    // The stages' notes on an undecided rank were written before the
    // zeros of L14 (dense fallback) or of the factors' ranks were set.
    sv.drop_notes_of_an_undecided_rank();
    Ok(sv)
}

/// An upper bound of `rank X`: `n - k` for the `n` columns of `X`
/// prepared as `m >= n` (L2) and `k` exact null vectors of it, checked
/// (L30); 0 for a zero matrix; `Err` outside the certificate's limits.
fn rank_at_most(x: &DenseMatrix) -> Result<usize, super::kernel::KernelSkipped> {
    let Some(prep) = dense::prepare(x.rows, x.cols, &x.data) else {
        return Ok(0);
    };
    let k = super::kernel::exact_kernel(prep.a())?.map_or(0, |c| c.nullity);
    Ok(prep.a().ncols() - k)
}

/// Sets the values of `B C` past `min(rank B, rank C)` (each bounded by
/// [`rank_at_most`]) to exact zeros, with a note; a factor outside the
/// exact certificate's limits bounds nothing. An `Err` only if a value
/// there is certified positive (two proofs disagree: inconclusive).
///
/// *Guarantee: certified* ([`proofs/exact-rank.md`](crate::proofs::exact_rank), L37 e:
/// `rank(B C) <= min(rank B, rank C)`, with L30 for each factor's rank).
fn apply_factor_ranks(
    sv: &mut SingularValues,
    b: &DenseMatrix,
    c: &DenseMatrix,
) -> Result<(), Inconclusive> {
    let bound = [rank_at_most(b), rank_at_most(c)]
        .into_iter()
        .filter_map(Result::ok)
        .min();
    let n = sv.values.len();
    let Some(ub) = bound.filter(|&ub| ub < n) else {
        return Ok(());
    };
    if sv.values[ub..].iter().all(|v| v.enclosure.hi() == 0.0) {
        return Ok(());
    }
    if let Some(i) = (ub..n).find(|&i| sv.values[i].positive()) {
        return Err(Inconclusive::new(format!(
            "internal consistency check failed: sigma_{} has a positive lower bound, but \
             exact null vectors of the factors prove the rank at most {ub}",
            i + 1
        )));
    }
    for v in &mut sv.values[ub..] {
        if v.enclosure.hi() > 0.0 {
            *v = CertifiedValue {
                enclosure: Enclosure::exact(0.0).expect("zero"),
                method: Method::ExactKernel,
                cluster_size: n - ub,
                exact: None,
            };
        }
    }
    sv.notes.push(format!(
        "exact factor rank: null vectors of the factors checked in exact arithmetic \
         (rank(B C) <= min(rank B, rank C) <= {ub}, sigma_{}..sigma_{n} = 0)",
        ub + 1
    ));
    Ok(())
}

/// The certification of [`certify_factored`] before the factors' exact
/// ranks are applied (its guarantee and lemmas).
fn certify_factored_stages(
    b: &DenseMatrix,
    c: &DenseMatrix,
    opts: &SvdOptions,
) -> Result<SingularValues, Inconclusive> {
    check_factors(b, c)?;
    let (m0, n0) = (b.rows, c.cols);
    let kmin = m0.min(n0);
    if b.data.iter().all(|&x| x == 0.0) || c.data.iter().all(|&x| x == 0.0) {
        // A zero factor: B C = 0 exactly, whatever the method (a structural
        // fact, not a rounded one; L14 with rank 0).
        return Ok(zero_product(m0, n0));
    }
    if let Some(reduced) = reduce(b, c) {
        return certify_reduced(&reduced, (m0, n0), opts);
    }
    if b.cols >= kmin {
        return dense_fallback(b, c, opts);
    }
    match opts.precision {
        Precision::F64 => match factored_f64(b, c, opts.par)? {
            Some(values) => Ok(values),
            None => dense_fallback(b, c, opts),
        },
        Precision::Auto => auto_factored(b, c, opts),
        Precision::Extended | Precision::Mpfr(_) => dense_fallback(b, c, opts),
    }
}

/// The factored binary64 route of [`certify_factored`] for `r < min(m, n)`
/// (its guarantee; L14 with L6, L7, L8, L4, L5): approximate pairs through
/// the thin factors, residuals through the factors, the trailing values
/// structural zeros. `Ok(None)` where some hull touches 0, so that the
/// counting argument of L14 does not apply (the caller then forms the
/// product densely).
fn factored_f64(
    b: &DenseMatrix,
    c: &DenseMatrix,
    par: Par,
) -> Result<Option<SingularValues>, Inconclusive> {
    let (m0, n0) = (b.rows, c.cols);
    let kmin = m0.min(n0);
    // Orient so that m >= n: (BC)^T = C^T B^T.
    let (bb, cc) = if m0 >= n0 {
        (Cow::Borrowed(b), Cow::Borrowed(c))
    } else {
        (Cow::Owned(c.transposed()), Cow::Owned(b.transposed()))
    };
    let (kb, kc) = (scale_for(&bb), scale_for(&cc));
    let bm = to_faer(&bb, kb);
    let cm = to_faer(&cc, kc);
    drop((bb, cc));
    if bm.as_ref().norm_max() == 0.0 || cm.as_ref().norm_max() == 0.0 {
        return Ok(Some(zero_product(m0, n0)));
    }
    let (s, u, v) = approx_svd_of_product(bm.as_ref(), cm.as_ref(), par)?;
    // Residuals through the factors.
    let beta_b = abs_norm2_ru(bm.as_ref());
    let beta_c = abs_norm2_ru(cm.as_ref());
    let pv = two_stage_product(bm.as_ref(), cm.as_ref(), v.as_ref(), beta_b, beta_c, par);
    let qu = two_stage_product(
        cm.transpose(),
        bm.transpose(),
        u.as_ref(),
        beta_c,
        beta_b,
        par,
    );
    let e = residual_col_bounds(&pv, u.as_ref(), &s);
    let f = residual_col_bounds(&qu, v.as_ref(), &s);
    match pair_bounds_and_merge(&s, &e, &f, v.as_ref()) {
        Ok(groups) if groups.iter().all(|g| g.lo > 0.0) => {
            let mut values = values_from_groups(&groups, kb + kc, Method::F64Residual)?;
            let zeros = kmin - b.cols;
            values.extend((0..zeros).map(|_| structural_zero(zeros)));
            Ok(Some(SingularValues {
                rows: m0,
                cols: n0,
                values,
                structural_zeros: zeros,
                notes: Vec::new(),
            }))
        }
        _ => Ok(None),
    }
}

/// `auto` on a factored product: the factored binary64 route is its first
/// stage, and where that meets the target (as `auto` judges a dense
/// matrix's stages) nothing else runs. Otherwise the product is formed and
/// certified densely with `auto`'s ladder ([`dense_fallback`]), and the
/// narrower of the two enclosures kept index by index (both certified; L10).
///
/// The dense ladder of a head of order 4096 took about 170 s at one thread
/// against 0.05 s for the factored route: `certify --precision auto` of a
/// LLaMA-7B layer was hours where the factored route met the target.
fn auto_factored(
    b: &DenseMatrix,
    c: &DenseMatrix,
    opts: &SvdOptions,
) -> Result<SingularValues, Inconclusive> {
    let first = factored_f64(b, c, opts.par).ok().flatten();
    let first = match first {
        Some(v) if super::stages::auto_settles(&v, opts.rtol) => return Ok(v),
        other => other,
    };
    let work = super::stages::auto_work(b.rows, c.cols);
    match (dense_fallback(b, c, opts), first) {
        (Ok(mut dense), Some(factored)) => {
            dense.keep_narrower(factored);
            Ok(super::stages::rejudge_auto(dense, opts.rtol, work))
        }
        (Ok(dense), None) => Ok(dense),
        (Err(why), Some(mut factored)) => {
            factored.notes.push(format!(
                "dense stages inconclusive ({}); the values are those of the factored \
                 binary64 stage",
                why.reason
            ));
            Ok(super::stages::rejudge_auto(factored, opts.rtol, work))
        }
        (Err(why), None) => Err(why),
    }
}

/// Refuses factors whose shapes do not chain, with a non-finite entry, or
/// with a zero-sized dimension.
fn check_factors(b: &DenseMatrix, c: &DenseMatrix) -> Result<(), Inconclusive> {
    if b.cols != c.rows {
        return Err(Inconclusive::new(format!(
            "factor shapes do not chain: {}x{} times {}x{}",
            b.rows, b.cols, c.rows, c.cols
        )));
    }
    if b.data.iter().chain(c.data.iter()).any(|x| !x.is_finite()) {
        return Err(Inconclusive::new("factor has non-finite entries"));
    }
    if b.rows == 0 || c.cols == 0 || b.cols == 0 {
        return Err(Inconclusive::new("factor has a zero-sized dimension"));
    }
    Ok(())
}

/// The singular values of a product that is exactly zero: structural
/// zeros (L14 with rank 0).
fn zero_product(m0: usize, n0: usize) -> SingularValues {
    let kmin = m0.min(n0);
    SingularValues {
        rows: m0,
        cols: n0,
        values: (0..kmin).map(|_| structural_zero(kmin)).collect(),
        structural_zeros: kmin,
        notes: Vec::new(),
    }
}

/// An approximate thin SVD: values, left and right vectors.
type Triplet = (Vec<f64>, Mat<f64>, Mat<f64>);

/// An approximate thin SVD `(s, U, V)` of `B C` through the thin factors:
/// by Cholesky QR of both factors where they are well conditioned
/// ([`svd_by_cholesky_qr`]), else through faer's SVD of `B` and of the core
/// ([`svd_by_factor_svd`]). No guarantee: the residual bounds certify what
/// it gives.
fn approx_svd_of_product(
    bm: MatRef<'_, f64>,
    cm: MatRef<'_, f64>,
    par: Par,
) -> Result<Triplet, Inconclusive> {
    match svd_by_cholesky_qr(bm, cm, par) {
        Some(t) => t,
        None => svd_by_factor_svd(bm, cm, par),
    }
}

/// Smallest ratio of the diagonal entries of the first pass's Cholesky
/// factor at which [`cholesky_qr2`] is used: the condition number is then
/// at most about `1e5`, and two passes leave `Q` orthonormal to about the
/// unit roundoff (Cholesky QR2 needs `kappa^2 u < 1`).
const CHOLESKY_QR_MIN_RATIO: f64 = 1e-5;

/// A thin QR `A = Q R` of a tall `a` by two passes of Cholesky QR (`Q^T Q =
/// L L^T`, then `Q <- Q L^-T`, `R <- L^T R`): Gram products, Cholesky
/// factors of `n x n` matrices and triangular solves, all GEMM-rich and on
/// the calling thread (the same bits on any pool). `None` where a Cholesky
/// factorization fails or the first pass finds `a` too ill-conditioned
/// ([`CHOLESKY_QR_MIN_RATIO`]). **No guarantee.**
fn cholesky_qr2(a: MatRef<'_, f64>) -> Option<(Mat<f64>, Mat<f64>)> {
    use faer::dyn_stack::{MemBuffer, MemStack};
    use faer::linalg::cholesky::llt::factor;
    let n = a.ncols();
    let mut q = a.to_owned();
    let mut r = Mat::<f64>::identity(n, n);
    for pass in 0..2 {
        let mut l = super::backend::gram_on_cpu(q.as_ref(), Par::Seq);
        let scratch = factor::cholesky_in_place_scratch::<f64>(n, Par::Seq, Default::default());
        factor::cholesky_in_place(
            l.as_mut(),
            Default::default(),
            Par::Seq,
            MemStack::new(&mut MemBuffer::new(scratch)),
            Default::default(),
        )
        .ok()?;
        let diag: Vec<f64> = (0..n).map(|i| l[(i, i)]).collect();
        let (lo, hi) = diag.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &d| {
            (lo.min(d), hi.max(d))
        });
        if pass == 0 && !(lo > CHOLESKY_QR_MIN_RATIO * hi && hi.is_finite()) {
            return None;
        }
        for j in 0..n {
            for i in 0..j {
                l[(i, j)] = 0.0;
            }
        }
        // Q <- Q L^-T, i.e. Q^T <- L^-1 Q^T.
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            l.as_ref(),
            q.as_mut().transpose_mut(),
            Par::Seq,
        );
        r = product(l.transpose(), r.as_ref(), Par::Seq);
    }
    q.as_ref().norm_max().is_finite().then_some((q, r))
}

/// `x y` with the parallelism `par` (faer's `*` would take the global
/// one); `Par::Seq` for the small products of the factorizations.
fn product(x: MatRef<'_, f64>, y: MatRef<'_, f64>, par: Par) -> Mat<f64> {
    let mut p = Mat::<f64>::zeros(x.nrows(), y.ncols());
    faer::linalg::matmul::matmul(&mut p, Accum::Replace, x, y, 1.0, par);
    p
}

/// [`approx_svd_of_product`] through `B = Q_b R_b`, `C^T = Q_c R_c`
/// ([`cholesky_qr2`]) and the SVD of the `r x r` core `R_b R_c^T = U_k S
/// V_k^T`: `U = Q_b U_k`, `V = Q_c V_k`. `None` where a factor is too
/// ill-conditioned for Cholesky QR.
fn svd_by_cholesky_qr(
    bm: MatRef<'_, f64>,
    cm: MatRef<'_, f64>,
    par: Par,
) -> Option<Result<Triplet, Inconclusive>> {
    let (qb, rb) = cholesky_qr2(bm)?;
    let (qc, rc) = cholesky_qr2(cm.transpose())?;
    let core = product(rb.as_ref(), rc.transpose(), Par::Seq);
    let Some(svd_k) = super::dense::faer_thin_svd(core.as_ref()) else {
        return Some(Err(Inconclusive::new(
            "approximate SVD of the core did not converge",
        )));
    };
    let s: Vec<f64> = svd_k.s.iter().map(|&x| x.max(0.0)).collect();
    let u = product(qb.as_ref(), svd_k.u.as_ref(), par);
    let v = product(qc.as_ref(), svd_k.v.as_ref(), par);
    Some(Ok((s, u, v)))
}

/// [`approx_svd_of_product`] through faer's thin SVD of `B = U_b S_b
/// V_b^T`, then the SVD of the `r x n` core `S_b V_b^T C`.
fn svd_by_factor_svd(
    bm: MatRef<'_, f64>,
    cm: MatRef<'_, f64>,
    par: Par,
) -> Result<Triplet, Inconclusive> {
    let rr = bm.ncols();
    let svd_b = super::dense::faer_thin_svd(bm)
        .ok_or_else(|| Inconclusive::new("approximate SVD of a factor did not converge"))?;
    let sb = &svd_b.s;
    let mut kmat = Mat::<f64>::zeros(rr, cm.ncols());
    let mut svt = svd_b.v.transpose().to_owned();
    for i in 0..rr {
        for j in 0..rr {
            svt[(i, j)] *= sb[i];
        }
    }
    faer::linalg::matmul::matmul(&mut kmat, Accum::Replace, svt.as_ref(), cm, 1.0, par);
    let kt = kmat.transpose().to_owned();
    let svd_k = super::dense::faer_thin_svd(kt.as_ref())
        .ok_or_else(|| Inconclusive::new("approximate SVD of the core did not converge"))?;
    let s: Vec<f64> = svd_k.s.iter().map(|&x| x.max(0.0)).collect();
    let u = product(svd_b.u.as_ref(), svd_k.v.as_ref(), par);
    Ok((s, u, svd_k.u)) // V = the core's left vectors, n x r
}

/// `B C` with the zero rows of `B`, the zero columns of `C` and the inner
/// indices `k` where column `k` of `B` or row `k` of `C` is zero left out
/// (L14 e): `(B', C')`, or `None` when nothing can be left out. The
/// reduced product's singular values, followed by zeros, are exactly those
/// of `B C`; every test is an exact comparison of a binary64 entry with 0.
fn reduce(b: &DenseMatrix, c: &DenseMatrix) -> Option<(DenseMatrix, DenseMatrix)> {
    let (m, rr, n) = (b.rows, b.cols, c.cols);
    let rows: Vec<usize> = (0..m)
        .filter(|&i| (0..rr).any(|k| b.get(i, k) != 0.0))
        .collect();
    let cols: Vec<usize> = (0..n)
        .filter(|&j| (0..rr).any(|k| c.get(k, j) != 0.0))
        .collect();
    let inner: Vec<usize> = (0..rr)
        .filter(|&k| (0..m).any(|i| b.get(i, k) != 0.0) && (0..n).any(|j| c.get(k, j) != 0.0))
        .collect();
    if (rows.len(), inner.len(), cols.len()) == (m, rr, n) {
        return None;
    }
    let pick = |x: &DenseMatrix, ri: &[usize], ci: &[usize]| DenseMatrix {
        rows: ri.len(),
        cols: ci.len(),
        data: ri
            .iter()
            .flat_map(|&i| ci.iter().map(move |&j| x.get(i, j)))
            .collect(),
    };
    Some((pick(b, &rows, &inner), pick(c, &inner, &cols)))
}

/// The singular values of `B C` (`kmin = min(m, n)` of them) from those of
/// its reduction `B' C'` ([`reduce`]): the reduced product's values that
/// are not structural zeros, then `min(rows, cols)` less their count exact zeros
/// (L14 e: rank(B C) <= the reduced inner dimension and the number of
/// nonzero rows and columns).
///
/// *Guarantee: certified enclosure* of every singular value of `B C`,
/// index-matched, given by the reduced product's certification
/// ([`certify_factored_stages`]) and the exact zeros of [`proofs/factored-product.md`](crate::proofs::factored_product),
/// L14 e.
fn certify_reduced(
    (b, c): &(DenseMatrix, DenseMatrix),
    (rows, cols): (usize, usize),
    opts: &SvdOptions,
) -> Result<SingularValues, Inconclusive> {
    let (mut values, notes) = if b.cols == 0 || b.rows == 0 || c.cols == 0 {
        (Vec::new(), Vec::new()) // B C = 0 exactly
    } else {
        let sv = certify_factored_stages(b, c, opts)?;
        let kept = sv.values.len() - sv.structural_zeros;
        let mut v = sv.values;
        v.truncate(kept);
        (v, sv.notes)
    };
    let zeros = rows.min(cols) - values.len();
    values.extend((0..zeros).map(|_| structural_zero(zeros)));
    Ok(SingularValues {
        rows,
        cols,
        values,
        structural_zeros: zeros,
        notes,
    })
}

/// Forms `fl(B C)`, certifies it, widens by `||BC - fl(BC)||_F` (L9) and
/// forces the values beyond index r to exact zeros (L14).
fn dense_fallback(
    b: &DenseMatrix,
    c: &DenseMatrix,
    opts: &SvdOptions,
) -> Result<SingularValues, Inconclusive> {
    let (m, rr, n) = (b.rows, b.cols, c.cols);
    let bm = to_faer(b, 0);
    let cm = to_faer(c, 0);
    let mut am = Mat::<f64>::zeros(m, n);
    faer::linalg::matmul::matmul(
        &mut am,
        Accum::Replace,
        bm.as_ref(),
        cm.as_ref(),
        1.0,
        opts.par,
    );
    let mut data = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            data.push(am[(i, j)]);
        }
    }
    if data.iter().any(|x| !x.is_finite()) {
        return Err(Inconclusive::new("product of the factors overflowed"));
    }
    let a = DenseMatrix {
        rows: m,
        cols: n,
        data,
    };
    // ||BC - fl(BC)||_F <= gamma_r ||B||_F ||C||_F + sqrt(mn) r eta  (L4, Cauchy-Schwarz);
    // the norms are taken of the exactly rescaled factors (L2), so that they
    // cannot overflow where the product does not.
    let (kb, kc) = (scale_for(b), scale_for(c));
    let scaled_norm = |x: &DenseMatrix, k: i32| {
        let v: Vec<f64> = x.data.iter().map(|&e| r::scale_pow2_rn(e, k)).collect();
        r::norm2_ru(&v)
    };
    let d = r::add_ru(
        r::scale_pow2_ru(
            r::mul_ru(
                r::gamma_ru(rr),
                r::mul_ru(scaled_norm(b, kb), scaled_norm(c, kc)),
            ),
            -(kb + kc),
        ),
        r::mul_ru(r::sqrt_ru((m * n) as f64), r::mul_ru(rr as f64, ETA)),
    );
    if !d.is_finite() {
        return Err(Inconclusive::new("product error bound overflowed"));
    }
    let mut sv = certify_singular_values(&a, opts)?;
    let kmin = m.min(n);
    for (i, v) in sv.values.iter_mut().enumerate() {
        if i >= rr {
            *v = structural_zero(kmin - rr);
            continue;
        }
        let lo = r::sub_rd(v.enclosure.lo(), d).max(0.0);
        let hi = r::add_ru(v.enclosure.hi(), d);
        v.enclosure =
            Enclosure::new(lo, hi).ok_or_else(|| Inconclusive::new("widened bound overflowed"))?;
        v.exact = None;
    }
    sv.structural_zeros = kmin.saturating_sub(rr);
    if opts.precision == Precision::Auto {
        // `auto` judged the values before the zeros of L14 were set.
        sv = super::stages::rejudge_auto(sv, opts.rtol, super::stages::auto_work(b.rows, c.cols));
    }
    Ok(sv)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tall matrix with singular values spread over `10^-decades .. 1`.
    fn graded(m: usize, n: usize, decades: f64) -> Mat<f64> {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let x = Mat::<f64>::from_fn(m, n, |_, _| next());
        Mat::from_fn(m, n, |i, j| {
            x[(i, j)] * 10f64.powf(-decades * j as f64 / n as f64)
        })
    }

    #[test]
    fn cholesky_qr2_is_an_orthonormal_factorization_of_a_well_conditioned_matrix() {
        let a = graded(300, 24, 3.0);
        let (q, r) = cholesky_qr2(a.as_ref()).expect("condition about 1e3");
        let qtq = product(q.transpose(), q.as_ref(), Par::Seq);
        let qr = product(q.as_ref(), r.as_ref(), Par::Seq);
        for i in 0..24 {
            for j in 0..24 {
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((qtq[(i, j)] - want).abs() < 1e-14, "Q^T Q ({i}, {j})");
                if i > j {
                    assert_eq!(r[(i, j)], 0.0, "R upper triangular");
                }
            }
        }
        let err = (0..300)
            .flat_map(|i| (0..24).map(move |j| (i, j)))
            .fold(0.0f64, |m, (i, j)| m.max((qr[(i, j)] - a[(i, j)]).abs()));
        assert!(err < 1e-14, "|QR - A| = {err:e}");
    }

    /// An ill-conditioned factor is left to faer's SVD: Cholesky QR is not
    /// used beyond its range (the certificate does not depend on it, but
    /// its approximations would be poor).
    #[test]
    fn cholesky_qr2_declines_an_ill_conditioned_matrix() {
        assert!(cholesky_qr2(graded(300, 24, 9.0).as_ref()).is_none());
        let mut rank_deficient = graded(50, 6, 0.0);
        for i in 0..50 {
            rank_deficient[(i, 5)] = rank_deficient[(i, 4)];
        }
        assert!(cholesky_qr2(rank_deficient.as_ref()).is_none());
    }
}
