//! The OpenAPI 3 document of the REST API, served at `/v1/openapi.json` and committed as
//! docs/api/analysis.openapi.json (a test fails when the two differ; regenerate with
//! `nsight-analysis --print-openapi > docs/api/analysis.openapi.json`).

use serde_json::Value;

/// The whole document: derived from the contract's types (`nsight_contracts::openapi`).
pub fn document() -> Value {
    nsight_contracts::openapi::analysis()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The committed document must equal the served one.
    #[test]
    fn committed_openapi_is_current() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/api/analysis.openapi.json"
        );
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        let current = serde_json::to_string_pretty(&document()).unwrap() + "\n";
        assert!(
            committed == current,
            "docs/api/analysis.openapi.json is stale: run \
             `cargo run -p nsight-analysis -- --print-openapi > docs/api/analysis.openapi.json`"
        );
    }
}
