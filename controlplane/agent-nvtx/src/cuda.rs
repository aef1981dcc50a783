//! GPU activity as the dump carries it: kernels, memory copies and sets, CUDA runtime and driver
//! calls, synchronisations and the devices, decoded from CUPTI activity records by
//! [`crate::cupti`] and turned into the report's `CUPTI_ACTIVITY_KIND_*` tables by the agent.
//! Plain data, no behaviour.
//!
//! Invariants: every `name` index points into [`CudaActivity::names`]; times are
//! `CLOCK_MONOTONIC` nanoseconds, the clock of the NVTX events in the same dump; values keep
//! CUPTI's numbering (copy kinds, memory kinds, synchronisation types): the report writer maps
//! them to nsys's enums.

use serde::{Deserialize, Serialize};

/// A kernel execution (`CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kernel {
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation: u32,
    /// The mangled name, as CUPTI gives it (an index of [`CudaActivity::names`]).
    pub name: u32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub registers_per_thread: u16,
    pub static_shared_memory: i32,
    pub dynamic_shared_memory: i32,
    pub local_memory_per_thread: u32,
    pub local_memory_total: u32,
    pub grid_id: i64,
    /// The requested cache configuration (low 4 bits of CUPTI's `cacheConfig`).
    pub cache_config: u8,
    pub launch_type: u8,
    pub shared_memory_executed: u32,
    pub graph_node_id: u64,
    pub shared_memory_limit_config: u32,
}

/// A memory copy (`CUPTI_ACTIVITY_KIND_MEMCPY`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memcpy {
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation: u32,
    pub bytes: u64,
    /// `CUpti_ActivityMemcpyKind`.
    pub copy_kind: u8,
    /// `CUpti_ActivityMemoryKind` of the source and the destination.
    pub src_kind: u8,
    pub dst_kind: u8,
    pub graph_node_id: u64,
}

/// A memory set (`CUPTI_ACTIVITY_KIND_MEMSET`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memset {
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub correlation: u32,
    pub bytes: u64,
    pub value: u32,
    /// `CUpti_ActivityMemoryKind`.
    pub memory_kind: u16,
    pub graph_node_id: u64,
}

/// Which CUDA API a call belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Api {
    Runtime,
    Driver,
}

/// A CUDA runtime or driver API call (`CUPTI_ACTIVITY_KIND_RUNTIME` / `_DRIVER`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiCall {
    pub api: Api,
    /// CUPTI's callback id in the API's domain.
    pub cbid: u32,
    /// The function's name, e.g. `cudaLaunchKernel_v7000` (an index of [`CudaActivity::names`]).
    pub name: u32,
    pub start: u64,
    pub end: u64,
    pub pid: u32,
    pub tid: u32,
    pub correlation: u32,
    pub return_value: u32,
}

/// A synchronisation (`CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sync {
    pub start: u64,
    pub end: u64,
    pub context: u32,
    /// `u32::MAX` when the synchronisation is not about one stream.
    pub stream: u32,
    pub correlation: u32,
    /// `CUpti_ActivitySynchronizationType`.
    pub sync_type: u32,
    pub event: u32,
}

/// A GPU the process could use, from the CUDA driver.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    pub id: u32,
    pub name: String,
    pub uuid: String,
    pub total_memory: u64,
    pub sm_count: u32,
    pub compute_major: u32,
    pub compute_minor: u32,
    pub clock_rate_khz: u32,
    pub l2_cache_size: u32,
    pub bus_location: String,
}

/// All the GPU activity one process recorded in one window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaActivity {
    /// Interned names: kernels' mangled names and API functions' names.
    pub names: Vec<String>,
    pub kernels: Vec<Kernel>,
    pub memcpys: Vec<Memcpy>,
    pub memsets: Vec<Memset>,
    pub api_calls: Vec<ApiCall>,
    pub syncs: Vec<Sync>,
    pub devices: Vec<Device>,
    /// Records lost: CUPTI's own count of dropped records plus those over the memory cap.
    pub dropped: u64,
    /// The CUPTI library that recorded them (path and `cuptiGetVersion`).
    pub cupti: String,
    /// Why GPU activity could not be recorded (no CUPTI, CUPTI refused), when it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl CudaActivity {
    /// The name at `index`, or `""` for an index out of range.
    pub fn name(&self, index: u32) -> &str {
        self.names
            .get(index as usize)
            .map(String::as_str)
            .unwrap_or_default()
    }

    /// How many records it holds.
    pub fn len(&self) -> usize {
        self.kernels.len()
            + self.memcpys.len()
            + self.memsets.len()
            + self.api_calls.len()
            + self.syncs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
