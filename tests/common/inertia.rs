//! An exact oracle for the singular values of any matrix with float
//! (dyadic) entries: Sylvester's law of inertia applied to `A^T A - x I`
//! in exact rational arithmetic. Included by `#[path]` where needed.

#![allow(dead_code)]

use rug::Rational;
use specbound::enclosure::Enclosure;
use specbound::matrix::DenseMatrix;

/// `G = A^T A` (the smaller side: `A A^T` when `rows < cols`), exactly.
#[allow(clippy::needless_range_loop)]
pub fn exact_gram(a: &DenseMatrix) -> Vec<Vec<Rational>> {
    let q: Vec<Rational> = a
        .data
        .iter()
        .map(|&x| Rational::from_f64(x).expect("finite"))
        .collect();
    let (m, n) = (a.rows, a.cols);
    let at = |i: usize, j: usize| &q[i * n + j];
    let k = m.min(n);
    let mut g = vec![vec![Rational::new(); k]; k];
    for i in 0..k {
        for j in 0..=i {
            let mut s = Rational::new();
            if m >= n {
                for r in 0..m {
                    s += Rational::from(at(r, i) * at(r, j));
                }
            } else {
                for c in 0..n {
                    s += Rational::from(at(i, c) * at(j, c));
                }
            }
            g[i][j] = s.clone();
            g[j][i] = s;
        }
    }
    g
}

/// `(#{lambda < x}, #{lambda = x}, #{lambda > x})` for the eigenvalues of
/// the symmetric rational matrix `g`: the inertia of `g - x I`, kept by
/// every congruence of the symmetric elimination below (1x1 pivots on a
/// nonzero diagonal entry; 2x2 pivots `[[0, b], [b, 0]]`, inertia (1, 1),
/// when the diagonal is zero; a zero remainder adds zeros).
pub fn inertia(g: &[Vec<Rational>], x: &Rational) -> (usize, usize, usize) {
    let mut m: Vec<Vec<Rational>> = g.to_vec();
    for (i, row) in m.iter_mut().enumerate() {
        row[i] -= x;
    }
    let (mut neg, mut zero, mut pos) = (0, 0, 0);
    let mut live: Vec<usize> = (0..g.len()).collect();
    while !live.is_empty() {
        if let Some(&k) = live.iter().find(|&&k| m[k][k] != 0) {
            let p = m[k][k].clone();
            if p > 0 {
                pos += 1
            } else {
                neg += 1
            }
            live.retain(|&i| i != k);
            for &i in &live {
                if m[i][k] == 0 {
                    continue;
                }
                let f = Rational::from(&m[i][k] / &p);
                for &j in &live {
                    let t = Rational::from(&f * &m[k][j]);
                    m[i][j] -= t;
                }
            }
            continue;
        }
        let pair = live
            .iter()
            .flat_map(|&i| live.iter().map(move |&j| (i, j)))
            .find(|&(i, j)| i != j && m[i][j] != 0);
        let Some((i, j)) = pair else {
            zero += live.len();
            break;
        };
        pos += 1;
        neg += 1;
        let b = m[i][j].clone();
        live.retain(|&r| r != i && r != j);
        let old = m.clone();
        for &r in &live {
            for &s in &live {
                let t = Rational::from(&old[r][i] * &old[j][s])
                    + Rational::from(&old[r][j] * &old[i][s]);
                m[r][s] -= t / &b;
            }
        }
    }
    (neg, zero, pos)
}

/// Whether `sigma_i` (1-based `i`, decreasing order) of the matrix with
/// exact Gram matrix `g` lies in `e`: `lambda_i in [lo^2, hi^2]`, i.e.
/// fewer than `i` eigenvalues above `hi^2` and at least `i` at or above `lo^2`.
pub fn sigma_in(g: &[Vec<Rational>], i: usize, e: &Enclosure) -> bool {
    let lo = Rational::from_f64(e.lo()).expect("finite");
    let hi = Rational::from_f64(e.hi()).expect("finite");
    sigma_in_rational(g, i, &lo, &hi)
}

/// [`sigma_in`] for exact rational ends `0 <= lo <= hi`.
pub fn sigma_in_rational(g: &[Vec<Rational>], i: usize, lo: &Rational, hi: &Rational) -> bool {
    let (_, _, above) = inertia(g, &Rational::from(hi * hi));
    let (below, _, _) = inertia(g, &Rational::from(lo * lo));
    *lo >= 0 && above < i && g.len() - below >= i
}

/// The exact value of a decimal string `[-]d[.ddd][e[+-]x]` (MPFR's
/// output), or `None` if it is not one.
#[allow(dead_code)]
pub fn decimal(s: &str) -> Option<Rational> {
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let (mant, exp) = match s.find(['e', 'E']) {
        Some(k) => (&s[..k], s[k + 1..].parse::<i32>().ok()?),
        None => (s, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let digits = format!("{int}{frac}");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut q = Rational::from(rug::Integer::from_str_radix(&digits, 10).ok()?);
    let e = exp - frac.len() as i32;
    let ten = Rational::from(rug::Integer::u_pow_u(10, e.unsigned_abs()));
    if e >= 0 {
        q *= ten;
    } else {
        q /= ten;
    }
    Some(if neg { -q } else { q })
}

/// The exact rank of the matrix with exact Gram matrix `g`.
#[allow(dead_code)]
pub fn exact_rank(g: &[Vec<Rational>]) -> usize {
    let (_, zero, _) = inertia(g, &Rational::new());
    g.len() - zero
}
