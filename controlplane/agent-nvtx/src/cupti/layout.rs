//! Where the fields this library reads sit in CUPTI's activity records (x86-64 / aarch64,
//! `PACKED_ALIGNMENT`: packed, 8-byte aligned), from the CUDA 13.0 headers
//! (`cupti_activity.h`, CUPTI API 130001). Each record version only ever appends fields, so the
//! prefix read here is the same in `CUpti_ActivityKernel4..10`, `Memcpy5..6` and `Memset3..4`.
//!
//! The table [`ALL`] names each field as the header does; `tests/cupti_layout.rs` compiles a C
//! file of `offsetof` assertions from it against the real headers where they are installed
//! (`cargo xtask setup cuda-headers`).

/// One field: its name in the C struct, its offset and its size in bytes.
pub type Field = (&'static str, usize, usize);

macro_rules! record {
    ($(#[$doc:meta])* $module:ident = $cstruct:literal { $($konst:ident = $cfield:literal @ $offset:literal : $size:literal),* $(,)? }) => {
        $(#[$doc])*
        pub mod $module {
            /// The C struct these offsets come from.
            pub const STRUCT: &str = $cstruct;
            $(pub const $konst: usize = $offset;)*
            /// Every field read, as (C name, offset, size).
            pub const FIELDS: &[super::Field] = &[$(($cfield, $offset, $size)),*];
            /// The bytes a record must have for every field above to be read.
            pub const MIN_LEN: usize = {
                let mut end = 0;
                let mut i = 0;
                while i < FIELDS.len() {
                    let e = FIELDS[i].1 + FIELDS[i].2;
                    if e > end {
                        end = e;
                    }
                    i += 1;
                }
                end
            };
        }
    };
}

/// `CUpti_ActivityKind` values.
pub mod kind {
    pub const MEMCPY: u32 = 1;
    pub const MEMSET: u32 = 2;
    pub const KERNEL: u32 = 3;
    pub const DRIVER: u32 = 4;
    pub const RUNTIME: u32 = 5;
    pub const CONCURRENT_KERNEL: u32 = 10;
    pub const SYNCHRONIZATION: u32 = 38;
}

/// Every record kind is a `CUpti_ActivityKind` (u32) at offset 0.
pub const KIND: usize = 0;

record! {
    /// `CUPTI_ACTIVITY_KIND_KERNEL` / `CONCURRENT_KERNEL`.
    kernel = "CUpti_ActivityKernel10" {
        CACHE_CONFIG = "cacheConfig" @ 4 : 1,
        REGISTERS = "registersPerThread" @ 6 : 2,
        START = "start" @ 16 : 8,
        END = "end" @ 24 : 8,
        DEVICE = "deviceId" @ 40 : 4,
        CONTEXT = "contextId" @ 44 : 4,
        STREAM = "streamId" @ 48 : 4,
        GRID_X = "gridX" @ 52 : 4,
        GRID_Y = "gridY" @ 56 : 4,
        GRID_Z = "gridZ" @ 60 : 4,
        BLOCK_X = "blockX" @ 64 : 4,
        BLOCK_Y = "blockY" @ 68 : 4,
        BLOCK_Z = "blockZ" @ 72 : 4,
        STATIC_SHARED = "staticSharedMemory" @ 76 : 4,
        DYNAMIC_SHARED = "dynamicSharedMemory" @ 80 : 4,
        LOCAL_PER_THREAD = "localMemoryPerThread" @ 84 : 4,
        LOCAL_TOTAL = "localMemoryTotal" @ 88 : 4,
        CORRELATION = "correlationId" @ 92 : 4,
        GRID_ID = "gridId" @ 96 : 8,
        NAME = "name" @ 104 : 8,
        LAUNCH_TYPE = "launchType" @ 136 : 1,
        SHARED_EXECUTED = "sharedMemoryExecuted" @ 140 : 4,
        GRAPH_NODE = "graphNodeId" @ 144 : 8,
        SHMEM_LIMIT = "shmemLimitConfig" @ 152 : 4,
    }
}

record! {
    /// `CUPTI_ACTIVITY_KIND_MEMCPY`.
    memcpy = "CUpti_ActivityMemcpy6" {
        COPY_KIND = "copyKind" @ 4 : 1,
        SRC_KIND = "srcKind" @ 5 : 1,
        DST_KIND = "dstKind" @ 6 : 1,
        BYTES = "bytes" @ 8 : 8,
        START = "start" @ 16 : 8,
        END = "end" @ 24 : 8,
        DEVICE = "deviceId" @ 32 : 4,
        CONTEXT = "contextId" @ 36 : 4,
        STREAM = "streamId" @ 40 : 4,
        CORRELATION = "correlationId" @ 44 : 4,
        GRAPH_NODE = "graphNodeId" @ 64 : 8,
    }
}

record! {
    /// `CUPTI_ACTIVITY_KIND_MEMSET`.
    memset = "CUpti_ActivityMemset4" {
        VALUE = "value" @ 4 : 4,
        BYTES = "bytes" @ 8 : 8,
        START = "start" @ 16 : 8,
        END = "end" @ 24 : 8,
        DEVICE = "deviceId" @ 32 : 4,
        CONTEXT = "contextId" @ 36 : 4,
        STREAM = "streamId" @ 40 : 4,
        CORRELATION = "correlationId" @ 44 : 4,
        MEMORY_KIND = "memoryKind" @ 50 : 2,
        GRAPH_NODE = "graphNodeId" @ 64 : 8,
    }
}

record! {
    /// `CUPTI_ACTIVITY_KIND_RUNTIME` / `DRIVER`.
    api = "CUpti_ActivityAPI" {
        CBID = "cbid" @ 4 : 4,
        START = "start" @ 8 : 8,
        END = "end" @ 16 : 8,
        PROCESS = "processId" @ 24 : 4,
        THREAD = "threadId" @ 28 : 4,
        CORRELATION = "correlationId" @ 32 : 4,
        RETURN_VALUE = "returnValue" @ 36 : 4,
    }
}

record! {
    /// `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION`.
    sync = "CUpti_ActivitySynchronization2" {
        TYPE = "type" @ 4 : 4,
        START = "start" @ 8 : 8,
        END = "end" @ 16 : 8,
        CORRELATION = "correlationId" @ 24 : 4,
        CONTEXT = "contextId" @ 28 : 4,
        STREAM = "streamId" @ 32 : 4,
        EVENT = "cudaEventId" @ 36 : 4,
    }
}

/// Every record layout: (C struct, fields).
pub const ALL: &[(&str, &[Field])] = &[
    (kernel::STRUCT, kernel::FIELDS),
    (memcpy::STRUCT, memcpy::FIELDS),
    (memset::STRUCT, memset::FIELDS),
    (api::STRUCT, api::FIELDS),
    (sync::STRUCT, sync::FIELDS),
];
