//! The OpenAPI 3 document served at `/api/openapi.json`.

use serde_json::{Value, json};

pub fn document() -> Value {
    json!({
        "openapi": "3.1.0",
        "info": { "title": "OpenVaala", "version": env!("CARGO_PKG_VERSION") },
        "paths": {}
    })
}
