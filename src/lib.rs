//! # specbound
//!
//! Certified spectral quantities of Transformer weight matrices. Every
//! singular value, norm and Schatten quantity is returned as an
//! [`enclosure::Enclosure`] that provably contains the exact value for the
//! weights as stored; where that cannot be proven the answer is
//! [`enclosure::Inconclusive`] with a reason.
//!
//! ## Where to start
//!
//! - One matrix: [`linalg::certify_singular_values`], then
//!   [`spectral::summarize`] for its norms and rank.
//! - A model: [`certify::certify`] with a [`certify::Job`], the one entry
//!   point of certifying a checkpoint (the `certify` command and the
//!   Python module come here).
//! - A command as the binary runs it: [`cmd`] (one module per command;
//!   defaults in [`cmd::defaults`]).
//! - What is guaranteed, and by which lemma: [`guarantees`] and [`proofs`]
//!   (one page per lemma; every function that returns an enclosure names
//!   its lemma, linked there).
//!
//! ```
//! use specbound::linalg::{certify_singular_values, SvdOptions};
//! use specbound::matrix::DenseMatrix;
//!
//! // diag(3, 1/10): sigma_1 = 3 exactly, sigma_2 encloses 0.1 (as stored).
//! let a = DenseMatrix { rows: 2, cols: 2, data: vec![3.0, 0.0, 0.0, 0.1] };
//! let sv = certify_singular_values(&a, &SvdOptions::default()).unwrap();
//! assert!(sv.values[0].enclosure.lo() <= 3.0 && 3.0 <= sv.values[0].enclosure.hi());
//! ```
//!
//! ## Cargo features
//!
//! - `nalgebra` (off): [`matrix::DenseMatrix`] from and into
//!   `nalgebra::DMatrix<f64>`, exact copies. Off by default: the engine
//!   never runs nalgebra, and it shortens the first build (22 s of compile
//!   time on 2 cores with simba and wide).
//! - `cuda` (off): the GPU route, `--device cuda` (`docs/certify.md`, "GPU").
//!
//! ## The pipeline, one module per stage
//!
//! Layering is one-way, pinned by `tests/layering.rs`: a module imports
//! only modules at or below its own level.
//!
//! 0. [`matrix`] (dense matrices), [`enclosure`] (the interval types);
//! 1. [`io`]: reading weight files of every format, exact conversion to f64;
//! 2. [`arch`]: architecture detection and the proxy matrices of each
//!    family; [`progress`]: the progress hooks and the fronts' [`progress::Ui`];
//! 3. [`linalg`]: certified linear algebra (approximate SVD, then
//!    certification: residual bounds, exact Gram, MPFR);
//! 4. [`spectral`]: derived quantities (norms, Schatten, rank);
//! 5. [`bounds`]: the paper's proxies and bounds, and the norm-based measures;
//! 6. [`certificate`]: the certificate's types, written and read strictly;
//! 7. [`certify`]: a model to its certificate (or a shard's part);
//! 8. [`report`]: text, JSON, CSV, the study's figures and HTML page;
//! 9. [`evidence`]: `verify`, `audit` and `diff` of claims against
//!    certified values;
//! 10. [`study`]: many checkpoints to tables, figures and a report;
//!     `merge`: shards' parts, re-derived, into one certificate;
//! 11. [`cmd`]: one module per command, the only layer the two fronts (the
//!     binary and the Python module) call.
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
pub mod guarantees;
pub mod io;
pub mod linalg;
pub mod matrix;
pub(crate) mod merge;
pub mod progress;
pub mod proofs;
pub mod report;
pub mod spectral;
pub mod study;
