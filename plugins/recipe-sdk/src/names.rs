//! Display names: strings of `StringIds` looked up by id, and names of traced functions.

use std::collections::{BTreeSet, HashMap};

use crate::{Report, Value};

/// Ids looked up per query in [`string_values`].
const IDS_PER_QUERY: usize = 500;

/// `StringIds.value` of each of `ids` that has one. Reading names once per distinct id, after
/// grouping rows by id, keeps the strings out of the per-row traffic between the recipe and
/// the host.
pub fn string_values(
    report: &dyn Report,
    ids: &BTreeSet<i64>,
) -> Result<HashMap<i64, String>, String> {
    let ids: Vec<i64> = ids.iter().copied().collect();
    let mut values = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(IDS_PER_QUERY) {
        let marks = vec!["?"; chunk.len()].join(",");
        let params: Vec<Value> = chunk.iter().map(|&i| Value::Int(i)).collect();
        report.query(
            &format!("SELECT id, value FROM StringIds WHERE id IN ({marks})"),
            &params,
            &mut |row| {
                if let [Value::Int(id), Value::Text(v)] = row {
                    values.insert(*id, v.clone());
                }
                Ok(())
            },
        )?;
    }
    Ok(values)
}

/// Drops a CUDA API version suffix: a trailing `_v` followed by one or more digits
/// (`cudaMalloc_v3020` -> `cudaMalloc`, `cudaStreamIsCapturing_v10000` ->
/// `cudaStreamIsCapturing`). Any other name is returned unchanged.
pub fn strip_api_version(name: &str) -> &str {
    let without_digits = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if without_digits.len() == name.len() {
        return name;
    }
    without_digits.strip_suffix("_v").unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::strip_api_version;

    #[test]
    fn strips_only_a_trailing_version_suffix() {
        assert_eq!(strip_api_version("cudaMalloc_v3020"), "cudaMalloc");
        assert_eq!(
            strip_api_version("cudaStreamIsCapturing_v10000"),
            "cudaStreamIsCapturing"
        );
        assert_eq!(strip_api_version("cuMemAlloc_v2"), "cuMemAlloc");
        assert_eq!(strip_api_version("cudaMalloc"), "cudaMalloc");
        assert_eq!(strip_api_version("cuLaunchKernel"), "cuLaunchKernel");
        assert_eq!(strip_api_version("foo_v"), "foo_v");
        assert_eq!(strip_api_version("foo_x12"), "foo_x12");
        assert_eq!(strip_api_version("sm_80"), "sm_80");
        assert_eq!(strip_api_version("_v1"), "");
        assert_eq!(strip_api_version(""), "");
    }
}
