//! `specbound verify`: checks a certificate.
//!
//! Without a model, every aggregate is re-derived from the stated inputs
//! with an independent MPFR interval evaluation ([`super::mpfr_interval`])
//! and must lie inside the stated interval; `p_opt` must be exactly the set
//! of grid points that the stated contributions allow as minimisers. With a
//! model, the weight-file hashes must match and every matrix quantity is
//! recomputed from the weights; each recomputed enclosure must intersect the
//! stated one (both claim to contain the same exact value).

use std::collections::BTreeMap;
use std::path::Path;

use super::mpfr_interval::MI;
use super::parse::{parse_certificate, Cert, CertMatrix, CI};
use super::EvidenceError;
use crate::arch::{ArchOverrides, MatrixType};
use crate::certify::{certify_model, CertifyOptions};
use crate::io::checkpoint::Checkpoint;

/// Outcome of a verification.
#[derive(Debug)]
pub struct Verdict {
    /// Number of checks that passed before the first failure (or all).
    pub checks: usize,
    /// The first failing check: which quantity and why.
    pub failure: Option<String>,
}

struct Checker {
    checks: usize,
    failure: Option<String>,
}

impl Checker {
    fn fail(&mut self, msg: String) {
        if self.failure.is_none() {
            self.failure = Some(msg);
        }
    }
    /// The stated interval must contain the implied one.
    fn contains(&mut self, at: &str, stated: CI, implied: &MI, from: &str) {
        if self.failure.is_some() {
            return;
        }
        if implied.inside(stated.lo, stated.hi) {
            self.checks += 1;
        } else {
            self.fail(format!(
                "{at}: stated [{:e}, {:e}] does not contain {} implied by {from}",
                stated.lo,
                stated.hi,
                implied.describe()
            ));
        }
    }
    /// Two enclosures of the same exact value must intersect.
    fn meets(&mut self, at: &str, stated: CI, other: CI, from: &str) {
        if self.failure.is_some() {
            return;
        }
        if stated.lo <= other.hi && other.lo <= stated.hi {
            self.checks += 1;
        } else {
            self.fail(format!(
                "{at}: stated [{:e}, {:e}] is disjoint from [{:e}, {:e}] {from}",
                stated.lo, stated.hi, other.lo, other.hi
            ));
        }
    }
}

fn mi(x: CI) -> MI {
    MI::from_f64(x.lo.max(0.0), x.hi.max(0.0)).expect("validated finite lo <= hi")
}

type Key = (usize, i64, MatrixType);

fn index(c: &Cert) -> Result<BTreeMap<Key, &CertMatrix>, String> {
    let mut map = BTreeMap::new();
    for w in &c.matrices {
        if map.insert((w.layer, w.head, w.kind), w).is_some() {
            return Err(format!(
                "{}: duplicate matrix (layer {}, head {}, {})",
                w.at,
                w.layer,
                w.head,
                w.kind.name()
            ));
        }
    }
    for l in 0..c.layers {
        for h in 0..c.heads as i64 {
            for k in [MatrixType::QK, MatrixType::VTilde] {
                if !map.contains_key(&(l, h, k)) {
                    return Err(format!(
                        "$.matrices: missing layer {l} head {h} {}",
                        k.name()
                    ));
                }
            }
        }
        for k in [MatrixType::MIn, MatrixType::MOut] {
            if !map.contains_key(&(l, -1, k)) {
                return Err(format!("$.matrices: missing layer {l} {}", k.name()));
            }
        }
    }
    if map.len() != c.layers * (2 * c.heads + 2) {
        return Err(format!(
            "$.matrices: {} entries, expected {}",
            map.len(),
            c.layers * (2 * c.heads + 2)
        ));
    }
    Ok(map)
}

/// `sum_i sigma_i^(k/m)` for k = 1..=2m, as `(root_m(sigma_i))^k` sums.
fn power_sums(w: &CertMatrix, m: usize) -> Vec<MI> {
    let mut sums = vec![MI::int(0); 2 * m + 1];
    for s in &w.singular_values {
        let r = mi(*s).pow_q(1, m as u32);
        let mut acc = MI::int(1);
        for sum in sums.iter_mut().skip(1) {
            acc = acc.mul(&r);
            *sum = sum.add(&acc);
        }
    }
    sums
}

/// Re-derives every aggregate of the certificate from its stated inputs.
pub fn verify_internal(c: &Cert) -> Verdict {
    let mut ck = Checker {
        checks: 0,
        failure: None,
    };
    let map = match index(c) {
        Ok(m) => m,
        Err(e) => {
            return Verdict {
                checks: 0,
                failure: Some(e),
            }
        }
    };
    let Some(l_phi) = MI::decimal(&c.l_phi) else {
        return Verdict {
            checks: 0,
            failure: Some(format!(
                "$.parameters.l_phi: \"{}\" is not a nonnegative decimal",
                c.l_phi
            )),
        };
    };
    let (m, n, ll) = (c.grid_m, MI::int(c.hidden as u64), MI::int(c.layers as u64));
    let c2 = |l: usize, h: i64, k: MatrixType| mi(map[&(l, h, k)].spectral_norm);
    let n21 = |l: usize, h: i64, k: MatrixType| mi(map[&(l, h, k)].norm_21);
    // Per-matrix aggregates of the singular values.
    for w in &c.matrices {
        let at = &w.at;
        let top = w
            .singular_values
            .first()
            .copied()
            .unwrap_or(CI { lo: 0.0, hi: 0.0 });
        ck.contains(
            &format!("{at}.spectral_norm"),
            w.spectral_norm,
            &mi(top),
            "sigma_1 (singular_values[0])",
        );
        let nuc = w
            .singular_values
            .iter()
            .fold(MI::int(0), |acc, s| acc.add(&mi(*s)));
        ck.contains(
            &format!("{at}.nuclear_norm"),
            w.nuclear_norm,
            &nuc,
            "the sum of the singular values",
        );
        let sq = w
            .singular_values
            .iter()
            .fold(MI::int(0), |acc, s| acc.add(&mi(*s).pow_q(2, 1)))
            .sqrt();
        let sq_ci = CI {
            lo: sq.lo.to_f64_round(rug::float::Round::Down),
            hi: sq.hi.to_f64_round(rug::float::Round::Up),
        };
        ck.meets(
            &format!("{at}.frobenius_norm"),
            w.frobenius_norm,
            sq_ci,
            "implied by sqrt(sum sigma^2)",
        );
        let rank_lo = w.singular_values.iter().filter(|s| s.lo > 0.0).count() as u64;
        let rank_hi = w.singular_values.iter().filter(|s| s.hi > 0.0).count() as u64;
        if ck.failure.is_none() {
            if w.rank.0 <= rank_lo && rank_hi <= w.rank.1 {
                ck.checks += 1;
            } else {
                ck.fail(format!("{at}.rank: stated [{}, {}] does not contain [{rank_lo}, {rank_hi}] implied by the singular values", w.rank.0, w.rank.1));
            }
        }
        if let Some(sr) = w.stable_rank {
            match mi(w.frobenius_norm)
                .pow_q(2, 1)
                .div(&mi(w.spectral_norm).pow_q(2, 1))
            {
                Some(x) => ck.contains(
                    &format!("{at}.stable_rank"),
                    sr,
                    &x,
                    "frobenius_norm^2 / spectral_norm^2",
                ),
                None => ck.fail(format!(
                    "{at}.stable_rank: stated although spectral_norm may be 0"
                )),
            }
        }
    }
    // alpha, xi per layer.
    let factor: Vec<MI> = (0..c.layers)
        .map(|k| {
            let mut sum = MI::int(0);
            for h in 0..c.heads as i64 {
                let qk = c2(k, h, MatrixType::QK).mul(&MI::int(4)).add(&MI::int(1));
                sum = sum.add(&c2(k, h, MatrixType::VTilde).mul(&qk));
            }
            l_phi
                .mul(&c2(k, -1, MatrixType::MIn))
                .mul(&c2(k, -1, MatrixType::MOut))
                .mul(&sum)
        })
        .collect();
    let alpha: Vec<MI> = (0..c.layers)
        .map(|l| factor[l + 1..].iter().fold(MI::int(1), |acc, f| acc.mul(f)))
        .collect();
    let xi: Vec<MI> = (0..c.layers)
        .map(|l| {
            let (cin, cout) = (c2(l, -1, MatrixType::MIn), c2(l, -1, MatrixType::MOut));
            let mut x = MI::int(0);
            for h in 0..c.heads as i64 {
                let cv = c2(l, h, MatrixType::VTilde);
                x = x.add(
                    &cout
                        .mul(&cin)
                        .mul(&cv)
                        .mul(&n21(l, h, MatrixType::QK))
                        .pow_q(2, 3),
                );
                x = x.add(
                    &cout
                        .mul(&cin)
                        .mul(&n21(l, h, MatrixType::VTilde))
                        .pow_q(2, 3),
                );
            }
            x = x.add(&cout.mul(&n21(l, -1, MatrixType::MIn)).pow_q(2, 3));
            x.add(&n21(l, -1, MatrixType::MOut).pow_q(2, 3))
        })
        .collect();
    for (l, (a, x)) in c.layer_values.iter().enumerate() {
        ck.contains(
            &format!("$.layers[{l}].alpha"),
            *a,
            &alpha[l],
            "the stated spectral norms and l_phi",
        );
        ck.contains(
            &format!("$.layers[{l}].xi"),
            *x,
            &xi[l],
            "the stated spectral and (2,1)-norms",
        );
    }
    // gamma, scale, contributions, minima, p_opt.
    let mut ours = MI::int(c.layers as u64).sqrt();
    for w in &c.matrices {
        let at = &w.at;
        let l = w.layer;
        let (cin, cout) = (c2(l, -1, MatrixType::MIn), c2(l, -1, MatrixType::MOut));
        let gamma = match w.kind {
            MatrixType::QK => MI::int(2)
                .mul(&c2(l, w.head, MatrixType::VTilde))
                .mul(&cout)
                .mul(&cin),
            MatrixType::VTilde => cout.mul(&cin),
            MatrixType::MIn => cout,
            MatrixType::MOut => MI::int(1),
        };
        ck.contains(
            &format!("{at}.alpha"),
            w.alpha,
            &alpha[l],
            "the stated spectral norms and l_phi",
        );
        ck.contains(
            &format!("{at}.gamma"),
            w.gamma,
            &gamma,
            "the stated spectral norms",
        );
        let scale = gamma.mul(&alpha[l]).mul(&ll);
        ck.contains(&format!("{at}.scale"), w.scale, &scale, "gamma alpha L");
        if ck.failure.is_some() {
            break;
        }
        let sums = power_sums(w, m);
        for &(k, stated) in &w.contributions {
            let implied = if k == 0 {
                MI::from_f64(w.rank.0 as f64, w.rank.1 as f64)
                    .expect("ranks")
                    .mul(&n)
                    .sqrt()
            } else {
                let (k32, m32) = (k as u32, m as u32);
                let d = k32 + 2 * m32;
                sums[k]
                    .pow_q(m32, d)
                    .mul(&scale.pow_q(k32, d))
                    .mul(&n.pow_q(k32 + m32, d))
            };
            ck.contains(
                &format!("{at}.contributions[{k}].value"),
                stated,
                &implied,
                "the stated singular values (rank at p = 0), scale and N",
            );
        }
        let min_hi = w
            .contributions
            .iter()
            .map(|(_, x)| x.hi)
            .fold(f64::INFINITY, f64::min);
        let min_lo = w
            .contributions
            .iter()
            .map(|(_, x)| x.lo)
            .fold(f64::INFINITY, f64::min);
        let implied_min =
            MI::from_f64(min_lo.max(0.0), min_hi.max(min_lo.max(0.0))).expect("finite");
        ck.contains(
            &format!("{at}.min_contribution"),
            w.min_contribution,
            &implied_min,
            "the stated contributions",
        );
        let implied_opt: Vec<usize> = w
            .contributions
            .iter()
            .filter(|(_, x)| x.lo <= min_hi)
            .map(|(k, _)| *k)
            .collect();
        if ck.failure.is_none() {
            if implied_opt == w.p_opt {
                ck.checks += 1;
            } else {
                ck.fail(format!(
                    "{at}.p_opt: stated {:?} but the stated contributions allow exactly {:?} (as k/{m})",
                    w.p_opt, implied_opt
                ));
            }
        }
        ours = ours.add(&mi(w.min_contribution));
    }
    ck.contains(
        "$.bounds.ours",
        c.ours,
        &ours,
        "the stated minimum contributions plus sqrt(L)",
    );
    let inner = (0..c.layers).fold(MI::int(1), |acc, l| {
        acc.add(&alpha[l].pow_q(2, 3).mul(&xi[l]))
    });
    ck.contains(
        "$.bounds.edelman",
        c.edelman,
        &inner.pow_q(3, 2),
        "alpha and xi of every layer",
    );
    Verdict {
        checks: ck.checks,
        failure: ck.failure,
    }
}

/// Checks a certificate against the model it claims to describe: file
/// hashes, then every matrix quantity recomputed from the weights must
/// intersect the stated enclosure.
pub fn verify_with_model(c: &Cert, model: &Path) -> Result<Verdict, EvidenceError> {
    let ckpt = Checkpoint::open(model).map_err(|e| EvidenceError::Model(e.to_string()))?;
    let hashes = ckpt.file_hashes();
    let mut checks = 0usize;
    for (i, (f, sha)) in c.files.iter().enumerate() {
        match hashes.iter().find(|h| &h.file == f) {
            None => {
                return Ok(Verdict {
                    checks,
                    failure: Some(format!(
                        "$.model.files[{i}]: the model has no weight file '{f}'"
                    )),
                })
            }
            Some(h) if &h.sha256 != sha => {
                return Ok(Verdict {
                    checks,
                    failure: Some(format!(
                    "$.model.files[{i}].sha256: '{f}' has SHA-256 {}, the certificate says {sha}",
                    h.sha256
                )),
                })
            }
            Some(_) => checks += 1,
        }
    }
    if hashes.len() != c.files.len() {
        return Ok(Verdict {
            checks,
            failure: Some(format!(
                "$.model.files: the model has {} weight files, the certificate lists {}",
                hashes.len(),
                c.files.len()
            )),
        });
    }
    let precision: crate::linalg::Precision =
        c.precision
            .parse()
            .map_err(|message| EvidenceError::Malformed {
                file: c.file.clone(),
                at: "$.parameters.precision".into(),
                message,
            })?;
    let opts = CertifyOptions {
        precision,
        l_phi: c.l_phi.clone(),
        grid_m: Some(c.grid_m),
        overrides: ArchOverrides {
            heads: Some(c.heads),
            layers: Some(c.layers),
        },
    };
    let fresh = certify_model(model, &opts).map_err(|e| EvidenceError::Model(e.to_string()))?;
    let fresh = parse_certificate(&fresh.to_json(), "(recomputed)")?;
    let fmap = index(&fresh).map_err(EvidenceError::Model)?;
    let mut ck = Checker {
        checks,
        failure: None,
    };
    for w in &c.matrices {
        let Some(f) = fmap.get(&(w.layer, w.head, w.kind)) else {
            ck.fail(format!("{}: the model has no such proxy matrix", w.at));
            break;
        };
        if (f.rows, f.cols, f.singular_values.len()) != (w.rows, w.cols, w.singular_values.len()) {
            ck.fail(format!(
                "{}: shape or number of nonzero singular values differs from the model",
                w.at
            ));
            break;
        }
        for ((name, stated), (_, other)) in
            w.named_intervals().iter().zip(f.named_intervals().iter())
        {
            ck.meets(
                &format!("{}.{name}", w.at),
                *stated,
                *other,
                "recomputed from the model",
            );
        }
        if ck.failure.is_none() && !(w.rank.0 <= f.rank.1 && f.rank.0 <= w.rank.1) {
            ck.fail(format!(
                "{}.rank: stated [{}, {}] is disjoint from [{}, {}] recomputed from the model",
                w.at, w.rank.0, w.rank.1, f.rank.0, f.rank.1
            ));
        }
    }
    ck.meets(
        "$.bounds.ours",
        c.ours,
        fresh.ours,
        "recomputed from the model",
    );
    ck.meets(
        "$.bounds.edelman",
        c.edelman,
        fresh.edelman,
        "recomputed from the model",
    );
    Ok(Verdict {
        checks: ck.checks,
        failure: ck.failure,
    })
}
