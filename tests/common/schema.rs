//! A small JSON Schema (2020-12) validator for the keywords that
//! `docs/certificate.schema.json` uses: type, const, enum, required,
//! properties, additionalProperties (false), items, minItems, minimum,
//! pattern, anyOf and local `$ref`s. Any other keyword fails loudly, so the
//! schema cannot silently use something this validator ignores.

use serde_json::Value;

pub fn validate(schema: &Value, v: &Value) -> Result<(), String> {
    check(schema, schema, v, "$")
}

/// Validates `v` against the schema's `#/$defs/NAME` (a part: `part`).
pub fn validate_def(schema: &Value, name: &str, v: &Value) -> Result<(), String> {
    let def = schema["$defs"]
        .get(name)
        .unwrap_or_else(|| panic!("the schema has no $defs/{name}"));
    check(schema, def, v, "$")
}

fn resolve<'a>(root: &'a Value, r: &str) -> &'a Value {
    let path = r.strip_prefix("#/").expect("local $ref");
    path.split('/').fold(root, |acc, k| &acc[k])
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        other => panic!("unsupported type {other}"),
    }
}

fn check(root: &Value, s: &Value, v: &Value, at: &str) -> Result<(), String> {
    let obj = s.as_object().expect("schema object");
    for (k, rule) in obj {
        match k.as_str() {
            "$schema" | "$id" | "title" | "description" | "$defs" => {}
            "$ref" => check(root, resolve(root, rule.as_str().unwrap()), v, at)?,
            "type" => {
                let ok = match rule {
                    Value::String(t) => type_ok(t, v),
                    Value::Array(ts) => ts.iter().any(|t| type_ok(t.as_str().unwrap(), v)),
                    _ => panic!("bad type"),
                };
                if !ok {
                    return Err(format!("{at}: expected type {rule}, found {v}"));
                }
            }
            "const" => {
                if v != rule {
                    return Err(format!("{at}: expected {rule}, found {v}"));
                }
            }
            "enum" => {
                if !rule.as_array().unwrap().contains(v) {
                    return Err(format!("{at}: {v} not in {rule}"));
                }
            }
            "required" => {
                for key in rule.as_array().unwrap() {
                    if v.get(key.as_str().unwrap()).is_none() {
                        return Err(format!("{at}: missing required key {key}"));
                    }
                }
            }
            "properties" => {
                if let Some(o) = v.as_object() {
                    for (key, sub) in rule.as_object().unwrap() {
                        if let Some(x) = o.get(key) {
                            check(root, sub, x, &format!("{at}.{key}"))?;
                        }
                    }
                }
            }
            "additionalProperties" => {
                assert_eq!(
                    rule,
                    &Value::Bool(false),
                    "only additionalProperties: false"
                );
                if let Some(o) = v.as_object() {
                    let props = obj["properties"].as_object().unwrap();
                    for key in o.keys() {
                        if !props.contains_key(key) {
                            return Err(format!("{at}: unexpected key '{key}'"));
                        }
                    }
                }
            }
            "items" => {
                if let Some(a) = v.as_array() {
                    for (i, x) in a.iter().enumerate() {
                        check(root, rule, x, &format!("{at}[{i}]"))?;
                    }
                }
            }
            "minItems" => {
                if let Some(a) = v.as_array() {
                    if (a.len() as u64) < rule.as_u64().unwrap() {
                        return Err(format!("{at}: fewer than {rule} items"));
                    }
                }
            }
            "minimum" => {
                if let Some(x) = v.as_f64() {
                    if x < rule.as_f64().unwrap() {
                        return Err(format!("{at}: {x} below minimum {rule}"));
                    }
                }
            }
            "pattern" => {
                if let Some(x) = v.as_str() {
                    let re = regex::Regex::new(rule.as_str().unwrap()).unwrap();
                    if !re.is_match(x) {
                        return Err(format!("{at}: '{x}' does not match {rule}"));
                    }
                }
            }
            "anyOf" => {
                let alts = rule.as_array().unwrap();
                if !alts.iter().any(|a| check(root, a, v, at).is_ok()) {
                    return Err(format!("{at}: matches none of anyOf"));
                }
            }
            other => panic!("schema keyword '{other}' is not supported by this validator"),
        }
    }
    Ok(())
}
