//! Decoding one CUPTI activity record (the bytes `cuptiActivityGetNextRecord` points at) into
//! the dump's types, by the offsets of [`super::layout`]. Pure and safe: the record is a byte
//! slice, pointers inside it (a kernel's name) come back as numbers for the caller to resolve.
//! A record too short for its kind, or of a kind not read here, decodes to `None`.

use super::layout::{self, kind};
use crate::cuda::{Api, ApiCall, Kernel, Memcpy, Memset, Sync};

/// One decoded record. Names are resolved by the caller: a kernel's `name` field is left 0 and
/// its C string pointer given beside it; an API call's name comes from its domain and `cbid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    Kernel { kernel: Kernel, name_ptr: u64 },
    Memcpy(Memcpy),
    Memset(Memset),
    Api(ApiCall),
    Sync(Sync),
}

impl Decoded {
    /// The record's start and end, mutable.
    fn times(&mut self) -> (&mut u64, &mut u64) {
        match self {
            Self::Kernel { kernel, .. } => (&mut kernel.start, &mut kernel.end),
            Self::Memcpy(m) => (&mut m.start, &mut m.end),
            Self::Memset(m) => (&mut m.start, &mut m.end),
            Self::Api(c) => (&mut c.start, &mut c.end),
            Self::Sync(s) => (&mut s.start, &mut s.end),
        }
    }

    /// False for a record a forced flush delivered before the GPU filled in its times.
    pub fn complete(&mut self) -> bool {
        let (start, end) = self.times();
        *start != 0 && *end >= *start
    }

    /// Moves the record's times by `delta` nanoseconds (from CUPTI's clock to ours).
    pub fn shift(&mut self, delta: i64) {
        let (start, end) = self.times();
        *start = start.saturating_add_signed(delta);
        *end = end.saturating_add_signed(delta);
    }
}

fn bytes<const N: usize>(rec: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(src) = rec.get(at..at + N) {
        out.copy_from_slice(src);
    }
    out
}

fn u8_at(rec: &[u8], at: usize) -> u8 {
    rec.get(at).copied().unwrap_or(0)
}

fn u16_at(rec: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes(bytes(rec, at))
}

fn u32_at(rec: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(bytes(rec, at))
}

fn i32_at(rec: &[u8], at: usize) -> i32 {
    i32::from_ne_bytes(bytes(rec, at))
}

fn u64_at(rec: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(bytes(rec, at))
}

fn i64_at(rec: &[u8], at: usize) -> i64 {
    i64::from_ne_bytes(bytes(rec, at))
}

/// The record's `CUpti_ActivityKind`.
pub fn kind_of(rec: &[u8]) -> Option<u32> {
    (rec.len() >= 4).then(|| u32_at(rec, layout::KIND))
}

/// Decodes `rec`; `None` for a kind this library does not read or a record too short for it.
pub fn decode(rec: &[u8]) -> Option<Decoded> {
    match kind_of(rec)? {
        kind::KERNEL | kind::CONCURRENT_KERNEL => kernel(rec),
        kind::MEMCPY => memcpy(rec),
        kind::MEMSET => memset(rec),
        kind::RUNTIME => api(rec, Api::Runtime),
        kind::DRIVER => api(rec, Api::Driver),
        kind::SYNCHRONIZATION => sync(rec),
        _ => None,
    }
}

fn kernel(rec: &[u8]) -> Option<Decoded> {
    use layout::kernel as k;
    if rec.len() < k::MIN_LEN {
        return None;
    }
    let kernel = Kernel {
        start: u64_at(rec, k::START),
        end: u64_at(rec, k::END),
        device: u32_at(rec, k::DEVICE),
        context: u32_at(rec, k::CONTEXT),
        stream: u32_at(rec, k::STREAM),
        correlation: u32_at(rec, k::CORRELATION),
        name: 0,
        grid: [
            i32_at(rec, k::GRID_X),
            i32_at(rec, k::GRID_Y),
            i32_at(rec, k::GRID_Z),
        ],
        block: [
            i32_at(rec, k::BLOCK_X),
            i32_at(rec, k::BLOCK_Y),
            i32_at(rec, k::BLOCK_Z),
        ],
        registers_per_thread: u16_at(rec, k::REGISTERS),
        static_shared_memory: i32_at(rec, k::STATIC_SHARED),
        dynamic_shared_memory: i32_at(rec, k::DYNAMIC_SHARED),
        local_memory_per_thread: u32_at(rec, k::LOCAL_PER_THREAD),
        local_memory_total: u32_at(rec, k::LOCAL_TOTAL),
        grid_id: i64_at(rec, k::GRID_ID),
        // `cacheConfig.config.requested` is the low nibble (GCC bit-field order).
        cache_config: u8_at(rec, k::CACHE_CONFIG) & 0x0f,
        launch_type: u8_at(rec, k::LAUNCH_TYPE),
        shared_memory_executed: u32_at(rec, k::SHARED_EXECUTED),
        graph_node_id: u64_at(rec, k::GRAPH_NODE),
        shared_memory_limit_config: u32_at(rec, k::SHMEM_LIMIT),
    };
    Some(Decoded::Kernel {
        kernel,
        name_ptr: u64_at(rec, k::NAME),
    })
}

fn memcpy(rec: &[u8]) -> Option<Decoded> {
    use layout::memcpy as m;
    (rec.len() >= m::MIN_LEN).then(|| {
        Decoded::Memcpy(Memcpy {
            start: u64_at(rec, m::START),
            end: u64_at(rec, m::END),
            device: u32_at(rec, m::DEVICE),
            context: u32_at(rec, m::CONTEXT),
            stream: u32_at(rec, m::STREAM),
            correlation: u32_at(rec, m::CORRELATION),
            bytes: u64_at(rec, m::BYTES),
            copy_kind: u8_at(rec, m::COPY_KIND),
            src_kind: u8_at(rec, m::SRC_KIND),
            dst_kind: u8_at(rec, m::DST_KIND),
            graph_node_id: u64_at(rec, m::GRAPH_NODE),
        })
    })
}

fn memset(rec: &[u8]) -> Option<Decoded> {
    use layout::memset as m;
    (rec.len() >= m::MIN_LEN).then(|| {
        Decoded::Memset(Memset {
            start: u64_at(rec, m::START),
            end: u64_at(rec, m::END),
            device: u32_at(rec, m::DEVICE),
            context: u32_at(rec, m::CONTEXT),
            stream: u32_at(rec, m::STREAM),
            correlation: u32_at(rec, m::CORRELATION),
            bytes: u64_at(rec, m::BYTES),
            value: u32_at(rec, m::VALUE),
            memory_kind: u16_at(rec, m::MEMORY_KIND),
            graph_node_id: u64_at(rec, m::GRAPH_NODE),
        })
    })
}

fn api(rec: &[u8], which: Api) -> Option<Decoded> {
    use layout::api as a;
    (rec.len() >= a::MIN_LEN).then(|| {
        Decoded::Api(ApiCall {
            api: which,
            cbid: u32_at(rec, a::CBID),
            name: 0,
            start: u64_at(rec, a::START),
            end: u64_at(rec, a::END),
            pid: u32_at(rec, a::PROCESS),
            tid: u32_at(rec, a::THREAD),
            correlation: u32_at(rec, a::CORRELATION),
            return_value: u32_at(rec, a::RETURN_VALUE),
        })
    })
}

fn sync(rec: &[u8]) -> Option<Decoded> {
    use layout::sync as s;
    (rec.len() >= s::MIN_LEN).then(|| {
        Decoded::Sync(Sync {
            start: u64_at(rec, s::START),
            end: u64_at(rec, s::END),
            context: u32_at(rec, s::CONTEXT),
            stream: u32_at(rec, s::STREAM),
            correlation: u32_at(rec, s::CORRELATION),
            sync_type: u32_at(rec, s::TYPE),
            event: u32_at(rec, s::EVENT),
        })
    })
}

/// Builds records the way CUPTI lays them out, for tests (here and in the agent's).
#[allow(
    clippy::panic,
    reason = "a test helper: an unknown field name is a bug in the test"
)]
pub mod synth {
    use super::layout::{self, Field};

    /// A zeroed record of `len` bytes with its kind set.
    pub fn record(kind: u32, len: usize) -> Vec<u8> {
        let mut rec = vec![0u8; len];
        rec[..4].copy_from_slice(&kind.to_ne_bytes());
        rec
    }

    /// Writes `value` (its low `size` bytes) into the field named `name` of `fields`.
    pub fn set(rec: &mut [u8], fields: &[Field], name: &str, value: u64) {
        let (_, at, size) = fields
            .iter()
            .find(|f| f.0 == name)
            .copied()
            .unwrap_or_else(|| panic!("no field {name}"));
        rec[at..at + size].copy_from_slice(&value.to_ne_bytes()[..size]);
    }

    /// A kernel record (`CUpti_ActivityKernel10` size) with the given fields.
    pub fn kernel(values: &[(&str, u64)]) -> Vec<u8> {
        let mut rec = record(layout::kind::CONCURRENT_KERNEL, 216);
        for (name, v) in values {
            set(&mut rec, layout::kernel::FIELDS, name, *v);
        }
        rec
    }
}

#[cfg(test)]
mod tests;
