//! One proxy matrix certified: its singular values, then its norms and
//! rank ([`certify_matrix`]; [`certify_matrix_owned`] when the caller gives
//! the matrix up, so that its copy is freed early), and the entry a part
//! or certificate states for it ([`spectrum_entry`]).

use crate::arch::{MatrixId, ProxyMatrix, ProxySource};
use crate::certificate::{CertInterval, SpectrumEntry};
use crate::enclosure::Inconclusive;
use crate::linalg::factored::certify_factored;
use crate::linalg::{certify_singular_values, SingularValues, SvdOptions};
use crate::spectral::{summarize, summarize_factored, SpectralSummary};

/// Certified singular values and spectral summary of one proxy matrix.
#[derive(Clone, Debug)]
pub struct MatrixResult {
    /// Which matrix.
    pub id: MatrixId,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Certified singular values.
    pub sv: SingularValues,
    /// Certified norms and rank.
    pub summary: SpectralSummary,
}

/// Certifies one proxy matrix: singular values, then norms and rank.
///
/// *Guarantee: certified enclosure* of every singular value and summary
/// quantity of the exact matrix ([`proofs/residual-single-pair.md`](crate::proofs::residual_single_pair), L6, and
/// the lemmas `certify_singular_values` names; [`proofs/factored-product.md`](crate::proofs::factored_product)
/// for factored products; [`proofs/derived-quantities.md`](crate::proofs::derived_quantities), L15).
pub fn certify_matrix(
    pm: &ProxyMatrix,
    opts: &SvdOptions,
) -> Result<(SingularValues, SpectralSummary), Inconclusive> {
    let wrap = |e: Inconclusive| Inconclusive::new(format!("{}: {}", pm.id, e.reason));
    match &pm.source {
        ProxySource::Factored { b, c } => {
            let sv = certify_factored(b, c, opts).map_err(wrap)?;
            let s = summarize_factored(b, c, &sv).map_err(wrap)?;
            Ok((sv, s))
        }
        ProxySource::Dense(a) => {
            let sv = certify_singular_values(a, opts).map_err(wrap)?;
            let s = summarize(a, &sv).map_err(wrap)?;
            Ok((sv, s))
        }
    }
}

/// [`certify_matrix`] on a matrix the caller gives up: a dense matrix's
/// entry norms are enclosed first, then it is prepared (scaled and oriented
/// exactly, `linalg::dense::prepare`) and dropped before its singular values
/// are certified, so that its f64 copy is not alive next to the working set
/// of the certification (docs/certify.md, "Memory").
///
/// *Guarantee: certified enclosure*, as [`certify_matrix`], by the same
/// lemmas (`linalg::certify_prepared` names those of the singular values;
/// [`proofs/derived-quantities.md`](crate::proofs::derived_quantities), L15, and [`proofs/compensated-sum.md`](crate::proofs::compensated_sum),
/// L12, for the summary).
pub(crate) fn certify_matrix_owned(
    pm: ProxyMatrix,
    opts: &SvdOptions,
) -> Result<(SingularValues, SpectralSummary), Inconclusive> {
    let id = pm.id;
    let wrap = |e: Inconclusive| Inconclusive::new(format!("{id}: {}", e.reason));
    match pm.source {
        ProxySource::Dense(a) => {
            let (rows, cols) = (a.rows, a.cols);
            crate::linalg::check_preparable(&a).map_err(wrap)?;
            let (frob, norms) = crate::spectral::enclose_entry_summaries(&a, opts.par);
            let frob = frob.map_err(wrap)?;
            let (n21, n11) = norms.map_err(wrap)?;
            let prep = crate::linalg::prepare_owned_after_check(a);
            let sv = match prep {
                None => crate::linalg::zero_singular_values(rows, cols),
                Some(prep) => {
                    crate::linalg::certify_prepared(&prep, rows, cols, opts).map_err(wrap)?
                }
            };
            let s = crate::spectral::summarize_with(&sv, frob, n21, n11).map_err(wrap)?;
            Ok((sv, s))
        }
        source @ ProxySource::Factored { .. } => {
            certify_matrix(&ProxyMatrix { source, ..pm }, opts)
        }
    }
}

/// The certified spectral quantities of one result, as a part holds them
/// (the same f64 ends: the conversion is exact).
pub(crate) fn spectrum_entry(r: &MatrixResult) -> SpectrumEntry {
    let nz = r.sv.values.len() - r.sv.structural_zeros;
    let s = &r.summary;
    let binary64_positive =
        r.sv.values
            .iter()
            .filter(|v| v.enclosure.lo() > 0.0)
            .count() as u64;
    SpectrumEntry {
        layer: r.id.layer,
        head: r.id.head,
        expert: r.id.expert,
        kind: r.id.kind,
        rows: r.rows,
        cols: r.cols,
        spectral_norm: CertInterval::from(s.spectral_norm),
        frobenius_norm: CertInterval::from(s.frobenius_norm),
        nuclear_norm: CertInterval::from(s.nuclear_norm),
        norm_21: CertInterval::from(s.norm_21),
        norm_11: CertInterval::from(s.norm_11),
        stable_rank: s.stable_rank.map(CertInterval::from),
        // The rank its binary64 values imply (`verify` re-derives it from
        // them): a value positive only by its decimal ends (below the least
        // positive double, `proofs/exact-rank.md`) is stated as its ends say.
        rank: CertInterval {
            lo: s.rank.lo.min(binary64_positive),
            hi: s.rank.hi,
        },
        singular_values: r.sv.values[..nz]
            .iter()
            .map(|v| CertInterval::from(v.enclosure))
            .collect(),
        structural_zeros: r.sv.structural_zeros,
        method: method_list(&r.sv),
    }
}

/// The method names of a matrix's values (sorted, distinct), followed by
/// the notes of stages that failed.
pub(super) fn method_list(sv: &SingularValues) -> Vec<String> {
    let mut methods: Vec<String> = sv.values.iter().map(|v| v.method.name()).collect();
    methods.sort();
    methods.dedup();
    // A stage that failed, was skipped or fell short is said, not hidden.
    methods.extend(sv.notes.iter().map(|n| format!("note: {n}")));
    methods
}
