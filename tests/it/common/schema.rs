//! Checks a `--format json` document against the schema `rocforge schema NAME` publishes for it:
//! types, required fields, enums and constants, through `$ref`s and `oneOf`s. Enough of JSON
//! Schema for what schemars generates; patterns and formats are not checked.

use std::path::Path;

use serde_json::Value;

/// Panics, naming the place, where `doc` breaks the schema of the output `name`.
pub fn assert_matches_schema(dir: &Path, name: &str, doc: &Value) {
    if let Err(e) = schema_error(dir, name, doc) {
        panic!("{name}: {e}\n{doc:#}");
    }
}

/// Where `doc` first breaks the schema of the output `name`.
pub fn schema_error(dir: &Path, name: &str, doc: &Value) -> Result<(), String> {
    let o = super::rocforge(dir, &["schema", name]);
    assert_eq!(o.code, 0, "rocforge schema {name}: {}", o.stderr);
    let schema: Value = serde_json::from_str(&o.stdout).unwrap();
    check(&schema, &schema, doc, "")
}

fn check(root: &Value, s: &Value, v: &Value, at: &str) -> Result<(), String> {
    let Some(s) = s.as_object() else {
        return Ok(()); // `true`: anything
    };
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let target = root
            .pointer(r.trim_start_matches('#'))
            .ok_or(format!("{at}: no {r}"))?;
        check(root, target, v, at)?;
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.iter().any(|t| is_type(v, t)) {
            return Err(format!("{at}: {v} is not {types:?}"));
        }
    }
    if let Some(c) = s.get("const")
        && c != v
    {
        return Err(format!("{at}: {v} is not {c}"));
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        return Err(format!("{at}: {v} is not one of {e:?}"));
    }
    if let Some(obj) = v.as_object() {
        let props = s.get("properties").and_then(Value::as_object);
        for key in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = key.as_str().unwrap_or_default();
            if !obj.contains_key(key) {
                return Err(format!("{at}: no required field {key:?}"));
            }
        }
        for (k, item) in obj {
            let here = format!("{at}.{k}");
            match (props.and_then(|p| p.get(k)), s.get("additionalProperties")) {
                (Some(sub), _) => check(root, sub, item, &here)?,
                (None, Some(extra)) => check(root, extra, item, &here)?,
                (None, None) => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, item) in arr.iter().enumerate() {
            check(root, items, item, &format!("{at}[{i}]"))?;
        }
    }
    for (key, need) in [("oneOf", 1), ("anyOf", 1)] {
        if let Some(alts) = s.get(key).and_then(Value::as_array) {
            let fits = alts
                .iter()
                .filter(|a| check(root, a, v, at).is_ok())
                .count();
            if fits < need {
                return Err(format!("{at}: {v} fits none of its {key}"));
            }
        }
    }
    for sub in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        check(root, sub, v, at)?;
    }
    Ok(())
}

fn is_type(v: &Value, t: &str) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_u64() || v.is_i64(),
        _ => true,
    }
}
