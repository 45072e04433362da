//! Recognising the family of a checkpoint and reading its facts, by the
//! table of [`super::families`]. Every number read from a file is checked
//! before it is used in arithmetic, and every error names the file and key
//! (or flag, or tensor) the number came from.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::families::{
    supported, Cond, FactKeys, FamilySpec, KvHeads, MoeSpec, Orientation, Role, Variant, FAMILIES,
    SPECTRA_HINT,
};
use super::recipe::{tensor_shape, tensor_shape3};
use super::{
    clean, clean_to, invalid, Activation, ArchOverrides, Architecture, HeadsOverride, LayerFfn,
    ModelError, MoeLayout, Sharing, StackChoice, MAX_EXPERTS, MAX_HEADS, MAX_LAYERS,
};
use crate::io::checkpoint::Checkpoint;
use crate::io::gguf::MetaValue;

/// Where a fact came from; errors about it name that place.
#[derive(Clone, Debug)]
enum Origin {
    /// A command-line flag (`--heads`).
    Flag(&'static str),
    /// A key of config.json or of GGUF metadata.
    Key { file: PathBuf, key: String },
    /// Computed from tensor shapes or other facts; errors name this tensor.
    Derived { file: PathBuf, tensor: String },
    /// A key config.json leaves out, whose value is the default of the
    /// stack's configuration class ([`super::Stack::defaults`]).
    Default { file: PathBuf, key: String },
}

/// A number and its origin.
#[derive(Clone, Debug)]
struct Fact {
    value: usize,
    origin: Origin,
}

impl Fact {
    /// An error about this fact, naming where it came from.
    fn error(&self, weights: &Path, message: impl std::fmt::Display) -> ModelError {
        match &self.origin {
            Origin::Flag(flag) => {
                invalid(weights, None, format!("{flag} {}: {message}", self.value))
            }
            Origin::Key { file, key } => invalid(file, Some(key), message.to_string()),
            Origin::Derived { file, tensor } => invalid(file, Some(tensor), message.to_string()),
            Origin::Default { file, key } => invalid(
                file,
                Some(key),
                format!("{message} (the configuration class's default: config.json leaves it out)"),
            ),
        }
    }

    /// The fact when it is at most `cap`, else one line naming where it
    /// came from: `{value} {what}, more than the limit of {cap}`. Every
    /// count that drives work or allocation is checked here before use.
    fn capped(self, weights: &Path, cap: usize, what: &str) -> Result<Fact, ModelError> {
        if self.value > cap {
            return Err(self.error(
                weights,
                format!("{} {what}, more than the limit of {cap}", self.value),
            ));
        }
        Ok(self)
    }

    /// That a measured width equals the stated fact: else one line naming
    /// the tensor it was measured from and where the fact was stated
    /// (`"{measured} {what} {value} of 'key' in config.json"`).
    fn must_equal(
        &self,
        measured: usize,
        file: &Path,
        tensor: &str,
        what: impl std::fmt::Display,
    ) -> Result<(), ModelError> {
        if self.value == measured {
            return Ok(());
        }
        Err(invalid(
            file,
            Some(tensor),
            format!("{what} {} {}", self.value, self.place()),
        ))
    }

    /// `'hidden_size' in config.json`: where a file states this fact.
    fn source(&self) -> String {
        self.place()
            .trim_start_matches("of ")
            .trim_start_matches("given by ")
            .to_string()
    }

    /// `of 'hidden_size' in /m/config.json`, for messages about a disagreement.
    fn place(&self) -> String {
        match &self.origin {
            Origin::Flag(flag) => format!("given by {flag}"),
            Origin::Key { file, key } => format!(
                "of '{}' in {}",
                clean(key),
                file.file_name().map_or(file.as_path(), Path::new).display()
            ),
            Origin::Derived { tensor, .. } => format!("from '{}'", clean(tensor)),
            Origin::Default { file, key } => format!(
                "of the default of '{}' (absent from {})",
                clean(key),
                file.file_name().map_or(file.as_path(), Path::new).display()
            ),
        }
    }
}

/// What a JSON value is, without copying a large one into a message.
fn json_kind(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("the string \"{}\"", clean_to(s, 32)),
        Value::Bool(b) => b.to_string(),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
        Value::Null => "null".into(),
    }
}

fn meta_kind(v: &MetaValue) -> String {
    match v {
        MetaValue::Int(i) => i.to_string(),
        MetaValue::Float(f) => f.to_string(),
        MetaValue::Bool(b) => b.to_string(),
        MetaValue::Str(s) => format!("the string \"{}\"", clean_to(s, 32)),
        MetaValue::Array(n) => format!("an array of {n}"),
    }
}

/// The places a family's facts are read from.
struct Sources<'a> {
    ck: &'a Checkpoint,
    spec: &'static FamilySpec,
    /// `general.architecture` of a GGUF file: the prefix of its keys.
    gguf_arch: Option<String>,
}

impl Sources<'_> {
    /// The config.json object that holds the family's facts, with the
    /// prefix of its keys in messages: the stack's section
    /// (`text_config.`) when config.json has it, else the top level.
    fn config(&self) -> Option<(&Value, String)> {
        let cfg = self.ck.config()?;
        if let Some(section) = self.spec.stack.and_then(|s| s.section) {
            if let Some(v @ Value::Object(_)) = cfg.get(section) {
                return Some((v, format!("{section}.")));
            }
        }
        Some((cfg, String::new()))
    }

    /// The first of the family's GGUF keys, then config keys, that is
    /// present (a JSON `null` counts as absent); a value that is not a
    /// non-negative integer that fits a `usize` is an error.
    fn fact(
        &self,
        pick: fn(&FactKeys) -> &'static [&'static str],
    ) -> Result<Option<Fact>, ModelError> {
        if let (Some(arch), Some(meta)) = (&self.gguf_arch, self.ck.gguf_meta()) {
            let file = self.ck.file_of("");
            for k in pick(&self.spec.gguf) {
                let key = format!("{arch}.{k}");
                let Some(v) = meta.get(&key) else { continue };
                let value = match v {
                    MetaValue::Int(i) => usize::try_from(*i).map_err(|_| {
                        invalid(
                            &file,
                            Some(&key),
                            format!("expected a non-negative integer below 2^64, found {i}"),
                        )
                    })?,
                    other => {
                        return Err(invalid(
                            &file,
                            Some(&key),
                            format!("expected an integer, found {}", meta_kind(other)),
                        ))
                    }
                };
                return Ok(Some(Fact {
                    value,
                    origin: Origin::Key { file, key },
                }));
            }
        }
        self.config_fact(pick(&self.spec.config))
    }

    /// The first of `keys` present in config.json's section of the stack
    /// (a JSON `null` counts as absent), else the stack's default for it; a
    /// value that is not a non-negative integer is an error.
    fn config_fact(&self, keys: &[&str]) -> Result<Option<Fact>, ModelError> {
        if let (Some((cfg, pre)), Some(path)) = (self.config(), self.ck.config_path()) {
            for k in keys {
                let v = match cfg.get(*k) {
                    None | Some(Value::Null) => continue,
                    Some(v) => v,
                };
                let key = format!("{pre}{k}");
                let value = v
                    .as_u64()
                    .and_then(|x| usize::try_from(x).ok())
                    .ok_or_else(|| {
                        invalid(
                            path,
                            Some(&key),
                            format!("expected a non-negative integer, found {}", json_kind(v)),
                        )
                    })?;
                return Ok(Some(Fact {
                    value,
                    origin: Origin::Key {
                        file: path.to_path_buf(),
                        key,
                    },
                }));
            }
            // What transformers builds for a key the saved config leaves out.
            let defaults = self.spec.stack.map_or(&[][..], |s| s.defaults);
            for k in keys {
                if let Some(&(_, value)) = defaults.iter().find(|(d, _)| d == k) {
                    return Ok(Some(Fact {
                        value,
                        origin: Origin::Default {
                            file: path.to_path_buf(),
                            key: format!("{pre}{k}"),
                        },
                    }));
                }
            }
        }
        Ok(None)
    }

    /// How to supply a fact that neither the flags nor the model's config
    /// gave: for a model on disk `file_hint` (config.json or the flag); for
    /// a model in memory, whose config is the `config=` it was given, the
    /// family's config keys for it (`'num_attention_heads'`, under the
    /// stack's section when the config has one) and the Python argument
    /// that overrides it.
    fn missing_hint(
        &self,
        pick: fn(&FactKeys) -> &'static [&'static str],
        file_hint: &str,
        argument: &str,
    ) -> String {
        if !self.ck.is_memory() {
            return file_hint.to_string();
        }
        let pre = self.config().map(|(_, pre)| pre).unwrap_or_default();
        let keys: Vec<String> = pick(&self.spec.config)
            .iter()
            .map(|k| format!("'{pre}{k}'"))
            .collect();
        match keys.as_slice() {
            [] => format!("pass {argument}"),
            [one] => format!("give {one} in config= or pass {argument}"),
            [init @ .., last] => format!(
                "give {} or {last} in config= or pass {argument}",
                init.join(", ")
            ),
        }
    }

    /// Whether `cond` holds for this checkpoint, whose family (model type)
    /// is `family`: a flag absent from config.json (or `null`, or without
    /// config.json) has its default; a value that is not a boolean is an
    /// error naming the key.
    fn holds(&self, cond: &Cond, family: &str) -> Result<bool, ModelError> {
        match cond {
            Cond::ModelType(types) => Ok(types.contains(&family)),
            Cond::Is(flag, want) => {
                let value = match (self.ck.config(), self.ck.config_path()) {
                    (Some(cfg), Some(path)) => match cfg.get(flag.key) {
                        None | Some(Value::Null) => flag.default,
                        Some(Value::Bool(b)) => *b,
                        Some(other) => {
                            return Err(invalid(
                                path,
                                Some(flag.key),
                                format!("expected true or false, found {}", json_kind(other)),
                            ))
                        }
                    },
                    _ => flag.default,
                };
                Ok(value == *want)
            }
        }
    }

    /// A count of the family's shared layers (groups, layers per group):
    /// 1 when config.json does not give it, an error when it gives 0.
    fn count(&self, keys: &'static [&'static str]) -> Result<Fact, ModelError> {
        match self.config_fact(keys)? {
            Some(f) if f.value == 0 => {
                Err(f.error(&self.ck.file_of(""), "expected a positive count"))
            }
            Some(f) => Ok(f),
            None => Ok(Fact {
                value: 1,
                origin: Origin::Derived {
                    file: self.ck.file_of(""),
                    tensor: String::new(),
                },
            }),
        }
    }

    /// The activation: a GGUF key, a config key, or (when config.json or
    /// GGUF metadata identified the family) the family's default.
    fn activation(&self, family: &str, from_metadata: bool) -> Option<Activation> {
        let named = |name: &str, source: String| Activation {
            name: clean_to(name, 64),
            source,
        };
        if let (Some(arch), Some(meta)) = (&self.gguf_arch, self.ck.gguf_meta()) {
            for k in self.spec.gguf.activation {
                let key = format!("{arch}.{k}");
                if let Some(MetaValue::Str(s)) = meta.get(&key) {
                    return Some(named(s, format!("GGUF metadata '{}'", clean(&key))));
                }
            }
        }
        let pre = self.config().map(|(_, p)| p).unwrap_or_default();
        if let Some((cfg, _)) = self.config() {
            for k in self.spec.config.activation {
                match cfg.get(*k) {
                    None | Some(Value::Null) => {}
                    Some(Value::String(s)) => {
                        return Some(named(s, format!("'{pre}{k}' in config.json")));
                    }
                    // A custom activation object: not one we can name.
                    Some(_) => return None,
                }
            }
        }
        let default = self.spec.default_activation.filter(|_| from_metadata)?;
        Some(match &self.gguf_arch {
            Some(a) => named(
                default,
                format!(
                    "what llama.cpp runs for GGUF general.architecture '{}'",
                    clean_to(a, 64)
                ),
            ),
            None => named(
                default,
                format!(
                    "the default of model_type '{family}': config.json names no {}",
                    self.spec
                        .config
                        .activation
                        .iter()
                        .map(|k| format!("'{pre}{k}'"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
            ),
        })
    }
}

/// The prefix before a family's layer-0 query tensor, if the checkpoint has
/// one: of several (Gemma 3's vision tower also ends in
/// `layers.0.self_attn.q_proj.weight`), the first under which every layer-0
/// tensor of the family is there.
fn find_prefix(ck: &Checkpoint, spec: &FamilySpec) -> Option<String> {
    let first = spec.anchor().name_in("", 0);
    let mut found = ck.names().filter_map(|n| {
        n.strip_suffix(first.as_str())
            .filter(|p| p.is_empty() || p.ends_with('.'))
            .map(str::to_string)
    });
    let head = found.next()?;
    let whole = |p: &String| spec.tensors.iter().all(|t| ck.contains(&t.name_in(p, 0)));
    if whole(&head) {
        return Some(head);
    }
    Some(found.find(whole).unwrap_or(head))
}

/// The items in their first order, each once.
fn distinct(items: impl Iterator<Item = &'static str>) -> Vec<&'static str> {
    let mut out = Vec::new();
    for x in items {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// Whether the markers of `spec` are there under `prefix` (layer 0).
fn marked(ck: &Checkpoint, spec: &FamilySpec, prefix: &str) -> bool {
    spec.markers
        .iter()
        .all(|m| ck.contains(&format!("{prefix}{}", m.replace("{l}", "0"))))
}

/// The entry of `candidates` (the entries of one model type) to read, with
/// the stack chosen: the one of `--stack` when given (an error listing the
/// stacks when the model type has no such stack, or has one stack only);
/// otherwise the first stack the files hold. Of the entries of that stack,
/// the first whose query tensor and markers are there (T5's gated
/// feed-forward before its plain one), else the first whose query tensor is.
fn choose(
    ck: &Checkpoint,
    candidates: &[&'static FamilySpec],
    family: &str,
    stack: Option<&str>,
    origin: (&Path, Option<&str>),
) -> Result<(&'static FamilySpec, Option<StackChoice>), ModelError> {
    let stacks = distinct(candidates.iter().filter_map(|f| f.stack.map(|s| s.name)));
    let pool: Vec<&'static FamilySpec> = match stack {
        None => candidates.to_vec(),
        Some(want) if stacks.contains(&want) => candidates
            .iter()
            .copied()
            .filter(|f| f.stack.is_some_and(|s| s.name == want))
            .collect(),
        Some(want) => {
            let (file, key) = origin;
            let why = if stacks.is_empty() {
                let several = distinct(
                    FAMILIES
                        .iter()
                        .filter(|f| f.stack.is_some())
                        .filter_map(|f| f.model_types.first().copied()),
                );
                format!(
                    "one stack of blocks, so --stack does not apply (models of several: {})",
                    several.join(", ")
                )
            } else {
                format!("the stacks {}", stacks.join(", "))
            };
            return Err(invalid(
                file,
                key,
                format!(
                    "--stack '{}': model type '{}' has {why}",
                    clean_to(want, 64),
                    clean_to(family, 64)
                ),
            ));
        }
    };
    let present = |f: &&'static FamilySpec| find_prefix(ck, f);
    let spec = pool
        .iter()
        .copied()
        .find(|f| present(f).is_some_and(|p| marked(ck, f, &p)))
        .or_else(|| pool.iter().copied().find(|f| present(f).is_some()))
        .unwrap_or(pool[0]);
    let choice = spec.stack.map(|s| StackChoice {
        name: s.name.to_string(),
        stacks: stacks.iter().map(|s| s.to_string()).collect(),
        by_flag: stack.is_some(),
    });
    Ok((spec, choice))
}

/// How the family was recognised.
struct Recognised {
    spec: &'static FamilySpec,
    family: String,
    gguf_arch: Option<String>,
    /// From config.json or GGUF metadata (not from tensor names alone).
    from_metadata: bool,
    prefix: String,
    stack: Option<StackChoice>,
}

/// Recognises the family: by GGUF metadata (`general.architecture`), else
/// config.json (`model_type`, else `architectures`), else tensor names;
/// `stack` is `--stack`.
fn recognise(ck: &Checkpoint, stack: Option<&str>) -> Result<Recognised, ModelError> {
    if let Some(meta) = ck.gguf_meta() {
        return recognise_gguf(ck, meta, stack);
    }
    if let (Some(cfg), Some(path)) = (ck.config(), ck.config_path()) {
        return recognise_config(ck, cfg, path, stack);
    }
    recognise_tensors(ck, stack)
}

/// The entries of the table for model type `mt`.
fn of_type(mt: &str) -> Vec<&'static FamilySpec> {
    FAMILIES
        .iter()
        .filter(|f| f.model_types.contains(&mt))
        .collect()
}

/// A family named by config.json or GGUF metadata, with the prefix of its
/// tensors: an error when the checkpoint has none of them.
fn known(
    ck: &Checkpoint,
    (spec, stack): (&'static FamilySpec, Option<StackChoice>),
    family: String,
    gguf_arch: Option<String>,
) -> Result<Recognised, ModelError> {
    let prefix = find_prefix(ck, spec).ok_or_else(|| {
        invalid(
            &ck.file_of(""),
            None,
            format!(
                "the model type '{}' expects tensors like '{}', but there are none",
                clean_to(&family, 64),
                spec.anchor().name_in("", 0)
            ),
        )
    })?;
    Ok(Recognised {
        spec,
        family,
        gguf_arch,
        from_metadata: true,
        prefix,
        stack,
    })
}

/// The family of a GGUF file's `general.architecture` (`llama` when the
/// metadata leaves it out).
fn recognise_gguf(
    ck: &Checkpoint,
    meta: &std::collections::BTreeMap<String, MetaValue>,
    stack: Option<&str>,
) -> Result<Recognised, ModelError> {
    let weights = ck.file_of("");
    let a = match meta.get("general.architecture") {
        Some(MetaValue::Str(s)) => s.clone(),
        _ => "llama".to_string(),
    };
    let Some(spec) = FAMILIES
        .iter()
        .find(|f| f.gguf_architectures.contains(&a.as_str()))
    else {
        return Err(invalid(
            &weights,
            Some("general.architecture"),
            format!(
                "unsupported GGUF architecture '{}' (supported: {}){SPECTRA_HINT}",
                clean_to(&a, 64),
                supported()
            ),
        ));
    };
    let picked = choose(
        ck,
        &[spec],
        &a,
        stack,
        (&weights, Some("general.architecture")),
    )?;
    known(ck, picked, a.clone(), Some(a))
}

/// The family of config.json's `model_type`; without one, the first
/// family one of whose prefixes starts an `architectures` entry
/// (`BertModel` -> bert).
fn recognise_config(
    ck: &Checkpoint,
    cfg: &Value,
    path: &Path,
    stack: Option<&str>,
) -> Result<Recognised, ModelError> {
    let archs: Vec<&str> = cfg
        .get("architectures")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let what = match cfg.get("model_type") {
        Some(Value::String(s)) if !s.is_empty() => {
            let mt = s.to_lowercase();
            let candidates = of_type(&mt);
            if candidates.is_empty() {
                return Err(invalid(
                    path,
                    Some("model_type"),
                    format!(
                        "unsupported architecture '{}' (supported: {}){SPECTRA_HINT}",
                        clean_to(&mt, 64),
                        supported()
                    ),
                ));
            }
            let picked = choose(ck, &candidates, &mt, stack, (path, Some("model_type")))?;
            return known(ck, picked, mt, None);
        }
        None | Some(Value::Null) => "no 'model_type' key",
        Some(Value::String(_)) => "an empty 'model_type'",
        Some(other) => {
            return Err(invalid(
                path,
                Some("model_type"),
                format!("not a string: found {}", json_kind(other)),
            ))
        }
    };
    for spec in FAMILIES {
        for p in spec.architectures {
            if archs.iter().any(|a| a.to_lowercase().starts_with(p)) {
                let picked = choose(ck, &[spec], p, stack, (path, Some("architectures")))?;
                return known(ck, picked, p.to_string(), None);
            }
        }
    }
    let listed = if archs.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = archs.iter().take(8).map(|a| clean_to(a, 64)).collect();
        format!("architectures: {}; ", names.join(", "))
    };
    Err(invalid(
        path,
        None,
        format!(
            "{what} and no recognised 'architectures' entry ({listed}supported: {}){SPECTRA_HINT}",
            supported()
        ),
    ))
}

/// Neither config.json nor GGUF metadata: the tensor names decide (a
/// family with markers only when its markers are there too).
fn recognise_tensors(ck: &Checkpoint, stack: Option<&str>) -> Result<Recognised, ModelError> {
    let weights = ck.file_of("");
    for spec in FAMILIES {
        let Some(prefix) = find_prefix(ck, spec).filter(|p| marked(ck, spec, p)) else {
            continue;
        };
        // A stack found by its tensors: --stack chooses among the
        // stacks of its model type.
        if spec.stack.is_none() && stack.is_none() {
            return Ok(Recognised {
                spec,
                family: spec.family.to_string(),
                gguf_arch: None,
                from_metadata: false,
                prefix,
                stack: None,
            });
        }
        let candidates = of_type(spec.model_types[0]);
        let (spec, stack) = choose(ck, &candidates, spec.family, stack, (&weights, None))?;
        let prefix = find_prefix(ck, spec).ok_or_else(|| {
            invalid(
                &weights,
                None,
                format!(
                    "the stack '{}' expects tensors like '{}', but there are none",
                    stack.as_ref().map_or("", |c| c.name.as_str()),
                    spec.anchor().name_in("", 0)
                ),
            )
        })?;
        return Ok(Recognised {
            spec,
            family: spec.family.to_string(),
            gguf_arch: None,
            from_metadata: false,
            prefix,
            stack,
        });
    }
    Err(invalid(
        &weights,
        None,
        format!(
            "no layer tensors of a supported layout found (supported: {}){SPECTRA_HINT}",
            supported()
        ),
    ))
}

/// The output and input widths of a stored `[r, c]` tensor.
fn out_in(orientation: Orientation, (r, c): (usize, usize)) -> (usize, usize) {
    match orientation {
        Orientation::OutIn => (r, c),
        Orientation::InOut => (c, r),
    }
}

/// Recognises the architecture from config.json (`model_type`, else
/// `architectures`), GGUF metadata (`general.architecture`), or tensor
/// names, and reads its facts: flags first, then GGUF metadata, then
/// config.json, then tensor shapes; every fact is checked against the
/// layer-0 tensor shapes with checked arithmetic.
pub fn detect(ck: &Checkpoint, ov: &ArchOverrides) -> Result<Architecture, ModelError> {
    let Recognised {
        spec,
        family,
        gguf_arch,
        from_metadata,
        prefix,
        stack,
    } = recognise(ck, ov.stack.as_deref())?;
    let src = Sources {
        ck,
        spec,
        gguf_arch,
    };
    let holds = |c: &Cond| src.holds(c, &family);
    let variant = spec.choose(holds)?;
    let notes = spec.notes_where(holds)?;
    let r = Reader {
        first: variant.anchor().name_in(&prefix, 0),
        weights: ck.file_of(""),
        src,
        variant,
        prefix,
    };
    let layers = r.layer_count(ov.layers)?;
    let (layers, sharing) = r.sharing(layers)?;
    let query = r.query_shape(layers)?;
    let hidden = query.hidden;
    let heads_override = r.heads_override(ov.heads);
    let heads = r.head_count(ov.heads)?;
    let head_dim = r.head_dim(&heads, hidden)?;
    let hs = r.query_heads(&heads, &head_dim, &query)?;
    let kv_heads = match r.variant.kv_heads {
        KvHeads::Read => r.read_kv_heads(ov.heads, &hs, layers)?,
        KvHeads::One => 1,
        KvHeads::PerHead => hs.h,
    };
    r.check_fused_query(&query, &hs, kv_heads)?;
    // A mixture-of-experts family reads its own widths.
    let (intermediate, moe) = match spec.moe {
        None => (r.dense_width(layers)?, None),
        Some(m) => {
            let (i, layout) = detect_moe(&r.src, m, &r.prefix, layers, hidden)?;
            (i, Some(layout))
        }
    };
    let activation = r.src.activation(&family, from_metadata);
    Ok(Architecture {
        family,
        spec,
        prefix: r.prefix,
        layers,
        hidden,
        heads: hs.h,
        kv_heads,
        head_dim: hs.dh,
        intermediate,
        activation,
        heads_override,
        moe,
        stack,
        tensors: variant.tensors,
        notes,
        sharing,
    })
}

/// What [`detect`] reads a family's facts from: the places of its facts,
/// the layout config.json chose, and the layer-0 query tensor whose shape
/// the facts are checked against.
struct Reader<'a> {
    src: Sources<'a>,
    variant: Variant,
    prefix: String,
    /// The layer-0 tensor that holds the query: facts derived from tensor
    /// shapes name it.
    first: String,
    /// The weights (errors about a flag's value name them).
    weights: PathBuf,
}

/// The stored shape `[rows, cols]` of the layer-0 query tensor, its
/// output width and its input width (the hidden size).
struct QueryShape {
    rows: usize,
    cols: usize,
    out: usize,
    hidden: usize,
}

/// The query heads as read: their number, their dimension, and the
/// query's width (the product, checked).
struct HeadShape {
    h: usize,
    dh: usize,
    q_width: usize,
}

impl Reader<'_> {
    /// The origin of a fact computed from the layer-0 query tensor.
    fn derived(&self) -> Origin {
        Origin::Derived {
            file: self.src.ck.file_of(&self.first),
            tensor: self.first.clone(),
        }
    }

    /// Whether the query tensor holds other roles too (a fused
    /// `[query; key; value]`).
    fn fused(&self) -> bool {
        self.variant.anchor().roles.len() > 1
    }

    /// The number of layers: `--layers`, else the family's keys, else the
    /// layers the query tensor's names count (not for shared layers, whose
    /// names do not count the depths); from 1 to [`MAX_LAYERS`].
    fn layer_count(&self, flag: Option<usize>) -> Result<Fact, ModelError> {
        let (ck, src) = (self.src.ck, &self.src);
        let layers = match flag {
            Some(value) => Fact {
                value,
                origin: Origin::Flag("--layers"),
            },
            None => match src.fact(|k| k.layers)? {
                Some(f) => f,
                // Shared layers are stored once per group: their names do not
                // count the depths.
                None if src.spec.shared.is_some() => {
                    return Err(invalid(
                        &ck.file_of(&self.first),
                        None,
                        format!(
                            "the number of layers of a model whose layers share weights cannot be \
                             inferred from tensor names: {}",
                            src.missing_hint(
                                |k| k.layers,
                                "put config.json beside the file or pass --layers",
                                "layers="
                            )
                        ),
                    ))
                }
                None => {
                    let anchor = self.variant.anchor();
                    Fact {
                        value: (0..)
                            .take_while(|&l| ck.contains(&anchor.name_in(&self.prefix, l)))
                            .count(),
                        origin: self.derived(),
                    }
                }
            },
        };
        let layers = layers.capped(&self.weights, MAX_LAYERS, "layers")?;
        if layers.value == 0 {
            return Err(layers.error(&self.weights, "the model has no layers"));
        }
        Ok(layers)
    }

    /// Shared layers (ALBERT): depths per group, each applying the group's
    /// layers in turn. The number of blocks the model applies (its layers
    /// when they share nothing), and the sharing.
    fn sharing(&self, layers: Fact) -> Result<(usize, Option<Sharing>), ModelError> {
        let Some(sh) = self.src.spec.shared else {
            return Ok((layers.value, None));
        };
        let weights = &self.weights;
        let groups = self
            .src
            .count(sh.groups)?
            .capped(weights, MAX_LAYERS, "groups")?;
        let inner = self
            .src
            .count(sh.inner)?
            .capped(weights, MAX_LAYERS, "layers per group")?;
        if layers.value % groups.value != 0 {
            // transformers maps depths to groups by a float division:
            // only a whole number of depths per group is unambiguous.
            return Err(groups.error(
                weights,
                format!(
                    "{} layers do not divide into {} groups of shared layers",
                    layers.value, groups.value
                ),
            ));
        }
        // Both factors are at most MAX_LAYERS: the product fits.
        let blocks = layers.value * inner.value;
        if blocks > MAX_LAYERS {
            return Err(inner.error(
                weights,
                format!(
                    "{} layers of {} shared blocks each make {blocks} blocks, more than \
                     the limit of {MAX_LAYERS}",
                    layers.value, inner.value
                ),
            ));
        }
        let sharing = Sharing {
            groups: groups.value,
            inner: inner.value,
            depths: layers.value,
        };
        Ok((blocks, Some(sharing)))
    }

    /// The query tensor's shape; the hidden size is its input width,
    /// checked against the family's keys.
    fn query_shape(&self, layers: usize) -> Result<QueryShape, ModelError> {
        let (ck, first) = (self.src.ck, &self.first);
        let (r0, c0) = tensor_shape(ck, first, 0, layers)?;
        if r0 == 0 || c0 == 0 {
            return Err(invalid(
                &ck.file_of(first),
                Some(first),
                format!("empty matrix: shape [{r0}, {c0}]"),
            ));
        }
        let (out, hidden) = out_in(self.variant.anchor().orientation, (r0, c0));
        if let Some(h) = self.src.fact(|k| k.hidden)? {
            h.must_equal(
                hidden,
                &ck.file_of(first),
                first,
                format_args!("shape [{r0}, {c0}] disagrees with the hidden size"),
            )?;
        }
        Ok(QueryShape {
            rows: r0,
            cols: c0,
            out,
            hidden,
        })
    }

    /// What the file states, for the record when --heads replaces it; a
    /// number the file cannot give is the flag's to replace, not an error.
    fn heads_override(&self, flag: Option<usize>) -> Option<HeadsOverride> {
        flag.map(|heads| {
            let stated = self.src.fact(|k| k.heads).ok().flatten();
            HeadsOverride {
                heads,
                replaced: stated.as_ref().map(|f| f.value),
                source: stated.as_ref().map(Fact::source),
            }
        })
    }

    /// The number of attention heads: `--heads`, else the family's keys
    /// (tensor shapes cannot tell it); from 1 to [`MAX_HEADS`].
    fn head_count(&self, flag: Option<usize>) -> Result<Fact, ModelError> {
        let src = &self.src;
        let heads = match flag {
            Some(value) => Fact {
                value,
                origin: Origin::Flag("--heads"),
            },
            None => src.fact(|k| k.heads)?.ok_or_else(|| {
                invalid(
                    &src.ck.file_of(&self.first),
                    None,
                    format!(
                        "the number of attention heads cannot be inferred from tensor shapes: {}",
                        src.missing_hint(
                            |k| k.heads,
                            "put config.json beside the file or pass --heads",
                            "heads="
                        )
                    ),
                )
            })?,
        };
        let heads = heads.capped(&self.weights, MAX_HEADS, "attention heads")?;
        if heads.value == 0 {
            return Err(heads.error(&self.weights, "zero attention heads"));
        }
        Ok(heads)
    }

    /// The head dimension: the family's keys, else the hidden size over
    /// the heads (which must divide it).
    fn head_dim(&self, heads: &Fact, hidden: usize) -> Result<Fact, ModelError> {
        match self.src.fact(|k| k.head_dim)? {
            Some(d) if d.value == 0 => Err(d.error(&self.weights, "zero head dimension")),
            Some(d) => Ok(d),
            None => {
                if hidden % heads.value != 0 {
                    return Err(heads.error(
                        &self.weights,
                        format!(
                            "hidden size {hidden} is not divisible by {} heads",
                            heads.value
                        ),
                    ));
                }
                Ok(Fact {
                    value: hidden / heads.value,
                    origin: self.derived(),
                })
            }
        }
    }

    /// The query's width, heads times their dimension: a product that does
    /// not fit a usize cannot match any stored shape; an unfused query
    /// tensor's height must be it.
    fn query_heads(
        &self,
        heads: &Fact,
        head_dim: &Fact,
        query: &QueryShape,
    ) -> Result<HeadShape, ModelError> {
        let (h, dh, first) = (heads.value, head_dim.value, &self.first);
        let anchor_out = query.out;
        let q_width = h.checked_mul(dh).ok_or_else(|| {
            head_dim.error(
                &self.weights,
                format!(
                    "{h} heads of dimension {dh} overflow the address space \
                     (the query weight '{}' has {anchor_out} rows)",
                    clean(first)
                ),
            )
        })?;
        if !self.fused() && anchor_out != q_width {
            return Err(invalid(
                &self.src.ck.file_of(first),
                Some(first),
                format!("{anchor_out} query rows disagree with {h} heads of dimension {dh}"),
            ));
        }
        Ok(HeadShape { h, dh, q_width })
    }

    /// The key tensor of layer 0 and the key's rows in it: a fused
    /// `[query; key; value]` (stacked or per group) holds them in half of
    /// what the query leaves.
    fn key_rows(&self, hs: &HeadShape, layers: usize) -> Result<(String, usize), ModelError> {
        let ck = self.src.ck;
        let (kt, _) = self
            .variant
            .holder(Role::Key)
            .expect("grouped-query families store the key (table test)");
        let kname = kt.name_in(&self.prefix, 0);
        let (kr, _) = out_in(kt.orientation, tensor_shape(ck, &kname, 0, layers)?);
        if kt.roles.len() <= 1 {
            return Ok((kname, kr));
        }
        // A fused [query; key; value], stacked or per group (table
        // test): the key is half of what the query leaves.
        let rest = kr.checked_sub(hs.q_width).filter(|r| r % 2 == 0);
        let kr = rest.ok_or_else(|| {
            invalid(
                &ck.file_of(&kname),
                Some(&kname),
                format!(
                    "{kr} rows of the fused query|key|value weight do not hold {} query \
                     heads of dimension {} and two equal key and value blocks",
                    hs.h, hs.dh
                ),
            )
        })? / 2;
        Ok((kname, kr))
    }

    /// Grouped-query attention's key/value heads: with `--heads`, the key's
    /// rows over the head dimension; else the family's keys, else as many
    /// as query heads. They must divide the heads and make the key's rows.
    fn read_kv_heads(
        &self,
        heads_flag: Option<usize>,
        hs: &HeadShape,
        layers: usize,
    ) -> Result<usize, ModelError> {
        let (h, dh, weights) = (hs.h, hs.dh, &self.weights);
        let ck = self.src.ck;
        let (kname, kr) = self.key_rows(hs, layers)?;
        let key_tensor = Origin::Derived {
            file: ck.file_of(&kname),
            tensor: kname.clone(),
        };
        let kv = match heads_flag {
            // --heads replaces the file's facts: the key rows give the groups.
            Some(_) => Fact {
                value: kr / dh,
                origin: key_tensor.clone(),
            },
            None => self.src.fact(|k| k.kv_heads)?.unwrap_or(Fact {
                value: h,
                origin: key_tensor.clone(),
            }),
        };
        let kv = kv.capped(weights, MAX_HEADS, "key/value heads")?;
        if kv.value == 0 && matches!(kv.origin, Origin::Key { .. }) {
            return Err(kv.error(weights, "zero key/value heads"));
        }
        let kv_width = kv.value.checked_mul(dh).ok_or_else(|| {
            kv.error(
                weights,
                format!(
                    "{} key/value heads of dimension {dh} overflow the address space \
                     (the key weight '{}' has {kr} rows)",
                    kv.value,
                    clean(&kname)
                ),
            )
        })?;
        if kv.value == 0 || kr != kv_width || h % kv.value != 0 {
            return Err(invalid(
                &ck.file_of(&kname),
                Some(&kname),
                format!(
                    "{kr} key rows do not give a divisor of {h} heads of dimension {dh} \
                     (key/value heads {})",
                    kv.value
                ),
            ));
        }
        Ok(kv.value)
    }

    /// That a fused query tensor is as high as its roles: the query's
    /// width plus the key's and value's (`kv_heads` heads each).
    fn check_fused_query(
        &self,
        query: &QueryShape,
        hs: &HeadShape,
        kv_heads: usize,
    ) -> Result<(), ModelError> {
        if !self.fused() {
            return Ok(());
        }
        let anchor = self.variant.anchor();
        let (h, dh) = (hs.h, hs.dh);
        // Each key/value role is kv_heads * head_dim <= q_width wide: no overflow.
        let want: Option<usize> = anchor.roles.iter().try_fold(0usize, |acc, r| {
            acc.checked_add(match r {
                Role::Query => hs.q_width,
                _ => kv_heads * dh,
            })
        });
        if want == Some(query.out) {
            return Ok(());
        }
        let names: Vec<&str> = anchor.roles.iter().map(|r| r.name()).collect();
        let (wr, wc) = match anchor.orientation {
            Orientation::OutIn => (want.unwrap_or(0), query.hidden),
            Orientation::InOut => (query.hidden, want.unwrap_or(0)),
        };
        let first = &self.first;
        Err(invalid(
            &self.src.ck.file_of(first),
            Some(first),
            format!(
                "the fused {} weight must be [{wr}, {wc}] for {h} heads of dimension {dh}, \
                 found [{}, {}]",
                names.join("|"),
                query.rows,
                query.cols
            ),
        ))
    }

    /// Feed-forward width: the output width of the first feed-forward input
    /// (a fused `[gate; up]` holds two blocks of it), checked against the
    /// family's keys.
    fn dense_width(&self, layers: usize) -> Result<usize, ModelError> {
        let ck = self.src.ck;
        let (ft, _) = self
            .variant
            .holder(Role::FfnGate)
            .or_else(|| self.variant.holder(Role::FfnIn))
            .expect("every family has a feed-forward input (table test)");
        let fname = ft.name_in(&self.prefix, 0);
        let (f0, f1) = tensor_shape(ck, &fname, 0, layers)?;
        if f0 == 0 || f1 == 0 {
            return Err(invalid(
                &ck.file_of(&fname),
                Some(&fname),
                format!("empty matrix: shape [{f0}, {f1}]"),
            ));
        }
        let (fused_height, _) = out_in(ft.orientation, (f0, f1));
        // A fused [gate; up] holds two blocks of the width I (table test).
        let parts = ft.roles.len();
        if fused_height % parts != 0 {
            return Err(invalid(
                &ck.file_of(&fname),
                Some(&fname),
                format!("{fused_height} rows do not split into {parts} equal feed-forward blocks"),
            ));
        }
        let intermediate = fused_height / parts;
        if let Some(i) = self.src.fact(|k| k.intermediate)? {
            i.must_equal(
                intermediate,
                &ck.file_of(&fname),
                &fname,
                format_args!("{intermediate} disagrees with the feed-forward width"),
            )?;
        }
        Ok(intermediate)
    }
}

/// The experts of a mixture-of-experts family, and the model's
/// feed-forward width (the dense layers', or an expert's when every layer
/// is sparse). Which layers are sparse follows the configuration (dense:
/// listed in `mlp_only_layers`, or `(l + 1) % decoder_sparse_step != 0`, or
/// no experts, transformers' rule; the keys' defaults are an empty list and
/// 1); the number of experts is the config's, else counted from the first
/// sparse layer's tensors; widths are the first sparse (dense) layer's
/// tensor heights, checked against the config keys that state them.
fn detect_moe(
    src: &Sources<'_>,
    m: &MoeSpec,
    prefix: &str,
    layers: usize,
    hidden: usize,
) -> Result<(usize, MoeLayout), ModelError> {
    let moe = MoeReader {
        src,
        m,
        prefix,
        layers,
        hidden,
    };
    let step = moe.sparse_step()?;
    let dense = moe.dense_listed()?;
    let stated_experts = src
        .config_fact(m.num_experts)?
        .map(|f| f.capped(&src.ck.file_of(""), MAX_EXPERTS, "experts"))
        .transpose()?;
    let sparsity = Sparsity {
        dense,
        step,
        has_experts: stated_experts.as_ref().is_none_or(|f| f.value > 0),
    };
    let first_sparse = (0..layers).find(|&l| sparsity.sparse(l));
    let first_dense = (0..layers).find(|&l| !sparsity.sparse(l));
    let widths = match first_sparse {
        Some(l) => moe.sparse_widths(l, stated_experts.as_ref())?,
        None => SparseWidths::default(),
    };
    let intermediate = match first_dense {
        Some(l) => moe.dense_width(l)?,
        None => widths.expert_width,
    };
    let per_token = moe.experts_per_token(widths.experts, stated_experts.as_ref())?;
    let layout = MoeLayout {
        layers: (0..layers)
            .map(|l| {
                if sparsity.sparse(l) {
                    LayerFfn {
                        experts: widths.experts,
                        shared: m.shared.is_some(),
                    }
                } else {
                    LayerFfn::DENSE
                }
            })
            .collect(),
        expert_width: widths.expert_width,
        shared_width: widths.shared_width,
        experts_per_token: per_token,
        fused: widths.fused,
    };
    Ok((intermediate, layout))
}

/// What [`detect_moe`] reads a mixture of experts from.
struct MoeReader<'a> {
    src: &'a Sources<'a>,
    m: &'a MoeSpec,
    prefix: &'a str,
    layers: usize,
    hidden: usize,
}

/// Which layers are sparse, by transformers' rule: a layer is dense when
/// listed in `mlp_only_layers`, or `(l + 1) % decoder_sparse_step != 0`,
/// or the config states no experts.
struct Sparsity {
    /// The listed dense layers the model has, sorted, each once.
    dense: Vec<usize>,
    step: usize,
    /// The config does not state zero experts.
    has_experts: bool,
}

impl Sparsity {
    /// Whether layer `l` is sparse (a binary search, not a scan of a list
    /// as long as config.json allows).
    fn sparse(&self, l: usize) -> bool {
        self.dense.binary_search(&l).is_err() && (l + 1) % self.step == 0 && self.has_experts
    }
}

/// What the first sparse layer's tensors tell (all zero without one):
/// the number of experts, an expert's and the shared expert's widths, and
/// whether the routed experts are stored as transformers v5's fused 3-D
/// tensors.
#[derive(Default)]
struct SparseWidths {
    experts: usize,
    expert_width: usize,
    shared_width: usize,
    fused: bool,
}

impl MoeReader<'_> {
    /// The tensor name of pattern `pat` in layer `l` (and expert `e`).
    fn name(&self, pat: &str, l: usize, e: Option<usize>) -> String {
        let n = format!("{}{}", self.prefix, pat.replace("{l}", &l.to_string()));
        match e {
            Some(e) => n.replace("{e}", &e.to_string()),
            None => n,
        }
    }

    /// Every `decoder_sparse_step`-th layer is sparse: the config's step
    /// (at least 1), else 1.
    fn sparse_step(&self) -> Result<usize, ModelError> {
        let step = match self.m.sparse_step {
            Some(k) => self.src.config_fact(&[k])?,
            None => None,
        };
        match step {
            Some(f) if f.value == 0 => Err(f.error(&self.src.ck.file_of(""), "must be at least 1")),
            Some(f) => Ok(f.value),
            None => Ok(1),
        }
    }

    /// The layers config.json lists as dense (`mlp_only_layers`; an empty
    /// list when absent): sorted, one entry per layer the model has (the
    /// list may repeat indices, or name layers it does not have).
    fn dense_listed(&self) -> Result<Vec<usize>, ModelError> {
        let ck = self.src.ck;
        let cfg_path = ck
            .config_path()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| ck.file_of(""));
        let mut dense_listed = Vec::new();
        if let (Some(k), Some(cfg)) = (self.m.dense_layers, ck.config()) {
            match cfg.get(k) {
                None | Some(Value::Null) => {}
                Some(Value::Array(a)) => {
                    for v in a {
                        let l = v
                            .as_u64()
                            .and_then(|x| usize::try_from(x).ok())
                            .ok_or_else(|| {
                                invalid(
                                    &cfg_path,
                                    Some(k),
                                    format!(
                                        "expected a list of layer indices, found {}",
                                        json_kind(v)
                                    ),
                                )
                            })?;
                        dense_listed.push(l);
                    }
                }
                Some(other) => {
                    return Err(invalid(
                        &cfg_path,
                        Some(k),
                        format!(
                            "expected a list of layer indices, found {}",
                            json_kind(other)
                        ),
                    ))
                }
            }
        }
        dense_listed.retain(|&l| l < self.layers);
        dense_listed.sort_unstable();
        dense_listed.dedup();
        Ok(dense_listed)
    }

    /// The height of the `[width, hidden]` tensor `n` of layer `l`.
    fn tensor_height(&self, n: &str, l: usize) -> Result<usize, ModelError> {
        let (ck, hidden) = (self.src.ck, self.hidden);
        let (r, c) = tensor_shape(ck, n, l, self.layers)?;
        if r == 0 || c != hidden {
            return Err(invalid(
                &ck.file_of(n),
                Some(n),
                format!("shape [{r}, {c}] is not [width, hidden size {hidden}]"),
            ));
        }
        Ok(r)
    }

    /// That a width measured from tensor `n` equals the stated one, if stated.
    fn check(&self, stated: Option<Fact>, got: usize, n: &str) -> Result<(), ModelError> {
        match stated {
            Some(f) => f.must_equal(
                got,
                &self.src.ck.file_of(n),
                n,
                format_args!("{got} rows disagree with the width"),
            ),
            None => Ok(()),
        }
    }

    /// The experts and widths of sparse layer `l`, checked against the
    /// config keys that state them.
    fn sparse_widths(&self, l: usize, stated: Option<&Fact>) -> Result<SparseWidths, ModelError> {
        let (m, ck) = (self.m, self.src.ck);
        let gate0 = self.name(m.experts[0], l, Some(0));
        // transformers v5 stores a layer's routed experts as two 3-D tensors.
        let v5 = m
            .fused
            .filter(|f| !ck.contains(&gate0) && ck.contains(&self.name(f.gate_up, l, None)));
        let (experts, expert_width, width_from) = match v5 {
            Some(f) => {
                let gu = self.name(f.gate_up, l, None);
                let down = self.name(f.down, l, None);
                let (e, w) = fused_experts(ck, &gu, &down, l, self.layers, self.hidden)?;
                if let Some(s) = stated {
                    s.must_equal(
                        e,
                        &ck.file_of(&gu),
                        &gu,
                        format_args!("{e} experts disagree with the number of experts"),
                    )?;
                }
                (e, w, gu)
            }
            None => {
                let experts = match stated {
                    Some(f) => f.value,
                    None => (0..)
                        .take_while(|&e| ck.contains(&self.name(m.experts[0], l, Some(e))))
                        .count(),
                };
                if experts == 0 || experts > MAX_EXPERTS {
                    return Err(invalid(
                        &ck.file_of(&gate0),
                        Some(&gate0),
                        format!("{experts} experts: expected 1 to {MAX_EXPERTS}"),
                    ));
                }
                (experts, self.tensor_height(&gate0, l)?, gate0)
            }
        };
        self.check(
            self.src.config_fact(m.expert_width)?,
            expert_width,
            &width_from,
        )?;
        let mut shared_width = 0;
        if let Some(sh) = m.shared {
            let g = self.name(sh[0], l, None);
            shared_width = self.tensor_height(&g, l)?;
            self.check(self.src.config_fact(m.shared_width)?, shared_width, &g)?;
        }
        Ok(SparseWidths {
            experts,
            expert_width,
            shared_width,
            fused: v5.is_some(),
        })
    }

    /// The width of dense layer `l`'s feed-forward, checked against the
    /// family's keys.
    fn dense_width(&self, l: usize) -> Result<usize, ModelError> {
        let (ft, _) = self
            .src
            .spec
            .holder(Role::FfnGate)
            .expect("mixture-of-experts families are gated (table test)");
        let n = ft.name_in(self.prefix, l);
        let i = self.tensor_height(&n, l)?;
        self.check(self.src.fact(|k| k.intermediate)?, i, &n)?;
        Ok(i)
    }

    /// `num_experts_per_tok`, if stated: at most the experts there are
    /// (without a sparse layer, the stated count or the limit).
    fn experts_per_token(
        &self,
        experts: usize,
        stated: Option<&Fact>,
    ) -> Result<Option<usize>, ModelError> {
        let Some(k) = self.src.config_fact(&["num_experts_per_tok"])? else {
            return Ok(None);
        };
        let most = match (experts, stated) {
            (0, Some(f)) => f.value,
            (0, None) => MAX_EXPERTS,
            (e, _) => e,
        };
        if k.value > most {
            return Err(k.error(
                &self.src.ck.file_of(""),
                format!(
                    "{} experts per token, more than the {most} experts there are",
                    k.value
                ),
            ));
        }
        Ok(Some(k.value))
    }
}

/// The number of experts and an expert's width from transformers v5's
/// fused expert tensors of layer `l` ([`super::families::FusedExperts`]):
/// `gate_up` must be `[E, 2I, N]` and `down` `[E, N, I]`, with `N` the
/// hidden size, `1 <= E <= MAX_EXPERTS` and `I > 0`; anything else is one
/// line naming the tensor.
fn fused_experts(
    ck: &Checkpoint,
    gate_up: &str,
    down: &str,
    l: usize,
    layers: usize,
    hidden: usize,
) -> Result<(usize, usize), ModelError> {
    let [e, r, c] = tensor_shape3(ck, gate_up, l, layers)?;
    if e == 0 || e > MAX_EXPERTS || r == 0 || r % 2 != 0 || c != hidden {
        return Err(invalid(
            &ck.file_of(gate_up),
            Some(gate_up),
            format!(
                "shape [{e}, {r}, {c}] is not [experts (1 to {MAX_EXPERTS}), 2 x expert width, \
                 hidden size {hidden}], the layout of transformers v5's fused 3-D expert tensors \
                 (each expert's gate rows, then its up rows)"
            ),
        ));
    }
    let width = r / 2;
    let d = tensor_shape3(ck, down, l, layers)?;
    if d != [e, hidden, width] {
        return Err(invalid(
            &ck.file_of(down),
            Some(down),
            format!(
                "shape {d:?} is not [{e} experts, hidden size {hidden}, expert width {width}], \
                 the layout of transformers v5's fused 3-D expert tensors"
            ),
        ));
    }
    Ok((e, width))
}
