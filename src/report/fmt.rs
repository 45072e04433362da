//! Decimals for people, the one place numbers become text (terminal, the
//! HTML report, figure captions): every interval is rounded
//! *outward*, so the printed decimals, read as exact decimal numbers,
//! enclose the binary64 interval (and so the exact value it encloses).
//! JSON and CSV keep the binary64 ends exactly (shortest round-trip
//! decimals); this module is for text only. [`approx`] is the one
//! exception, for axis labels and prose, and claims no enclosure.
//!
//! Three forms ([`Style`]):
//!
//! * `shared` (default): the digits both ends share, then the two tails,
//!   `20573.02973229[744, 768]` meaning `[20573.02973229744,
//!   20573.02973229768]`; the last digit kept is about a tenth of the width,
//!   so two or three digits differ. Exponent form for magnitudes from 1e16
//!   or below 1e-5: `6.853679052[53, 71]e28`.
//! * `pm`: `mid ± rad`, the radius rounded up to two significant digits so
//!   that `[mid - rad, mid + rad]` contains the interval.
//! * `bounds`: `[lo, hi]`, each end rounded outward to 17 significant digits
//!   (or exact, when a shorter decimal is the binary64 number itself).
//!
//! Integers print as integers (`1`, `[383, 384]`). All arithmetic is on exact
//! rationals (`rug`), and the containment is [`proofs/outward-decimal.md`](crate::proofs::outward_decimal)
//! (L21), property-tested in this module
//! (`printed_decimals_contain_the_interval`).

use rug::{Integer, Rational};

/// How intervals are printed in text.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    /// Shared digits then the differing tails.
    #[default]
    Shared,
    /// `mid ± rad`.
    PlusMinus,
    /// `[lo, hi]` at full precision.
    Bounds,
}

impl std::str::FromStr for Style {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "shared" => Ok(Style::Shared),
            "pm" => Ok(Style::PlusMinus),
            "bounds" => Ok(Style::Bounds),
            o => Err(format!("unknown interval style '{o}' (shared, pm, bounds)")),
        }
    }
}

fn ten_pow(p: i32) -> Rational {
    let t = Integer::from(Integer::u_pow_u(10, p.unsigned_abs()));
    if p >= 0 {
        Rational::from(t)
    } else {
        Rational::from((Integer::from(1), t))
    }
}

/// `x / 10^p` rounded down (`up = false`) or up, as an integer.
fn scaled(x: &Rational, p: i32, up: bool) -> Integer {
    let q = Rational::from(x / &ten_pow(p));
    if up {
        q.ceil().numer().clone()
    } else {
        q.floor().numer().clone()
    }
}

/// Decimal exponent of `|x|` (floor of log10), for `x != 0`.
fn exp10(x: f64) -> i32 {
    // log10 may be off by one near powers of ten: correct it exactly.
    let a = Rational::from_f64(x.abs()).expect("finite");
    let mut e = x.abs().log10().floor() as i32;
    while ten_pow(e) > a {
        e -= 1;
    }
    while ten_pow(e + 1) <= a {
        e += 1;
    }
    e
}

/// `n * 10^p` in positional notation (no exponent).
fn positional(n: &Integer, p: i32) -> String {
    let neg = *n < 0;
    let digits = Integer::from(n.abs_ref()).to_string();
    let body = if p >= 0 {
        if *n == 0 {
            "0".to_string()
        } else {
            format!("{digits}{}", "0".repeat(p as usize))
        }
    } else {
        let k = (-p) as usize;
        let padded = if digits.len() <= k {
            format!("{}{digits}", "0".repeat(k + 1 - digits.len()))
        } else {
            digits
        };
        let (int, frac) = padded.split_at(padded.len() - k);
        format!("{int}.{frac}")
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

/// `n * 10^p` as a mantissa with the decimal point after its first digit
/// of a number whose exponent is `e` (`n * 10^p = m * 10^e`), without the
/// exponent.
fn mantissa(n: &Integer, p: i32, e: i32) -> String {
    positional(n, p - e)
}

/// Whether to write numbers of decimal exponent `e` in exponent form.
fn use_exponent(e: i32) -> bool {
    !(-5..16).contains(&e)
}

fn is_int(x: f64) -> bool {
    x.fract() == 0.0 && x.abs() < 1e300
}

/// The exact decimal of an integer-valued f64.
fn int_text(x: f64) -> String {
    Rational::from_f64(x).expect("finite").numer().to_string()
}

/// One end rounded outward (down for `up = false`) to `sig` significant
/// digits, or exactly when a shorter decimal is the number itself.
fn end(x: f64, up: bool, sig: i32) -> String {
    if x == 0.0 {
        return "0".into();
    }
    if is_int(x) && x.abs() < 1e16 {
        return int_text(x);
    }
    // The shortest round-trip decimal, when it is the binary64 number itself.
    let short = format!("{x:e}");
    if let (Ok(r), Some(v)) = (short.parse::<f64>(), Rational::from_f64(x)) {
        if r == x && parse_decimal(&short).as_ref() == Some(&v) {
            return plain(&short);
        }
    }
    let e = exp10(x);
    let p = e - sig + 1;
    let n = scaled(&Rational::from_f64(x).expect("finite"), p, up);
    if use_exponent(e) {
        // n may have gained a digit (9.99.. rounded up): exponent from n.
        let en = p + n.to_string().trim_start_matches('-').len() as i32 - 1;
        format!("{}e{en}", mantissa(&n, p, en))
    } else {
        positional(&n, p)
    }
}

/// `1.25e0` -> `1.25`, `1e-7` stays; positional for moderate exponents.
fn plain(sci: &str) -> String {
    let (m, e) = sci.split_once('e').unwrap_or((sci, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    if use_exponent(e) {
        return sci.to_string();
    }
    let r = parse_decimal(sci).expect("valid");
    // Digits after the point: those of the mantissa minus the exponent.
    let frac = m.split_once('.').map_or(0, |(_, f)| f.len() as i32) - e;
    let p = -frac.max(0);
    positional(&Rational::from(&r / &ten_pow(p)).numer().clone(), p)
}

/// The exact value of a decimal string (`-12.5e-3`), or `None`.
pub(crate) fn parse_decimal(s: &str) -> Option<Rational> {
    let t = s.trim();
    let (m, e) = match t.find(['e', 'E']) {
        Some(i) => (&t[..i], t[i + 1..].parse::<i32>().ok()?),
        None => (t, 0),
    };
    let (neg, m) = match m.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, m),
    };
    let (int, frac) = m.split_once('.').unwrap_or((m, ""));
    if int.is_empty() && frac.is_empty()
        || !int.chars().chain(frac.chars()).all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let n = Integer::from_str_radix(&format!("{int}{frac}"), 10).ok()?;
    let v = Rational::from(n) * ten_pow(e - frac.len() as i32);
    Some(if neg { -v } else { v })
}

/// An interval `[lo, hi]` (binary64 ends, `lo <= hi`) in the given style,
/// rounded outward: *guarantee*: the printed decimal interval, read
/// exactly, contains `[lo, hi]` ([`proofs/outward-decimal.md`](crate::proofs::outward_decimal), L21; tested
/// exactly in this module).
pub(crate) fn interval(lo: f64, hi: f64, style: Style) -> String {
    if !(lo.is_finite() && hi.is_finite()) || lo > hi {
        return format!("[{lo:e}, {hi:e}]");
    }
    if lo == hi && is_int(lo) && lo.abs() < 1e16 {
        return int_text(lo);
    }
    if is_int(lo) && is_int(hi) && hi.abs() < 1e16 && lo.abs() < 1e16 {
        return format!("[{}, {}]", int_text(lo), int_text(hi));
    }
    match style {
        Style::Bounds => format!("[{}, {}]", end(lo, false, 17), end(hi, true, 17)),
        Style::Shared => shared(lo, hi),
        Style::PlusMinus => plus_minus(lo, hi),
    }
}

/// The decimal position `p` (value of the last digit kept is `10^p`) for
/// an interval: a tenth of the width, but at most 17 significant digits.
fn last_digit(lo: f64, hi: f64) -> i32 {
    let top = exp10(if lo.abs() > hi.abs() { lo } else { hi });
    let finest = top - 16;
    let w = hi - lo;
    if w > 0.0 && w.is_finite() {
        (exp10(w) - 1).max(finest)
    } else {
        finest
    }
}

fn shared(lo: f64, hi: f64) -> String {
    if lo == 0.0 || hi == 0.0 {
        // A zero end reads best on its own: `[0, 3.5e-12]`.
        let p = last_digit(lo, hi);
        let sig = |x: f64| (exp10(x) - p + 1).clamp(1, 17);
        let one = |x: f64, up: bool| {
            if x == 0.0 {
                "0".to_string()
            } else {
                end(x, up, sig(x))
            }
        };
        return format!("[{}, {}]", one(lo, false), one(hi, true));
    }
    if lo == hi {
        // A point: exact when a short decimal is the number, else outward.
        let (a, b) = (end(lo, false, 17), end(hi, true, 17));
        return if a == b {
            a
        } else {
            join_shared(&a, &b, "").unwrap_or_else(|| format!("[{a}, {b}]"))
        };
    }
    let p = last_digit(lo, hi);
    let (rl, rh) = (
        Rational::from_f64(lo).expect("finite"),
        Rational::from_f64(hi).expect("finite"),
    );
    let (nl, nh) = (scaled(&rl, p, false), scaled(&rh, p, true));
    let top = exp10(if lo.abs() > hi.abs() { lo } else { hi });
    // Last kept digit above the units: positional digits would end in
    // padding zeros that read as significant (`25180386090[330, 660]`), so
    // the exponent form is used.
    if use_exponent(top) || p > 0 {
        // Exponent from the larger end after rounding (it may gain a digit).
        let big = if Integer::from(nl.abs_ref()) > Integer::from(nh.abs_ref()) {
            &nl
        } else {
            &nh
        };
        let e = p + big.to_string().trim_start_matches('-').len() as i32 - 1;
        let (a, b) = (mantissa(&nl, p, e), mantissa(&nh, p, e));
        join_shared(&a, &b, &format!("e{e}")).unwrap_or_else(|| plus_minus(lo, hi))
    } else {
        join_shared(&positional(&nl, p), &positional(&nh, p), "")
            .unwrap_or_else(|| plus_minus(lo, hi))
    }
}

/// Longest tail of the shared form: a longer one means the ends share
/// digits only by a carry (`4.[0999, 1000]`), which misleads.
const MAX_TAIL: usize = 4;

/// `prefix[tail_a, tail_b]suffix`, where `a` and `b` are the ends written
/// to the same last digit; both ends in full (`[a, b]`) when the signs or
/// lengths differ or the ends are negative (a shared `-172[47, 34]` reads
/// as one number); `None` when the tails would be longer than [`MAX_TAIL`]
/// digits (the ends share digits only by a carry: the caller prints
/// `mid ± rad` instead).
fn join_shared(a: &str, b: &str, suffix: &str) -> Option<String> {
    if a == b {
        return Some(format!("{a}{suffix}"));
    }
    if a.starts_with('-') || b.starts_with('-') {
        return Some(format!("[{a}{suffix}, {b}{suffix}]"));
    }
    let same_shape = a.len() == b.len() && a.starts_with('-') == b.starts_with('-');
    let k = if same_shape {
        a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
    } else {
        0
    };
    // Keep a sign or a lone "0." out of the prefix only when nothing is shared.
    let prefix = &a[..k];
    let tail = |t: &str| t.bytes().filter(u8::is_ascii_digit).count();
    if tail(&a[k..]).max(tail(&b[k..])) > MAX_TAIL {
        return None;
    }
    if prefix.is_empty() {
        return Some(format!("[{a}{suffix}, {b}{suffix}]"));
    }
    Some(format!("{prefix}[{}, {}]{suffix}", &a[k..], &b[k..]))
}

fn plus_minus(lo: f64, hi: f64) -> String {
    let (rl, rh) = (
        Rational::from_f64(lo).expect("finite"),
        Rational::from_f64(hi).expect("finite"),
    );
    let p = last_digit(lo, hi);
    let m = Rational::from(&rl + &rh) / 2u32;
    let nm = scaled(&m, p, false);
    let mid = Rational::from(&nm) * ten_pow(p);
    let r = std::cmp::max(Rational::from(&mid - &rl), Rational::from(&rh - &mid));
    // The radius rounded up to two significant digits.
    let rad = if r == 0 {
        "0".to_string()
    } else {
        let rf = r.to_f64();
        let er = exp10(if rf > 0.0 { rf } else { f64::MIN_POSITIVE });
        let pr = er - 1;
        let n = scaled(&r, pr, true);
        let en = pr + n.to_string().len() as i32 - 1;
        if !(-3..4).contains(&en) {
            format!("{}e{en}", mantissa(&n, pr, en))
        } else {
            positional(&n, pr)
        }
    };
    let top = exp10(if lo.abs() > hi.abs() { lo } else { hi });
    let mid_text = if use_exponent(top) {
        let e = p + nm.to_string().trim_start_matches('-').len() as i32 - 1;
        format!("{}e{e}", mantissa(&nm, p, e))
    } else {
        positional(&nm, p)
    };
    format!("{mid_text} ± {rad}")
}

/// The decimal interval a printed form denotes (for tests and for readers
/// of the text): `[lo, hi]`, `prefix[a, b]suffix`, `mid ± rad`, or a
/// single number.
pub fn read_back(s: &str) -> Option<(Rational, Rational)> {
    let s = s.trim();
    if let Some((m, r)) = s.split_once(" ± ") {
        let (m, r) = (parse_decimal(m)?, parse_decimal(r)?);
        return Some((Rational::from(&m - &r), m + r));
    }
    if let Some(open) = s.find('[') {
        let close = s.find(']')?;
        let (prefix, suffix) = (&s[..open], &s[close + 1..]);
        let (a, b) = s[open + 1..close].split_once(", ")?;
        let a = parse_decimal(&format!("{prefix}{a}{suffix}"))?;
        let b = parse_decimal(&format!("{prefix}{b}{suffix}"))?;
        return Some((a, b));
    }
    let v = parse_decimal(s)?;
    Some((v.clone(), v))
}

/// An approximate number for axis labels and prose (`1.23e4`, `0.5`): 4
/// significant digits, no claim of enclosure.
pub fn approx(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let a = x.abs();
    if (1e-3..1e5).contains(&a) {
        let s = format!("{x:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        s.to_string()
    } else {
        let s = format!("{x:.3e}");
        tidy(&s)
    }
}

/// MPFR writes `1.2345e3` or `-1.2345e-7`; drop trailing zeros of the
/// mantissa and a `+`/leading-zero-free exponent (`e0` removed).
fn tidy(s: &str) -> String {
    let (mant, exp) = match s.find('e') {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mant = if mant.contains('.') {
        mant.trim_end_matches('0').trim_end_matches('.')
    } else {
        mant
    };
    match exp.map(|e| e.trim_start_matches('+')) {
        Some(e) if e.parse::<i32>().ok() != Some(0) => format!("{mant}e{e}"),
        _ => mant.to_string(),
    }
}

/// A certified interval of a certificate in the default text form
/// ([`Style::Shared`], as the command line prints it): see [`interval`].
///
/// *Guarantee:* the printed decimals enclose `[x.lo, x.hi]`
/// ([`proofs/outward-decimal.md`](crate::proofs::outward_decimal), L21).
pub(crate) fn cert_interval(x: &crate::certificate::CertInterval) -> String {
    interval(x.lo, x.hi, Style::Shared)
}

/// Escapes text for HTML and SVG content and attribute values (here, below
/// both `html` and `figures`, so that neither imports the other for it).
pub(crate) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::{QuickCheck, TestResult};

    fn contains(text: &str, lo: f64, hi: f64) -> bool {
        let Some((a, b)) = read_back(text) else {
            return false;
        };
        a <= Rational::from_f64(lo).unwrap() && Rational::from_f64(hi).unwrap() <= b
    }

    #[test]
    fn examples() {
        let (lo, hi) = (2.057302973229744e4, 2.0573029732297677e4);
        let t = interval(lo, hi, Style::Shared);
        assert_eq!(t, "20573.029732297[44, 68]");
        assert!(contains(&t, lo, hi));
        assert_eq!(interval(1.0, 1.0, Style::Shared), "1");
        assert_eq!(interval(383.0, 384.0, Style::Shared), "[383, 384]");
        let t = interval(6.85367905253727e28, 6.8536790527015545e28, Style::Shared);
        assert_eq!(t, "6.853679052[53, 71]e28");
        // [[0.1]] at mpfr:128: the binary64 ends are both 0.1000000000000000055...
        let t = interval(0.1, 0.1, Style::Shared);
        assert!(contains(&t, 0.1, 0.1), "{t}");
        assert_ne!(t, "0.1");
        let t = interval(lo, hi, Style::PlusMinus);
        assert!(t.contains(" ± "), "{t}");
        assert!(contains(&t, lo, hi), "{t}");
        let t = interval(lo, hi, Style::Bounds);
        assert!(contains(&t, lo, hi), "{t}");
        assert_eq!(interval(0.5, 0.75, Style::Bounds), "[0.5, 0.75]");
        assert!(contains(
            &interval(-2.5e-7, 3.1e-7, Style::Shared),
            -2.5e-7,
            3.1e-7
        ));
    }

    /// Regression (issue 17): shared digits that misled: a negative
    /// interval, a carry across the shared digits, an integer-sized value
    /// padded with zeros.
    #[test]
    fn shared_digits_never_mislead_negative_carry_or_padded_integers() {
        let cases = [
            (-1724.7e12, -1723.4e12),
            (4.0999, 4.1000),
            (25180386090330.5, 25180386090660.25),
            (-3.25, -3.125),
            (999.95, 1000.05),
        ];
        for (lo, hi) in cases {
            let t = interval(lo, hi, Style::Shared);
            assert!(contains(&t, lo, hi), "[{lo:e}, {hi:e}] -> {t}");
            assert!(readable(&t), "[{lo:e}, {hi:e}] -> {t}");
        }
        assert_eq!(
            interval(25180386090330.5, 25180386090660.25, Style::Shared),
            "2.5180386090[33, 67]e13"
        );
        assert!(interval(-3.25, -3.125, Style::Shared).starts_with("[-3."));
    }

    /// What the shared form promises a reader: a bounded length, tails of
    /// at most [`MAX_TAIL`] digits, no shared prefix on negative ends.
    fn readable(t: &str) -> bool {
        if t.len() > 64 {
            return false;
        }
        let Some(open) = t.find('[') else { return true };
        if open == 0 {
            return true; // both ends in full
        }
        let prefix = &t[..open];
        let close = t.find(']').unwrap_or(t.len());
        let tails: Vec<&str> = t[open + 1..close].split(", ").collect();
        !prefix.starts_with('-')
            && tails
                .iter()
                .all(|x| x.bytes().filter(u8::is_ascii_digit).count() <= MAX_TAIL)
    }

    #[test]
    fn printed_intervals_are_readable() {
        fn prop(a: f64, b: f64, scale: i8) -> TestResult {
            let s = 10f64.powi(scale as i32 / 4);
            let (x, y) = (a * s, b * s);
            if !(x.is_finite() && y.is_finite()) {
                return TestResult::discard();
            }
            let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
            let t = interval(lo, hi, Style::Shared);
            if !readable(&t) || !contains(&t, lo, hi) {
                return TestResult::error(format!("[{lo:e}, {hi:e}] -> {t}"));
            }
            TestResult::passed()
        }
        QuickCheck::new()
            .tests(3000)
            .quickcheck(prop as fn(f64, f64, i8) -> TestResult);
    }

    #[test]
    fn printed_decimals_contain_the_interval() {
        fn prop(a: f64, b: f64, scale: i8) -> TestResult {
            let s = 10f64.powi(scale as i32 / 4);
            let (x, y) = (a * s, b * s);
            if !(x.is_finite() && y.is_finite()) {
                return TestResult::discard();
            }
            let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
            // Also near-point intervals: a few ulps wide.
            let hi2 = f64::from_bits(lo.to_bits().wrapping_add(3));
            let mut cases = vec![(lo, hi), (lo, lo)];
            if lo > 0.0 && hi2.is_finite() {
                cases.push((lo, hi2));
            }
            for (l, h) in cases {
                for st in [Style::Shared, Style::PlusMinus, Style::Bounds] {
                    let t = interval(l, h, st);
                    if !contains(&t, l, h) {
                        return TestResult::error(format!("{st:?} [{l:e}, {h:e}] -> {t}"));
                    }
                }
            }
            TestResult::passed()
        }
        QuickCheck::new()
            .tests(3000)
            .quickcheck(prop as fn(f64, f64, i8) -> TestResult);
    }
}
