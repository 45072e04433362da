//! Reading a certificate as untrusted input: a capped read, a syntax pass
//! that allocates nothing, a strict typed parse whose errors name the JSON
//! path (unknown keys, duplicate keys, wrong types, arrays beyond their
//! limit), then [`Certificate::validate`]. Memory for a rejected file stays
//! within the byte cap plus structures no larger than the text they come
//! from.

use std::fmt;
use std::path::Path;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Serializer;

use super::{
    expected_ids, CertInterval, Certificate, FileEntry, GridPoint, HeadsOverrideEntry, InitModel,
    MatrixEntry, MeasuresEntry, ModelInfo, NormsEntry, Parameters, RawWeightEntry, StackEntry,
    Tool, FORMAT, VERSION, VERSION_MEASURES, VERSION_NO_BOUND,
};
use crate::arch::{MatrixId, MatrixType};

/// Largest certificate file read (bytes).
pub(crate) const MAX_BYTES: u64 = 1 << 30;
/// Largest number of proxy matrices accepted.
pub(crate) const MAX_MATRICES: usize = 1 << 20;
/// Largest number of layers accepted.
pub(crate) const MAX_LAYERS: usize = 100_000;
/// Largest grid resolution m, for `certify`, `verify` and the reader alike.
pub const MAX_GRID_M: usize = 1_000;
/// Largest matrix dimension (rows, columns, hidden size, feed-forward width).
pub(crate) const MAX_DIM: usize = 1 << 24;
/// Largest number of attention heads.
pub(crate) const MAX_HEADS: usize = 1 << 16;

/// Why a certificate file was refused: one line naming the file, where in
/// it (a JSON path such as `$.matrices[3].spectral_norm.lo`, or a line and
/// column for a syntax error) and what is wrong.
#[derive(Debug)]
pub enum CertificateError {
    /// The file could not be read.
    Io {
        /// The file.
        file: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a valid certificate.
    Invalid {
        /// The file.
        file: String,
        /// Where in it.
        at: String,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for CertificateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CertificateError::Io { file, source } => {
                write!(f, "{}: cannot read: {source}", crate::io::shown(file))
            }
            CertificateError::Invalid { file, at, message } => {
                write!(f, "{}: {at}: {}", crate::io::shown(file), one_line(message))
            }
        }
    }
}

impl std::error::Error for CertificateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CertificateError::Io { source, .. } => Some(source),
            CertificateError::Invalid { .. } => None,
        }
    }
}

fn one_line(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

pub(crate) fn invalid(
    file: &str,
    at: impl Into<String>,
    message: impl Into<String>,
) -> CertificateError {
    CertificateError::Invalid {
        file: file.to_string(),
        at: at.into(),
        message: message.into(),
    }
}

/// serde's wording, rephrased for people: `missing field `x`` becomes
/// `missing key 'x'`, `invalid type: A, expected B` becomes `expected B,
/// found A`; the " at line L column C" suffix is dropped (the path says where).
fn humanize(msg: &str) -> String {
    let msg = match msg.rfind(" at line ") {
        Some(i) if msg[i..].contains(" column ") => &msg[..i],
        _ => msg,
    };
    let tick = |rest: &str| rest.split('`').nth(1).unwrap_or("").to_string();
    if let Some(rest) = msg.strip_prefix("missing field ") {
        return format!("missing key '{}'", tick(rest));
    }
    if let Some(rest) = msg.strip_prefix("unknown field ") {
        return format!(
            "unknown key '{}' (the format admits no other keys)",
            tick(rest)
        );
    }
    if let Some(rest) = msg.strip_prefix("duplicate field ") {
        return format!("duplicate key '{}'", tick(rest));
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = msg.strip_prefix(prefix) {
            if let Some((found, expected)) = rest.split_once(", expected ") {
                let expected = match expected {
                    "f64" => "a number".to_string(),
                    "u64" | "u32" | "usize" => "a non-negative integer".to_string(),
                    e if e.starts_with("struct ") || e == "a map" => "an object".to_string(),
                    e => e.to_string(),
                };
                return format!("expected {expected}, found {found}");
            }
        }
    }
    msg.to_string()
}

/// The first keys of a certificate or part, read before the rest so that a
/// future version is refused as such rather than for its new keys.
#[derive(serde::Deserialize)]
struct Head {
    format: Option<BoundedStr<64>>,
    version: Option<u64>,
}

/// Reads a regular file of at most [`MAX_BYTES`] bytes (a certificate or
/// a part, named by `what` in messages) through the one open of every
/// input (`io::limits::open_regular`): a FIFO, a device or a directory is
/// refused without reading from it or blocking on it.
pub(crate) fn read_bytes(path: &Path, what: &str) -> Result<Vec<u8>, CertificateError> {
    let file = path.display().to_string();
    crate::io::limits::read_capped(path, MAX_BYTES, what).map_err(|e| match e {
        crate::io::ReadError::Io { source, .. } => CertificateError::Io {
            file: file.clone(),
            source,
        },
        other => {
            let msg = other.to_string();
            let msg = msg
                .strip_prefix(&format!("{}: ", crate::io::shown(&file)))
                .unwrap_or(&msg)
                .to_string();
            invalid(&file, "(file)", msg)
        }
    })
}

/// The strict parse shared by certificates and parts: a syntax pass that
/// allocates nothing, an object, the expected `format` and `version` (read
/// first), then the typed parse whose errors name the JSON path.
pub(crate) fn parse_strict<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    file: &str,
    format: &str,
    versions: &[u32],
) -> Result<T, CertificateError> {
    let syntax = |e: serde_json::Error| {
        invalid(
            file,
            format!("line {} column {}", e.line(), e.column()),
            format!("invalid JSON: {}", humanize(&e.to_string())),
        )
    };
    serde_json::from_slice::<IgnoredAny>(bytes).map_err(syntax)?;
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if first != Some(&b'{') {
        let found = match first {
            Some(b'[') => "an array",
            Some(b'"') => "a string",
            _ => "a number or literal",
        };
        return Err(invalid(
            file,
            "$",
            format!("expected an object, found {found}"),
        ));
    }
    let head: Head = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_data() {
            invalid(file, "$", humanize(&e.to_string()))
        } else {
            syntax(e)
        }
    })?;
    match head.format {
        Some(f) if f.0 == format => {}
        Some(f) => {
            return Err(invalid(
                file,
                "$.format",
                format!("expected \"{format}\", found \"{}\"", f.0),
            ))
        }
        None => return Err(invalid(file, "$", "missing key 'format'")),
    }
    match head.version {
        Some(v) if versions.iter().any(|&w| v == w as u64) => {}
        Some(v) => {
            let known: Vec<String> = versions.iter().map(u32::to_string).collect();
            return Err(invalid(
                file,
                "$.version",
                format!(
                    "unsupported version {v} (this tool reads version {})",
                    known.join(" or ")
                ),
            ));
        }
        None => return Err(invalid(file, "$", "missing key 'version'")),
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let at = if path == "." {
            "$".to_string()
        } else {
            format!("$.{path}")
        };
        invalid(file, at, humanize(&e.inner().to_string()))
    })
}

impl Certificate {
    /// Reads, parses and validates a certificate file (untrusted input),
    /// refusing more than `MAX_BYTES` bytes while reading.
    pub fn read(path: &Path) -> Result<Certificate, CertificateError> {
        let bytes = read_bytes(path, "certificate")?;
        Certificate::parse(&bytes, &path.display().to_string())
    }

    /// Parses and validates certificate JSON (untrusted input); `file` names
    /// it in messages.
    pub fn parse(bytes: &[u8], file: &str) -> Result<Certificate, CertificateError> {
        let cert: Certificate = parse_strict(
            bytes,
            file,
            FORMAT,
            &[VERSION, VERSION_MEASURES, VERSION_NO_BOUND],
        )?;
        cert.validate()
            .map_err(|(at, message)| invalid(file, at, message))?;
        Ok(cert)
    }

    /// Checks everything the types cannot: finite intervals with `lo <= hi`
    /// and nonnegative ends where the quantity is nonnegative, sizes within
    /// their limits, the grid, counts that agree with the shapes, `p_opt`
    /// on the grid and agreeing with its approximations, one entry per
    /// expected matrix in [`MatrixId`] order, one entry per layer. Returns
    /// the JSON path and the problem.
    pub(crate) fn validate(&self) -> Result<(), (String, String)> {
        let err = |at: String, m: String| Err((at, m));
        if self.format != FORMAT {
            return err("$.format".into(), format!("expected \"{FORMAT}\""));
        }
        if ![VERSION, VERSION_MEASURES, VERSION_NO_BOUND].contains(&self.version) {
            return err(
                "$.version".into(),
                format!("unsupported version {}", self.version),
            );
        }
        validate_header(&self.tool, &self.model, &self.parameters)?;
        let md = &self.model;
        let ids = expected_ids(md);
        if self.version == VERSION_NO_BOUND {
            return validate_no_bound(self, &ids);
        }
        self.refuse_no_bound_keys()?;
        let Some(bounds) = &self.bounds else {
            return err(
                "$.bounds".into(),
                format!(
                    "missing (a certificate without a bound is version {VERSION_NO_BOUND} and \
                     says why in bound_absent)"
                ),
            );
        };
        self.validate_matrices(&ids)?;
        self.validate_layers()?;
        check_iv(&bounds.ours, "$.bounds.ours", true)?;
        check_iv(&bounds.edelman, "$.bounds.edelman", true)?;
        validate_measures(self)
    }

    /// What only a certificate without a bound states, refused in one with
    /// bounds: experts, a cross-attention, `bound_absent`, `spectra` (the
    /// paper's reasoning gives no bound for a mixture of experts, nor for
    /// a decoder block, a function of two sequences).
    fn refuse_no_bound_keys(&self) -> Result<(), (String, String)> {
        let md = &self.model;
        let stated = |what: &str| {
            format!(
                "stated in a certificate with bounds (only version {VERSION_NO_BOUND}, \
                 a certificate without a bound, has {what})"
            )
        };
        if md.experts.is_some() {
            return Err(("$.model.experts".into(), stated("experts")));
        }
        if md.cross_attention {
            return Err((
                "$.model.cross_attention".into(),
                stated("a cross-attention"),
            ));
        }
        for (key, present) in [
            ("bound_absent", self.bound_absent.is_some()),
            ("spectra", self.spectra.is_some()),
        ] {
            if present {
                return Err((format!("$.{key}"), stated("it")));
            }
        }
        Ok(())
    }

    /// One valid entry per expected matrix (`ids`), in [`MatrixId`] order;
    /// an entry out of place is named as a duplicate, outside the model,
    /// or out of order.
    fn validate_matrices(&self, ids: &[MatrixId]) -> Result<(), (String, String)> {
        let md = &self.model;
        if self.matrices.len() != ids.len() {
            return Err((
                "$.matrices".into(),
                entries_expected(self.matrices.len(), ids.len(), md),
            ));
        }
        for (i, (w, want)) in self.matrices.iter().zip(ids).enumerate() {
            let at = format!("$.matrices[{i}]");
            validate_matrix(w, &at, self.parameters.grid_m)?;
            if w.id() != *want {
                let seen = self.matrices[..i].iter().any(|x| x.id() == w.id());
                let what = if seen {
                    format!("duplicate matrix ({})", w.id())
                } else if w.layer >= md.layers || w.head.is_some_and(|h| h >= md.heads) {
                    format!(
                        "{} is outside the model ({} layers, {} heads)",
                        w.id(),
                        md.layers,
                        md.heads
                    )
                } else {
                    format!(
                        "expected {want} here, found {} (entries are ordered by layer, type, head)",
                        w.id()
                    )
                };
                return Err((at, what));
            }
        }
        Ok(())
    }

    /// One entry per layer, in order, with finite nonnegative `alpha` and `xi`.
    fn validate_layers(&self) -> Result<(), (String, String)> {
        let md = &self.model;
        if self.layers.len() != md.layers {
            return Err((
                "$.layers".into(),
                format!(
                    "expected {} entries, found {}",
                    md.layers,
                    self.layers.len()
                ),
            ));
        }
        for (l, x) in self.layers.iter().enumerate() {
            let at = format!("$.layers[{l}]");
            if x.layer != l {
                return Err((
                    format!("{at}.layer"),
                    format!("expected {l}, found {}", x.layer),
                ));
            }
            check_iv(&x.alpha, &format!("{at}.alpha"), true)?;
            check_iv(&x.xi, &format!("{at}.xi"), true)?;
        }
        Ok(())
    }
}

/// `{n} entries, expected {ids} (...)`: a list of proxy matrices (or their
/// spectra) of the wrong length, with what the model's shape makes.
fn entries_expected(n: usize, ids: usize, md: &ModelInfo) -> String {
    format!(
        "{n} entries, expected {ids} ({} layers of {} heads: QK and V_tilde per head, with a cross-attention QK_cross and V_tilde_cross per head, M_in and M_out per layer and expert)",
        md.layers,
        md.heads
    )
}

/// A certificate without a bound ([`VERSION_NO_BOUND`]): a nonempty
/// one-line `bound_absent`, no `bounds`, empty `matrices` and `layers`
/// (they hold the bound's proxies), and `spectra` with one valid entry per
/// expected matrix in [`MatrixId`] order.
fn validate_no_bound(c: &Certificate, ids: &[MatrixId]) -> Result<(), (String, String)> {
    let err = |at: String, m: String| Err((at, m));
    match &c.bound_absent {
        None => {
            return err(
                "$.bound_absent".into(),
                format!(
                "missing: a certificate of version {VERSION_NO_BOUND} states why it has no bound"
            ),
            )
        }
        Some(r) if r.trim().is_empty() || r.chars().any(char::is_control) || r.len() > 4096 => {
            return err(
                "$.bound_absent".into(),
                "expected a one-line reason of at most 4096 bytes".into(),
            )
        }
        Some(_) => {}
    }
    if c.bounds.is_some() {
        return err(
            "$.bounds".into(),
            format!("stated in a certificate without a bound (version {VERSION_NO_BOUND})"),
        );
    }
    for (key, n) in [("matrices", c.matrices.len()), ("layers", c.layers.len())] {
        if n != 0 {
            return err(
                format!("$.{key}"),
                format!(
                    "{n} entries in a certificate without a bound (its matrices' spectra are \
                     in spectra; it has no proxies)"
                ),
            );
        }
    }
    let Some(spectra) = &c.spectra else {
        return err(
            "$.spectra".into(),
            "missing: a certificate without a bound states the spectra of every proxy matrix"
                .into(),
        );
    };
    let md = &c.model;
    if spectra.len() != ids.len() {
        return err(
            "$.spectra".into(),
            entries_expected(spectra.len(), ids.len(), md),
        );
    }
    for (i, (w, want)) in spectra.iter().zip(ids).enumerate() {
        let at = format!("$.spectra[{i}]");
        validate_spectrum(&w.spectral_fields(), &at)?;
        if w.id() != *want {
            return err(
                at,
                format!(
                    "expected {want} here, found {} (entries are ordered by layer, type, expert, head, each once)",
                    w.id()
                ),
            );
        }
    }
    validate_measures(c)
}

/// The raw weights and measures (`docs/measures.md`): both present or both
/// absent; every raw weight of a layer of the model, within the limits,
/// with finite nonnegative intervals; a distance on every entry exactly
/// when `init_model` is stated, and the init measures then present (the
/// logs may be absent: their value is -inf at a zero distance).
fn validate_measures(c: &Certificate) -> Result<(), (String, String)> {
    let err = |at: String, m: String| Err((at, m));
    let stated = c.raw_weights.is_some() || c.measures.is_some() || c.init_model.is_some();
    // A certificate without a bound may carry the measures or not.
    if c.version != VERSION_NO_BOUND && stated != (c.version == VERSION_MEASURES) {
        return err(
            "$.version".into(),
            if stated {
                format!("raw_weights, measures and init_model need version {VERSION_MEASURES}")
            } else {
                format!("version {VERSION_MEASURES} needs raw_weights and measures")
            },
        );
    }
    let (raw, ms) = match (&c.raw_weights, &c.measures) {
        (None, None) => {
            if c.init_model.is_some() {
                return err(
                    "$.init_model".into(),
                    "stated without raw_weights and measures".into(),
                );
            }
            return Ok(());
        }
        (Some(r), Some(m)) => (r, m),
        (Some(_), None) => {
            return err(
                "$.measures".into(),
                "missing (raw_weights are stated)".into(),
            )
        }
        (None, Some(_)) => {
            return err(
                "$.raw_weights".into(),
                "missing (measures are stated)".into(),
            )
        }
    };
    if raw.is_empty() {
        return err("$.raw_weights".into(), "no raw weight listed".into());
    }
    if ms.d != raw.len() {
        return err(
            "$.measures.d".into(),
            format!("{} disagrees with the {} raw weights", ms.d, raw.len()),
        );
    }
    let init = c.init_model.is_some();
    validate_raw_weights(raw, c.model.layers, c.init_model.as_ref())?;
    for (k, v) in ms.stated() {
        let nonneg = !k.starts_with("log_");
        check_iv(&v, &format!("$.measures.{k}"), nonneg)?;
    }
    validate_absent(ms, init)
}

/// The measures' `absent` reasons: each names a measure that is absent
/// (an init measure only with `init_model`), in one short printable line;
/// a measure that earlier versions always stated (all but `bartlett` and
/// the init logs), when absent, says why.
fn validate_absent(ms: &MeasuresEntry, init: bool) -> Result<(), (String, String)> {
    const OPTIONAL: [&str; 4] = [
        "bartlett",
        "log_spec_init",
        "bartlett_init",
        "log_bartlett_init",
    ];
    let all = ms.all();
    for (k, why) in &ms.absent {
        let Some((name, v)) = all.iter().find(|(n, _)| n == k) else {
            return Err(("$.measures.absent".into(), "names no measure".into()));
        };
        let at = format!("$.measures.absent.{name}");
        if v.is_some() {
            return Err((at, "the measure is stated".into()));
        }
        if !init && is_init_measure(name) {
            return Err((at, "stated without init_model".into()));
        }
        if why.is_empty() || why.len() > 400 || why.chars().any(char::is_control) {
            return Err((at, "not one short printable line".into()));
        }
    }
    for (k, v) in all {
        let expected = !is_init_measure(k) || init;
        if v.is_none() && expected && !OPTIONAL.contains(&k) && !ms.absent.contains_key(k) {
            return Err((format!("$.measures.{k}"), "absent without a reason".into()));
        }
        if v.is_some() && !init && is_init_measure(k) {
            return Err((
                format!("$.measures.{k}"),
                "stated without init_model".into(),
            ));
        }
    }
    Ok(())
}

/// Whether the measure `k` needs the initialisation.
fn is_init_measure(k: &str) -> bool {
    matches!(
        k,
        "frobenius_distance"
            | "dist_spec_init"
            | "log_spec_init"
            | "bartlett_init"
            | "log_bartlett_init"
    )
}

/// The raw weights of a certificate or a part (`docs/measures.md`): every
/// entry in a layer of the model (`layers`), a known role, ordered by layer
/// then role, each once, shapes within the limits, finite nonnegative
/// norm intervals; a distance on every entry exactly when `init_model` is
/// stated, whose files are listed with valid hashes.
pub(crate) fn validate_raw_weights(
    raw: &[RawWeightEntry],
    layers: usize,
    init_model: Option<&InitModel>,
) -> Result<(), (String, String)> {
    let err = |at: String, m: String| Err((at, m));
    const ROLES: [&str; 7] = [
        "query", "key", "value", "output", "ffn_gate", "ffn_in", "ffn_out",
    ];
    let init = init_model.is_some();
    if let Some(im) = init_model {
        if im.files.is_empty() {
            return err("$.init_model.files".into(), "no weight file listed".into());
        }
        check_hashes(&im.files, "$.init_model.files")?;
    }
    let mut prev: Option<(usize, usize)> = None;
    for (i, w) in raw.iter().enumerate() {
        let at = format!("$.raw_weights[{i}]");
        if w.layer >= layers {
            return err(
                format!("{at}.layer"),
                format!("{} is outside the model ({} layers)", w.layer, layers),
            );
        }
        let Some(r) = ROLES.iter().position(|x| *x == w.role) else {
            return err(
                format!("{at}.role"),
                format!("expected one of {}", ROLES.join(", ")),
            );
        };
        if prev.is_some_and(|p| p >= (w.layer, r)) {
            return err(
                at,
                "entries must be ordered by layer, then role, each once".into(),
            );
        }
        prev = Some((w.layer, r));
        for (k, v) in [("rows", w.rows), ("cols", w.cols)] {
            if v == 0 || v > MAX_DIM {
                return err(
                    format!("{at}.{k}"),
                    format!("must be between 1 and {MAX_DIM}, found {v}"),
                );
            }
        }
        let norms = |n: &NormsEntry, at: &str| -> Result<(), (String, String)> {
            check_iv(&n.spectral_norm, &format!("{at}.spectral_norm"), true)?;
            check_iv(&n.frobenius_norm, &format!("{at}.frobenius_norm"), true)?;
            check_iv(&n.norm_21_rows, &format!("{at}.norm_21_rows"), true)
        };
        norms(&w.norms(), &at)?;
        match (&w.init_distance, init) {
            (Some(d), true) => norms(d, &format!("{at}.init_distance"))?,
            (None, false) => {}
            (Some(_), false) => {
                return err(
                    format!("{at}.init_distance"),
                    "stated without init_model".into(),
                )
            }
            (None, true) => {
                return err(
                    format!("{at}.init_distance"),
                    "missing (init_model is stated)".into(),
                )
            }
        }
    }
    Ok(())
}

/// The checks a certificate and a part share: the program's name, the
/// model (hashes, sizes within their limits) and the parameters (the grid,
/// `n` and `depth` agreeing with the model, `l_phi` a valid decimal).
pub(crate) fn validate_header(
    tool: &Tool,
    md: &ModelInfo,
    p: &Parameters,
) -> Result<(), (String, String)> {
    if tool.name != "specbound" {
        return Err((
            "$.tool.name".into(),
            format!("expected \"specbound\", found \"{}\"", tool.name),
        ));
    }
    validate_model(md)?;
    validate_parameters(p, md)
}

/// That `v` lies in `lo..=hi`, else the JSON path `at` and why not.
fn within(at: &str, v: usize, lo: usize, hi: usize) -> Result<(), (String, String)> {
    if v < lo {
        Err((at.to_string(), format!("must be at least {lo}, found {v}")))
    } else if v > hi {
        Err((at.to_string(), format!("{v} exceeds the limit {hi}")))
    } else {
        Ok(())
    }
}

/// That every file of `files` (listed at the JSON path `at`) has a hash
/// of 64 lower-case hexadecimal digits.
fn check_hashes(files: &[FileEntry], at: &str) -> Result<(), (String, String)> {
    for (i, f) in files.iter().enumerate() {
        if f.sha256.len() != 64
            || !f
                .sha256
                .bytes()
                .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return Err((
                format!("{at}[{i}].sha256"),
                "expected 64 lower-case hexadecimal digits".into(),
            ));
        }
    }
    Ok(())
}

/// The model of a certificate or part: its files listed with valid
/// hashes, its sizes within their limits, its experts (when stated).
fn validate_model(md: &ModelInfo) -> Result<(), (String, String)> {
    if md.files.is_empty() {
        return Err(("$.model.files".into(), "no weight file listed".into()));
    }
    check_hashes(&md.files, "$.model.files")?;
    within("$.model.layers", md.layers, 1, MAX_LAYERS)?;
    within("$.model.hidden", md.hidden, 1, MAX_DIM)?;
    within("$.model.heads", md.heads, 1, MAX_HEADS)?;
    within("$.model.kv_heads", md.kv_heads, 1, md.heads)?;
    within("$.model.head_dim", md.head_dim, 1, MAX_DIM)?;
    within("$.model.intermediate", md.intermediate, 1, MAX_DIM)?;
    match &md.experts {
        Some(experts) => validate_experts(md, experts),
        None => Ok(()),
    }
}

/// A mixture of experts' layers: one entry per layer, each within the
/// limit of experts, and the proxy matrices they make within theirs.
fn validate_experts(
    md: &ModelInfo,
    experts: &[crate::arch::LayerFfn],
) -> Result<(), (String, String)> {
    if experts.len() != md.layers {
        return Err((
            "$.model.experts".into(),
            format!(
                "{} entries, expected one per layer ({})",
                experts.len(),
                md.layers
            ),
        ));
    }
    let mut count = 0usize;
    for (l, f) in experts.iter().enumerate() {
        within(
            &format!("$.model.experts[{l}].experts"),
            f.experts,
            0,
            crate::arch::MAX_EXPERTS,
        )?;
        let attention = if md.cross_attention {
            md.heads.saturating_mul(2)
        } else {
            md.heads
        };
        count = count.saturating_add(attention.saturating_add(f.blocks().len()).saturating_mul(2));
    }
    if count > MAX_MATRICES {
        return Err((
            "$.model.experts".into(),
            format!("{count} proxy matrices exceed the limit {MAX_MATRICES}"),
        ));
    }
    Ok(())
}

/// The parameters: the grid, `n` and `depth` agreeing with the model,
/// `l_phi` a valid decimal, the stack and the `--heads` record.
fn validate_parameters(p: &Parameters, md: &ModelInfo) -> Result<(), (String, String)> {
    let err = |at: &str, m: String| Err((at.to_string(), m));
    within("$.parameters.grid_m", p.grid_m, 1, MAX_GRID_M)?;
    let m = p.grid_m;
    if p.grid.len() != 2 * m + 1
        || p.grid
            .iter()
            .enumerate()
            .any(|(k, g)| *g != GridPoint { k, m })
    {
        return err(
            "$.parameters.grid",
            format!("expected the grid 0/{m}, 1/{m}, ..., {}/{m}", 2 * m),
        );
    }
    if p.n != md.hidden {
        return err(
            "$.parameters.n",
            format!("{} disagrees with model.hidden = {}", p.n, md.hidden),
        );
    }
    if p.depth != md.layers {
        return err(
            "$.parameters.depth",
            format!("{} disagrees with model.layers = {}", p.depth, md.layers),
        );
    }
    // The same rule as `certify --l-phi`: a positive decimal within the
    // bounded parser's limits and the binary64 range.
    if let Err(e) = crate::spectral::positive_decimal_interval(&p.l_phi) {
        return err("$.parameters.l_phi", format!("invalid l_phi: {e}"));
    }
    if let Some(st) = &p.stack {
        validate_stack(st)?;
    }
    match &p.heads_override {
        Some(o) => validate_heads_override(o, md),
        None => Ok(()),
    }
}

/// The stack read: at most 8 short names, the chosen one among them.
fn validate_stack(st: &StackEntry) -> Result<(), (String, String)> {
    if st.stacks.len() > 8 || st.stacks.iter().any(|s| s.chars().count() > 64) {
        return Err((
            "$.parameters.stack.stacks".into(),
            "at most 8 names of at most 64 characters".into(),
        ));
    }
    if !st.stacks.contains(&st.name) {
        return Err((
            "$.parameters.stack.name".into(),
            "not one of parameters.stack.stacks".into(),
        ));
    }
    Ok(())
}

/// What `--heads` replaced: the model's heads, a short source, and
/// `replaced` and `source` both given or both null.
fn validate_heads_override(o: &HeadsOverrideEntry, md: &ModelInfo) -> Result<(), (String, String)> {
    if o.heads != md.heads {
        return Err((
            "$.parameters.heads_override.heads".into(),
            format!("{} disagrees with model.heads = {}", o.heads, md.heads),
        ));
    }
    if o.source.as_ref().is_some_and(|s| s.chars().count() > 200) {
        return Err((
            "$.parameters.heads_override.source".into(),
            "longer than 200 characters".into(),
        ));
    }
    if o.replaced.is_some() != o.source.is_some() {
        return Err((
            "$.parameters.heads_override".into(),
            "replaced and source are both null or both given".into(),
        ));
    }
    Ok(())
}

pub(crate) fn check_iv(x: &CertInterval, at: &str, nonneg: bool) -> Result<(), (String, String)> {
    if !(x.lo.is_finite() && x.hi.is_finite()) {
        return Err((at.to_string(), "interval ends must be finite".into()));
    }
    if !(x.lo <= x.hi) {
        return Err((
            at.to_string(),
            format!("lo = {:e} is greater than hi = {:e}", x.lo, x.hi),
        ));
    }
    if nonneg && x.lo < 0.0 {
        return Err((
            at.to_string(),
            "a nonnegative quantity cannot have lo < 0".into(),
        ));
    }
    Ok(())
}

/// The fields of one matrix that certification proves (a certificate's
/// matrix entry and a part's spectrum entry both have them).
pub(crate) struct SpectralFields<'a> {
    pub kind: MatrixType,
    pub head: Option<usize>,
    pub expert: Option<crate::arch::Expert>,
    pub rows: usize,
    pub cols: usize,
    /// `(key, interval)` of the five norms.
    pub norms: [(&'static str, &'a CertInterval); 5],
    pub stable_rank: Option<&'a CertInterval>,
    pub singular_values: &'a [CertInterval],
    pub structural_zeros: usize,
    pub rank: CertInterval<u64>,
}

/// Checks the certified spectral fields of one matrix at JSON path `at`:
/// the head fits the family, the shape is within its limits, intervals are
/// finite and nonnegative with `lo <= hi`, the singular values and the
/// structural zeros make `min(rows, cols)`, the rank lies within it.
pub(crate) fn validate_spectrum(w: &SpectralFields<'_>, at: &str) -> Result<(), (String, String)> {
    let err = |k: &str, msg: String| Err((format!("{at}.{k}"), msg));
    if w.kind.per_head() != w.head.is_some() {
        return err(
            "head",
            format!(
                "{} is a {} matrix: head must be {}",
                w.kind,
                if w.kind.per_head() {
                    "per-head"
                } else {
                    "layer"
                },
                if w.kind.per_head() { ">= 0" } else { "-1" }
            ),
        );
    }
    if w.kind.per_head() && w.expert.is_some() {
        return err(
            "expert",
            format!("{} is an attention matrix: it has no expert", w.kind),
        );
    }
    for (k, v) in [("rows", w.rows), ("cols", w.cols)] {
        if v == 0 || v > MAX_DIM {
            return err(k, format!("{v} is outside 1..={MAX_DIM}"));
        }
    }
    let kmin = w.rows.min(w.cols);
    for (k, x) in w.norms {
        check_iv(x, &format!("{at}.{k}"), true)?;
    }
    if let Some(s) = w.stable_rank {
        check_iv(s, &format!("{at}.stable_rank"), true)?;
    }
    if w.singular_values.len() > kmin {
        return err(
            "singular_values",
            format!(
                "{} entries exceed the limit min(rows, cols) = {kmin}",
                w.singular_values.len()
            ),
        );
    }
    for (j, s) in w.singular_values.iter().enumerate() {
        check_iv(s, &format!("{at}.singular_values[{j}]"), true)?;
    }
    if w.structural_zeros > kmin || w.singular_values.len() + w.structural_zeros != kmin {
        return err(
            "singular_values",
            format!(
                "{} values plus {} structural zeros do not make min(rows, cols) = {kmin}",
                w.singular_values.len(),
                w.structural_zeros
            ),
        );
    }
    if w.rank.lo > w.rank.hi {
        return err("rank", "lo is greater than hi".into());
    }
    if w.rank.hi > kmin as u64 {
        return err(
            "rank.hi",
            format!("{} exceeds min(rows, cols) = {kmin}", w.rank.hi),
        );
    }
    Ok(())
}

fn validate_matrix(w: &MatrixEntry, at: &str, m: usize) -> Result<(), (String, String)> {
    let err = |k: &str, msg: String| Err((format!("{at}.{k}"), msg));
    validate_spectrum(&w.spectral_fields(), at)?;
    for (k, x) in [
        ("alpha", &w.alpha),
        ("gamma", &w.gamma),
        ("scale", &w.scale),
        ("min_contribution", &w.min_contribution),
    ] {
        check_iv(x, &format!("{at}.{k}"), true)?;
    }
    if w.contributions.len() != 2 * m + 1 {
        return err(
            "contributions",
            format!(
                "expected {} grid points, found {}",
                2 * m + 1,
                w.contributions.len()
            ),
        );
    }
    for (k, c) in w.contributions.iter().enumerate() {
        let cat = format!("{at}.contributions[{k}]");
        if c.p_fraction != (GridPoint { k, m }) {
            return Err((
                format!("{cat}.p_fraction"),
                format!(
                    "\"{}\" is not the grid point {k}/{m} expected here (grid P_{m}, in order)",
                    c.p_fraction
                ),
            ));
        }
        if c.p != c.p_fraction.approx() {
            return Err((
                format!("{cat}.p"),
                format!("{} is not the nearest number to {}", c.p, c.p_fraction),
            ));
        }
        check_iv(&c.value, &format!("{cat}.value"), true)?;
    }
    if w.p_opt_fraction.is_empty() {
        return err("p_opt_fraction", "no grid point listed".into());
    }
    for (j, g) in w.p_opt_fraction.iter().enumerate() {
        if g.m != m || g.k > 2 * m {
            return err(
                &format!("p_opt_fraction[{j}]"),
                format!("\"{g}\" is not a point of the grid P_{m}"),
            );
        }
        if j > 0 && w.p_opt_fraction[j - 1].k >= g.k {
            return err(
                &format!("p_opt_fraction[{j}]"),
                "grid points must be listed once each, in increasing order".into(),
            );
        }
    }
    if w.p_opt.len() != w.p_opt_fraction.len()
        || w.p_opt
            .iter()
            .zip(&w.p_opt_fraction)
            .any(|(x, g)| *x != g.approx())
    {
        return err("p_opt", "does not match p_opt_fraction".into());
    }
    Ok(())
}

/// A string of at most `N` bytes (longer ones are refused while parsing).
pub(crate) struct BoundedStr<const N: usize>(pub String);

impl<'de, const N: usize> Deserialize<'de> for BoundedStr<N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<const N: usize>;
        impl<const N: usize> Visitor<'_> for V<N> {
            type Value = BoundedStr<N>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a string of at most {N} bytes")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                if s.len() > N {
                    return Err(E::custom(format!(
                        "a string of {} bytes exceeds the limit {N}",
                        s.len()
                    )));
                }
                Ok(BoundedStr(s.to_string()))
            }
        }
        d.deserialize_str(V::<N>)
    }
}

/// Deserialises an array of at most `MAX` elements, refusing a longer one
/// as soon as element `MAX + 1` arrives (before it is stored).
pub(crate) fn vec_max<'de, D, T, const MAX: usize>(d: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct V<T, const MAX: usize>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>, const MAX: usize> Visitor<'de> for V<T, MAX> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "an array of at most {MAX} entries")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX).min(4096));
            while let Some(x) = seq.next_element()? {
                if v.len() == MAX {
                    return Err(de::Error::custom(format!(
                        "more than {MAX} entries exceed the limit"
                    )));
                }
                v.push(x);
            }
            Ok(v)
        }
    }
    d.deserialize_seq(V::<T, MAX>(std::marker::PhantomData))
}

/// [`vec_max`] of a field that may be absent (`#[serde(default)]`).
pub(crate) fn opt_vec_max<'de, D, T, const MAX: usize>(d: D) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    vec_max::<D, T, MAX>(d).map(Some)
}

/// `head` as the authors' tables write it: `-1` for layer matrices.
pub(crate) mod head_column {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(h: &Option<usize>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(h.map_or(-1, |h| h as i64))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
        let v = i64::deserialize(d)?;
        match v {
            -1 => Ok(None),
            h if h >= 0 && h as u64 <= super::MAX_HEADS as u64 => Ok(Some(h as usize)),
            h => Err(de::Error::custom(format!(
                "expected an integer >= -1 (-1 for layer matrices), found {h}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::humanize;

    #[test]
    fn serde_messages_are_rephrased() {
        assert_eq!(
            humanize("missing field `gamma` at line 3 column 4"),
            "missing key 'gamma'"
        );
        assert_eq!(
            humanize("invalid type: string \"1.0\", expected f64 at line 1 column 9"),
            "expected a number, found string \"1.0\""
        );
        assert_eq!(
            humanize("invalid type: sequence, expected struct Certificate"),
            "expected an object, found sequence"
        );
        assert_eq!(humanize("duplicate field `lo`"), "duplicate key 'lo'");
    }
}
