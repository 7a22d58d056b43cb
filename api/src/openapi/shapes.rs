//! Response shapes as client generators take them best: every body a plain object schema under
//! its own name. Applied to the derived document after the resource modules are merged.
//!
//! - A schema derived from a struct that flattens another (`PayoutFull` = `PayoutShort` + the
//!   get-only fields) comes out of utoipa as `allOf [$ref, {..}]`; it is written out as one
//!   object with the properties and `required` of both, so a generated model is one class.
//! - Every `metadata` property refers to the one `Metadata` map the requests take, so a client
//!   reads back the type it built.
//! - A property that is an object without declared properties (an event's `data`) says it is a
//!   map of any values (`additionalProperties: {}`): generators otherwise type it as an empty
//!   object no field can be read from.

use serde_json::{Map, Value, json};

/// Writes each component that is an `allOf` of objects as one object schema.
fn flatten_all_of(schemas: &mut Map<String, Value>) {
    let names: Vec<String> = schemas.iter().filter(|(_, s)| s.get("allOf").is_some()).map(|(n, _)| n.clone()).collect();
    for name in names {
        let parts = schemas[&name]["allOf"].as_array().cloned().unwrap_or_default();
        let mut properties = Map::new();
        let mut required: Vec<Value> = Vec::new();
        for part in parts {
            let part = match part["$ref"].as_str() {
                Some(r) => schemas[r.trim_start_matches("#/components/schemas/")].clone(),
                None => part,
            };
            assert!(
                part.get("allOf").is_none() && part["type"] == "object",
                "{name}: only an allOf of plain objects can be flattened"
            );
            properties.extend(part["properties"].as_object().cloned().unwrap_or_default());
            for r in part["required"].as_array().into_iter().flatten() {
                if !required.contains(r) {
                    required.push(r.clone());
                }
            }
        }
        let s = schemas[&name].as_object_mut().expect("an object schema");
        s.remove("allOf");
        s.insert("type".into(), json!("object"));
        s.insert("properties".into(), Value::Object(properties));
        s.insert("required".into(), Value::Array(required));
    }
}

/// Points every `metadata` property at `Metadata` (nullable where the derived one was).
fn metadata_refs(schemas: &mut Map<String, Value>) {
    let metadata = json!({"$ref": "#/components/schemas/Metadata"});
    for (name, s) in schemas.iter_mut() {
        if name == "Metadata" {
            continue;
        }
        let Some(p) = s.get_mut("properties").and_then(|p| p.get_mut("metadata")) else { continue };
        let nullable = match &p["type"] {
            Value::Array(ts) if ts.contains(&json!("object")) => ts.contains(&json!("null")),
            Value::String(t) if t == "object" => false,
            // Already written (a request body's `Metadata` reference).
            _ => continue,
        };
        let mut named =
            if nullable { json!({"anyOf": [metadata.clone(), {"type": "null"}]}) } else { metadata.clone() };
        if let Some(d) = p.get("description") {
            named["description"] = d.clone();
        }
        *p = named;
    }
}

/// Marks each property that is an object without declared properties as a map of any values.
fn free_maps(schemas: &mut Map<String, Value>) {
    for s in schemas.values_mut() {
        for p in s.get_mut("properties").and_then(Value::as_object_mut).into_iter().flat_map(|p| p.values_mut()) {
            if p["type"] == "object" && p.get("properties").is_none() && p.get("additionalProperties").is_none() {
                p["additionalProperties"] = json!({});
            }
        }
    }
}

/// The passes above, on the serialised document.
pub fn plain(doc: &mut Value) {
    let schemas = doc["components"]["schemas"].as_object_mut().expect("components.schemas");
    flatten_all_of(schemas);
    metadata_refs(schemas);
    free_maps(schemas);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn an_all_of_of_objects_becomes_one_object() {
        let mut doc = json!({"components": {"schemas": {
            "Short": {"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}},
            "Full": {"description": "d", "allOf": [
                {"$ref": "#/components/schemas/Short"},
                {"type": "object", "required": ["extra", "id"], "properties": {"extra": {"type": "integer"},
                    "metadata": {"type": ["object", "null"]}}}
            ]},
            "Metadata": {"type": "object"},
            "Event": {"type": "object", "properties": {"data": {"type": "object"}}}
        }}});
        super::plain(&mut doc);
        let full = &doc["components"]["schemas"]["Full"];
        assert_eq!(full["type"], "object");
        assert_eq!(full["description"], "d");
        assert!(full.get("allOf").is_none());
        assert_eq!(full["required"], json!(["id", "extra"]));
        assert_eq!(full["properties"]["id"]["type"], "string");
        assert_eq!(
            full["properties"]["metadata"],
            json!({"anyOf": [{"$ref": "#/components/schemas/Metadata"}, {"type": "null"}]})
        );
        let data = &doc["components"]["schemas"]["Event"]["properties"]["data"];
        assert_eq!(data["additionalProperties"], json!({}));
    }
}
