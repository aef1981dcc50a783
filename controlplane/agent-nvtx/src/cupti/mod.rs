//! The CUPTI side of the injection library: GPU kernels, memory copies and sets, CUDA runtime
//! and driver calls and synchronisations, recorded through CUPTI's activity API and added to
//! the same dump as the NVTX events.
//!
//! ```text
//!  CUDA driver (cuInit) --CUDA_INJECTION64_PATH--> InitializeInjection --dlopen--> libcupti.so
//!  START: cuptiActivityEnable(kinds)     CUPTI buffers --complete--> decode --> Collector
//!  STOP / exit: disable, cuptiActivityFlushAll(FORCED) --> Collector::take(window) --> Dump.cuda
//! ```
//! No CUDA headers or GPU are needed to build it: [`layout`] declares the few record fields it
//! reads and [`ffi`] the few functions it calls. When CUPTI cannot be found or refuses, the
//! program runs on untouched and the dump says why (`CudaActivity::unavailable`).
//!
//! Environment (set by the agent): `NSIGHT_CUPTI_LIB` (the libcupti to load; else the process's
//! own, `CUDA_HOME`'s, or the loader's), `NSIGHT_CUPTI_MAX_MIB` (the memory cap per process),
//! `NSIGHT_CUPTI_DRIVER_API=1` (driver calls too).

pub mod collector;
pub mod decode;
pub(crate) mod ffi;
pub mod layout;

/// Environment variable naming the libcupti to load.
pub const ENV_LIB: &str = "NSIGHT_CUPTI_LIB";
/// Environment variable capping the memory the records held per process take (MiB).
pub const ENV_MAX_MIB: &str = "NSIGHT_CUPTI_MAX_MIB";
/// Environment variable: `1` to record CUDA driver API calls too.
pub const ENV_DRIVER_API: &str = "NSIGHT_CUPTI_DRIVER_API";

/// Where libcupti is looked for, in order, when `NSIGHT_CUPTI_LIB` is not set: the loader's
/// search path first (the process's own CUDA), then `CUDA_HOME` and the usual install prefixes.
pub fn candidates(cuda_home: Option<&str>) -> Vec<String> {
    let mut out: Vec<String> = ["libcupti.so", "libcupti.so.13", "libcupti.so.12"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let mut roots: Vec<String> = cuda_home.into_iter().map(str::to_owned).collect();
    roots.push("/usr/local/cuda".into());
    for root in roots {
        for sub in [
            "extras/CUPTI/lib64",
            "targets/x86_64-linux/lib",
            "targets/sbsa-linux/lib",
            "lib64",
        ] {
            out.push(format!("{root}/{sub}/libcupti.so"));
        }
    }
    out
}
