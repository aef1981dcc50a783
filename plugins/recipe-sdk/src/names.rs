//! Display names of traced functions.

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
