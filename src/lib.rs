//! # specbound
//!
//! Certified spectral quantities of Transformer weight matrices. Every
//! singular value, norm and Schatten quantity is returned as an
//! [`enclosure::Enclosure`] that provably contains the exact value for the
//! weights as stored; where that cannot be proven the answer is
//! [`enclosure::Inconclusive`] with a reason.
//!
//! Pipeline (one module per stage):
//! - [`io`]: reading matrices (`.npy`, `.safetensors`), exact conversion to f64;
//! - [`linalg`]: certified linear algebra (approximate SVD, then certification);
//! - [`spectral`]: derived quantities (norms, Schatten, rank);
//! - [`report`]: JSON and table output, the study's figures and HTML page;
//! - [`study`]: many checkpoints to certificates, tables, figures and a report;
//! - [`cmd`]: one module per command, the only layer the two fronts (the
//!   binary and the Python module) call.
//!
//! Layering is one-way, pinned by `tests/layering.rs`: io -> arch -> linalg
//! -> spectral -> bounds -> certificate -> certify -> report -> evidence ->
//! study -> cmd -> fronts; a module imports only modules at or below its own
//! level.
//!
//! Soundness arguments live in `proofs/` (one file per lemma); every
//! function that returns an enclosure names its lemma.
#![deny(missing_docs)]
// `!(x < y)` is deliberate throughout: it is true for NaN, which must
// always take the inconclusive branch.
#![allow(clippy::neg_cmp_op_on_partial_ord)]

pub mod arch;
pub mod bounds;
pub mod certificate;
pub mod certify;
pub mod cmd;
pub mod enclosure;
pub mod evidence;
pub mod io;
pub mod linalg;
pub mod matrix;
pub mod merge;
pub mod progress;
pub mod report;
pub mod spectral;
pub mod study;
