//! The GPU part of a report: a dump's CUPTI activity written as nsys writes it in its SQLite
//! export, so that every recipe reading kernels, copies, sets and CUDA API calls runs on a
//! report the agent made without nsys. Column sets follow nsys 2025/2026 exports (testdata).
//!
//! ```text
//!  CudaActivity ─> CUPTI_ACTIVITY_KIND_KERNEL (demangled, short and mangled names in StringIds)
//!               ─> CUPTI_ACTIVITY_KIND_MEMCPY / MEMSET   (CUPTI's memory kinds -> nsys's)
//!               ─> CUPTI_ACTIVITY_KIND_RUNTIME           (runtime: eventClass 0, driver: 1)
//!               ─> CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, TARGET_INFO_GPU, ENUM_* tables
//! ```

use std::collections::HashMap;

use nsight_nvtx::cuda::{Api, CudaActivity};
use rusqlite::{params, Transaction};

use super::{global_tid, i64_of};

const SCHEMA: &str = "
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL,
    mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER,
    registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY INTEGER NOT NULL,
    gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
    blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL,
    dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL,
    localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER,
    graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER
);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL,
    deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER,
    srcContextId INTEGER, dstDeviceId INTEGER, dstContextId INTEGER, migrationCause INTEGER,
    graphNodeId INTEGER, virtualAddress INTEGER
);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER,
    memKind INTEGER
);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
    globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL,
    returnValue INTEGER NOT NULL, callchainId INTEGER
);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (
    start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, syncType INTEGER NOT NULL, eventId INTEGER NOT NULL
);
CREATE TABLE TARGET_INFO_GPU (
    vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT,
    isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER,
    clockRate INTEGER, smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER,
    chipName TEXT, cuDevice INTEGER, computeMajor INTEGER, computeMinor INTEGER
);
CREATE TABLE ENUM_NSYS_EVENT_CLASS (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_KRENEL_LAUNCH_TYPE (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_FUNC_CACHE_CONFIG (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
CREATE TABLE ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
";

/// One enum row: (id, name, label).
type EnumRow = (i64, &'static str, &'static str);

/// nsys's enum tables for the GPU rows, as its exports carry them.
const ENUMS: &[(&str, &[EnumRow])] = &[
    (
        "ENUM_NSYS_EVENT_CLASS",
        &[
            (0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
            (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"),
        ],
    ),
    (
        "ENUM_CUDA_MEMCPY_OPER",
        &[
            (0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"),
            (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
            (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
            (3, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"),
            (4, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host"),
            (5, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array"),
            (6, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device"),
            (7, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array"),
            (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"),
            (9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"),
            (10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"),
            (11, "CUDA_MEMCPY_KIND_UVM_HTOD", "Unified Host-to-Device"),
            (12, "CUDA_MEMCPY_KIND_UVM_DTOH", "Unified Device-to-Host"),
            (13, "CUDA_MEMCPY_KIND_UVM_DTOD", "Unified Device-to-Device"),
        ],
    ),
    (
        "ENUM_CUDA_MEM_KIND",
        &[
            (0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
            (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
            (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"),
            (3, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array"),
            (4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"),
            (5, "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC", "Device Static"),
            (
                6,
                "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC",
                "Managed Static",
            ),
            (7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"),
        ],
    ),
    (
        "ENUM_CUPTI_SYNC_TYPE",
        &[
            (0, "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN", "Unknown"),
            (
                1,
                "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE",
                "Event sync",
            ),
            (
                2,
                "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT",
                "Stream wait sync",
            ),
            (
                3,
                "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE",
                "Stream sync",
            ),
            (
                4,
                "CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE",
                "Context sync",
            ),
        ],
    ),
    (
        "ENUM_CUDA_KRENEL_LAUNCH_TYPE",
        &[
            (0, "CUDA_KERNEL_LAUNCH_TYPE_UNKNOWN", "Unknown"),
            (1, "CUDA_KERNEL_LAUNCH_TYPE_REGULAR", "Regular"),
            (
                2,
                "CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE",
                "Coop Single Device",
            ),
            (
                3,
                "CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_MULTI_DEVICE",
                "Coop Multi Device",
            ),
        ],
    ),
    (
        "ENUM_CUDA_FUNC_CACHE_CONFIG",
        &[
            (0, "CU_FUNC_CACHE_PREFER_NONE", "None"),
            (1, "CU_FUNC_CACHE_PREFER_SHARED", "Shared"),
            (2, "CU_FUNC_CACHE_PREFER_L1", "L1"),
            (3, "CU_FUNC_CACHE_PREFER_EQUAL", "Equal"),
        ],
    ),
    (
        "ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG",
        &[
            (0, "CUDA_SHARED_MEM_LIMIT_DEFAULT", "Default"),
            (1, "CUDA_SHARED_MEM_LIMIT_OPTIN", "Opt in"),
        ],
    ),
];

/// CUPTI's `CUpti_ActivityMemoryKind` (0 unknown, 1 pageable, ...) in nsys's
/// `ENUM_CUDA_MEM_KIND` numbering (0 pageable, ..., 7 unknown).
pub fn nsys_memory_kind(cupti: u16) -> i64 {
    match cupti {
        1..=7 => i64::from(cupti) - 1,
        _ => 7,
    }
}

/// A kernel's names as nsys's export carries them: (demangled, short, mangled). A name that is
/// not an Itanium C++ mangled name (an `extern "C"` kernel) is all three.
pub fn kernel_names(mangled: &str) -> (String, String, String) {
    let Ok(symbol) = cpp_demangle::Symbol::new(mangled) else {
        return (mangled.to_owned(), mangled.to_owned(), mangled.to_owned());
    };
    let full = symbol.demangle().unwrap_or_else(|_| mangled.to_owned());
    let bare = symbol
        .demangle_with_options(
            &cpp_demangle::DemangleOptions::new()
                .no_params()
                .no_return_type(),
        )
        .unwrap_or_else(|_| full.clone());
    (full, short_name(&bare), mangled.to_owned())
}

/// `ns::kernel<T, 4>` -> `kernel`: the last scope's name without its template arguments.
fn short_name(qualified: &str) -> String {
    let mut name = qualified.trim();
    // Drop a trailing template argument list (balanced from the end).
    if name.ends_with('>') {
        let mut depth = 0usize;
        for (i, c) in name.char_indices().rev() {
            match c {
                '>' => depth += 1,
                '<' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        name = name[..i].trim_end();
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    // The last `::` outside any template argument list.
    let mut depth = 0usize;
    let mut cut = 0;
    let bytes = name.as_bytes();
    for i in 0..bytes.len() {
        match bytes[i] {
            b'<' | b'(' => depth += 1,
            b'>' | b')' => depth = depth.saturating_sub(1),
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => cut = i + 2,
            _ => {}
        }
    }
    name[cut..].to_owned()
}

/// Adds strings to `StringIds`, each once.
struct Strings<'a> {
    tx: &'a Transaction<'a>,
    next: &'a mut i64,
    ids: HashMap<String, i64>,
}

impl Strings<'_> {
    fn id(&mut self, value: &str) -> rusqlite::Result<i64> {
        if let Some(&id) = self.ids.get(value) {
            return Ok(id);
        }
        let id = *self.next;
        self.tx.execute(
            "INSERT INTO StringIds (id, value) VALUES (?1, ?2)",
            params![id, value],
        )?;
        *self.next += 1;
        self.ids.insert(value.to_owned(), id);
        Ok(id)
    }
}

/// Creates the GPU tables and fills them from `cuda`; new strings get ids from `next_string`.
pub fn write(
    tx: &Transaction<'_>,
    pid: u32,
    cuda: &CudaActivity,
    next_string: &mut i64,
) -> rusqlite::Result<()> {
    tx.execute_batch(SCHEMA)?;
    for (table, rows) in ENUMS {
        let mut insert = tx.prepare(&format!(
            "INSERT INTO {table} (id, name, label) VALUES (?1, ?2, ?3)"
        ))?;
        for (id, name, label) in *rows {
            insert.execute(params![id, name, label])?;
        }
    }
    let global_pid = global_tid(pid, 0);
    let mut strings = Strings {
        tx,
        next: next_string,
        ids: HashMap::new(),
    };
    // Kernel names: (demangled, short, mangled) ids per interned name.
    let mut kernel_ids: HashMap<u32, (i64, i64, i64)> = HashMap::new();
    for k in &cuda.kernels {
        if let std::collections::hash_map::Entry::Vacant(e) = kernel_ids.entry(k.name) {
            let (full, short, mangled) = kernel_names(cuda.name(k.name));
            e.insert((
                strings.id(&full)?,
                strings.id(&short)?,
                strings.id(&mangled)?,
            ));
        }
    }
    let mut api_ids: HashMap<u32, i64> = HashMap::new();
    for c in &cuda.api_calls {
        if let std::collections::hash_map::Entry::Vacant(e) = api_ids.entry(c.name) {
            e.insert(strings.id(cuda.name(c.name))?);
        }
    }
    // Devices by context, for synchronisations (CUPTI's record has no device).
    let device_of: HashMap<u32, u32> = cuda
        .kernels
        .iter()
        .map(|k| (k.context, k.device))
        .chain(cuda.memcpys.iter().map(|m| (m.context, m.device)))
        .collect();
    {
        let mut insert = tx.prepare(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, \
             correlationId, globalPid, demangledName, shortName, mangledName, launchType, \
             cacheConfig, registersPerThread, gridX, gridY, gridZ, blockX, blockY, blockZ, \
             staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, \
             gridId, sharedMemoryExecuted, graphNodeId, sharedMemoryLimitConfig) VALUES \
             (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, \
             ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27)",
        )?;
        for k in &cuda.kernels {
            let (full, short, mangled) = kernel_ids[&k.name];
            insert.execute(params![
                i64_of(k.start),
                i64_of(k.end),
                k.device,
                k.context,
                k.stream,
                k.correlation,
                global_pid,
                full,
                short,
                mangled,
                k.launch_type,
                k.cache_config,
                k.registers_per_thread,
                k.grid[0],
                k.grid[1],
                k.grid[2],
                k.block[0],
                k.block[1],
                k.block[2],
                k.static_shared_memory,
                k.dynamic_shared_memory,
                k.local_memory_per_thread,
                k.local_memory_total,
                k.grid_id,
                k.shared_memory_executed,
                (k.graph_node_id != 0).then(|| i64_of(k.graph_node_id)),
                k.shared_memory_limit_config,
            ])?;
        }
    }
    {
        let mut insert = tx.prepare(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, contextId, streamId, \
             correlationId, globalPid, bytes, copyKind, srcKind, dstKind, graphNodeId) VALUES \
             (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        )?;
        for m in &cuda.memcpys {
            insert.execute(params![
                i64_of(m.start),
                i64_of(m.end),
                m.device,
                m.context,
                m.stream,
                m.correlation,
                global_pid,
                i64_of(m.bytes),
                m.copy_kind,
                nsys_memory_kind(u16::from(m.src_kind)),
                nsys_memory_kind(u16::from(m.dst_kind)),
                (m.graph_node_id != 0).then(|| i64_of(m.graph_node_id)),
            ])?;
        }
    }
    {
        let mut insert = tx.prepare(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, contextId, streamId, \
             correlationId, globalPid, value, bytes, graphNodeId, memKind) VALUES \
             (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )?;
        for m in &cuda.memsets {
            insert.execute(params![
                i64_of(m.start),
                i64_of(m.end),
                m.device,
                m.context,
                m.stream,
                m.correlation,
                global_pid,
                m.value,
                i64_of(m.bytes),
                (m.graph_node_id != 0).then(|| i64_of(m.graph_node_id)),
                nsys_memory_kind(m.memory_kind),
            ])?;
        }
    }
    {
        let mut insert = tx.prepare(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, eventClass, globalTid, \
             correlationId, nameId, returnValue) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?;
        for c in &cuda.api_calls {
            let class = match c.api {
                Api::Runtime => 0,
                Api::Driver => 1,
            };
            insert.execute(params![
                i64_of(c.start),
                i64_of(c.end),
                class,
                global_tid(pid, c.tid),
                c.correlation,
                api_ids[&c.name],
                c.return_value,
            ])?;
        }
    }
    {
        let mut insert = tx.prepare(
            "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start, end, deviceId, contextId, \
             streamId, correlationId, globalPid, syncType, eventId) VALUES \
             (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        for s in &cuda.syncs {
            insert.execute(params![
                i64_of(s.start),
                i64_of(s.end),
                device_of.get(&s.context).copied().unwrap_or(0),
                s.context,
                s.stream,
                s.correlation,
                global_pid,
                s.sync_type,
                s.event,
            ])?;
        }
    }
    {
        let mut insert = tx.prepare(
            "INSERT INTO TARGET_INFO_GPU (vmId, id, name, busLocation, isDiscrete, l2CacheSize, \
             totalMemory, clockRate, smCount, uuid, cuDevice, computeMajor, computeMinor) VALUES \
             (0, ?1, ?2, ?3, 1, ?4, ?5, ?6, ?7, ?8, ?1, ?9, ?10)",
        )?;
        for d in &cuda.devices {
            insert.execute(params![
                d.id,
                d.name,
                d.bus_location,
                d.l2_cache_size,
                i64_of(d.total_memory),
                i64::from(d.clock_rate_khz) * 1000,
                d.sm_count,
                d.uuid,
                d.compute_major,
                d.compute_minor,
            ])?;
        }
    }
    Ok(())
}
