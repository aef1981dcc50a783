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

/// Drops a CUDA API version suffix the way NVIDIA's reports do: only when the name ends in
/// `_v` followed by exactly four characters (`cudaLaunchKernel_v7000` -> `cudaLaunchKernel`,
/// `cudaMalloc_v3020` -> `cudaMalloc`). `cuMemAlloc_v2`, `cudaStreamIsCapturing_v10000` and
/// `cudaGetDriverEntryPoint_v11030` keep their suffix. Any other name is returned unchanged.
pub fn strip_api_version(name: &str) -> &str {
    let mut tail = name.char_indices().rev();
    match tail.nth(5) {
        Some((at, _)) if name[at..].starts_with("_v") => &name[..at],
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::strip_api_version;

    #[test]
    fn strips_only_v_and_four_characters() {
        assert_eq!(strip_api_version("cudaMalloc_v3020"), "cudaMalloc");
        assert_eq!(
            strip_api_version("cudaLaunchKernel_v7000"),
            "cudaLaunchKernel"
        );
        for kept in [
            "cuGetProcAddress_v2",
            "cuMemAlloc_v2",
            "cudaStreamIsCapturing_v10000",
            "cudaGetDriverEntryPoint_v11030",
            "cudaGetDeviceProperties_v12000",
            "cudaMalloc",
            "cuLaunchKernel",
            "foo_v",
            "foo_x1234",
            "sm_80",
            "_v123",
            "",
        ] {
            assert_eq!(strip_api_version(kept), kept);
        }
        assert_eq!(strip_api_version("_v1234"), "");
        // Four characters, not four bytes.
        assert_eq!(strip_api_version("f_vé12x"), "f");
    }
}
