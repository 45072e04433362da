//! Every default of a command's parameters, declared once. The binary's
//! arguments (`default_value`), the Python module's signatures (pyo3's
//! `signature`) and the library's option types read them from here or from
//! the library constant each one names; what cannot read a constant (the
//! Python `text_signature` strings and the `.pyi` stubs) is pinned to them
//! by tests (`python/tests/test_defaults.py` through
//! `specbound._specbound.DEFAULTS`, and stubtest).
//!
//! ```
//! use specbound::cmd::defaults;
//! assert_eq!(defaults::RTOL, 1e-11);
//! assert_eq!(defaults::L_PHI, "1.13");
//! ```

/// The device: the CPU (`cpu | cuda | auto`).
pub const DEVICE: &str = "cpu";

/// `L_phi` of `certify`, `study` and `inspect`: the GELU bound of the
/// paper's code (`crate::arch::PAPER_L_PHI`).
pub const L_PHI: &str = crate::arch::PAPER_L_PHI;

/// The precision of `certify`, `study`, `spectra`, `verify --model` and
/// `audit`: binary64 is enough for the paper's targets.
pub const PRECISION: &str = "f64";

/// The precision of `svd`: escalate until [`RTOL`] is met.
pub const SVD_PRECISION: &str = "auto";

/// The target relative radius of `--precision auto`
/// (`crate::linalg::DEFAULT_RTOL`).
pub const RTOL: f64 = crate::linalg::DEFAULT_RTOL;

/// The Schatten exponents of `svd` and `spectra`, as the command line
/// writes them.
pub const SCHATTEN_P: &str = "1,2";

/// The layers of the primary model in the study's figure 1.
pub const SPECTRUM_LAYERS: &str = "0-3";

/// How text output prints intervals (`shared`, `pm`, `bounds`).
pub const STYLE: &str = "shared";

/// The tolerances of `audit` (relative, absolute) and `diff` (relative):
/// none, so that every claim is held to its own digits.
pub const CLAIM_RTOL: f64 = 0.0;

/// See [`CLAIM_RTOL`].
pub const CLAIM_ATOL: f64 = 0.0;

/// How many unit roundoffs of the certified value a gap may be and count
/// as float32/float64 rounding in `audit`.
pub const ROUNDING_UNITS: f64 = 1.0;

/// The largest MPFR precision a certificate may state for its
/// recomputation (`verify --model`).
pub const MAX_MPFR_BITS: u32 = crate::evidence::verify::DEFAULT_MAX_MPFR_BITS;

#[cfg(test)]
mod tests {
    use super::*;

    /// The library's option types default to what the fronts declare.
    #[test]
    fn library_defaults_are_the_fronts() {
        let c = crate::certify::CertifyOptions::default();
        assert_eq!(c.precision, PRECISION.parse().unwrap());
        assert_eq!(c.l_phi.as_str(), L_PHI);
        assert_eq!(crate::linalg::SvdOptions::default().rtol, RTOL);
        assert_eq!(
            crate::linalg::SvdOptions::default().precision,
            SVD_PRECISION.parse().unwrap()
        );
    }
}
