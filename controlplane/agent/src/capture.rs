//! What the built-in backends record: NVTX ranges, GPU activity through CUPTI, or both, from
//! one injection library (`libnsight_nvtx.so`). `--backend auto` (the default) records both
//! where the container sees a GPU and NVTX alone elsewhere. Pure choices over facts the binary
//! gathers ([`gpu_present`], [`find_cupti`]); [`environment`] is what the target is started with.
//!
//! ```text
//!  nvtx        NVTX_INJECTION64_PATH=<lib>
//!  cupti       CUDA_INJECTION64_PATH=<lib>  [NSIGHT_CUPTI_LIB=<libcupti>]
//!  nvtx+cupti  both
//! ```

use std::path::{Path, PathBuf};

/// Which recorders the injection library runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capture {
    pub nvtx: bool,
    pub cupti: bool,
}

impl Capture {
    pub const NVTX: Self = Self {
        nvtx: true,
        cupti: false,
    };

    /// The backend's name as `--backend` spells it and the coordinator shows it.
    pub fn name(self) -> &'static str {
        match (self.nvtx, self.cupti) {
            (true, true) => "nvtx+cupti",
            (false, true) => "cupti",
            _ => "nvtx",
        }
    }

    /// `--backend` for the built-in capture: `nvtx`, `cupti`, `nvtx+cupti`, or `auto` (both
    /// where a GPU is present, else NVTX alone). `None` for any other name.
    pub fn choose(backend: &str, gpu_present: bool) -> Option<Self> {
        match backend {
            "nvtx" => Some(Self::NVTX),
            "cupti" => Some(Self {
                nvtx: false,
                cupti: true,
            }),
            "nvtx+cupti" => Some(Self {
                nvtx: true,
                cupti: true,
            }),
            "auto" => Some(Self {
                nvtx: true,
                cupti: gpu_present,
            }),
            _ => None,
        }
    }
}

/// The injection library and what it records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injection {
    pub lib: PathBuf,
    pub capture: Capture,
    /// The libcupti to load (`--cupti-lib` / `NSIGHT_CUPTI_LIB`); else the library looks in
    /// the target's own CUDA.
    pub cupti_lib: Option<PathBuf>,
}

/// The environment the target is started with for `injection`.
pub fn environment(injection: &Injection) -> Vec<(&'static str, String)> {
    let lib = injection.lib.display().to_string();
    let mut env = Vec::new();
    if injection.capture.nvtx {
        env.push(("NVTX_INJECTION64_PATH", lib.clone()));
    }
    if injection.capture.cupti {
        env.push(("CUDA_INJECTION64_PATH", lib));
        if let Some(p) = &injection.cupti_lib {
            env.push((nsight_nvtx::cupti::ENV_LIB, p.display().to_string()));
        }
    }
    env
}

/// Whether this container sees an NVIDIA GPU: the driver lists one, or its device node exists.
pub fn gpu_present() -> bool {
    std::fs::read_dir("/proc/driver/nvidia/gpus").is_ok_and(|mut d| d.next().is_some())
        || Path::new("/dev/nvidia0").exists()
}

/// Where libcupti is, as far as the agent can tell from the file system: `explicit`, else
/// `libcupti.so*` in `LD_LIBRARY_PATH`, `CUDA_HOME` or /usr/local/cuda. (The injected process
/// may still find one through its own loader path; this is for the diagnostics.)
pub fn find_cupti(
    explicit: Option<&Path>,
    cuda_home: Option<&str>,
    ld_library_path: Option<&str>,
) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return p.is_file().then(|| p.to_path_buf());
    }
    let mut dirs: Vec<PathBuf> = ld_library_path
        .into_iter()
        .flat_map(|v| v.split(':'))
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect();
    for candidate in nsight_nvtx::cupti::candidates(cuda_home) {
        if let Some(dir) = Path::new(&candidate).parent().filter(|d| d.is_absolute()) {
            dirs.push(dir.to_path_buf());
        }
    }
    dirs.iter().find_map(|dir| {
        std::fs::read_dir(dir)
            .ok()?
            .filter_map(Result::ok)
            .find_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with("libcupti.so").then(|| e.path())
            })
    })
}

/// What stands between `capture` and GPU activity in the report, one sentence each.
pub fn diagnose(capture: Capture, gpu_present: bool, cupti: Option<&Path>) -> Vec<String> {
    let mut out = Vec::new();
    if !capture.cupti {
        return out;
    }
    if !gpu_present {
        out.push(
            "the cupti backend is selected but this container sees no NVIDIA GPU: the report \
             will have no GPU activity (request a GPU, or use --backend nvtx)"
                .to_owned(),
        );
    }
    if cupti.is_none() {
        out.push(
            "no CUPTI found (libcupti.so in LD_LIBRARY_PATH, $CUDA_HOME or /usr/local/cuda): \
             unless the program's own CUDA brings one, GPU activity will not be recorded (give \
             its path with --cupti-lib / NSIGHT_CUPTI_LIB)"
                .to_owned(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_records_gpu_activity_only_where_there_is_a_gpu() {
        assert_eq!(
            Capture::choose("auto", true).map(Capture::name),
            Some("nvtx+cupti")
        );
        assert_eq!(
            Capture::choose("auto", false).map(Capture::name),
            Some("nvtx")
        );
        assert_eq!(
            Capture::choose("cupti", false).map(Capture::name),
            Some("cupti")
        );
        assert_eq!(
            Capture::choose("nvtx", true).map(Capture::name),
            Some("nvtx")
        );
        assert_eq!(Capture::choose("gpu", true), None);
    }

    #[test]
    fn the_environment_loads_the_library_where_each_recorder_needs_it() {
        let injection = |nvtx, cupti, cupti_lib: Option<&str>| Injection {
            lib: "/t/libnsight_nvtx.so".into(),
            capture: Capture { nvtx, cupti },
            cupti_lib: cupti_lib.map(PathBuf::from),
        };
        let names = |i: &Injection| -> Vec<&str> { environment(i).iter().map(|e| e.0).collect() };
        assert_eq!(
            names(&injection(true, false, Some("/c.so"))),
            ["NVTX_INJECTION64_PATH"]
        );
        assert_eq!(
            names(&injection(false, true, None)),
            ["CUDA_INJECTION64_PATH"]
        );
        let both = injection(true, true, Some("/cuda/libcupti.so"));
        assert_eq!(
            environment(&both),
            [
                ("NVTX_INJECTION64_PATH", "/t/libnsight_nvtx.so".to_owned()),
                ("CUDA_INJECTION64_PATH", "/t/libnsight_nvtx.so".to_owned()),
                ("NSIGHT_CUPTI_LIB", "/cuda/libcupti.so".to_owned()),
            ]
        );
    }

    #[test]
    fn cupti_is_found_on_the_library_path_and_missing_pieces_are_said() {
        let dir = std::env::temp_dir().join(format!("capture-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let lib = dir.join("libcupti.so.13");
        std::fs::write(&lib, b"").unwrap_or_else(|e| panic!("{e}"));
        let path = format!("/nonexistent:{}", dir.display());
        assert_eq!(
            find_cupti(None, Some("/nonexistent"), Some(&path)),
            Some(lib.clone())
        );
        assert_eq!(
            find_cupti(Some(&dir.join("nope.so")), None, Some(&path)),
            None
        );
        let both = Capture::choose("nvtx+cupti", true).unwrap_or(Capture::NVTX);
        assert!(diagnose(both, true, Some(&lib)).is_empty());
        let said = diagnose(both, false, None).join("\n");
        assert!(
            said.contains("no NVIDIA GPU") && said.contains("no CUPTI found"),
            "{said}"
        );
        assert!(diagnose(Capture::NVTX, false, None).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
