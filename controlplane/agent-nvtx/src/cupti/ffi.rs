//! The C side of the CUPTI capture: the CUDA injection entry point (`InitializeInjection`),
//! loading libcupti with `dlopen`, the buffer callbacks, enabling and flushing activity, and the
//! devices from the CUDA driver. Every callback runs under `crate::ffi::guard`
//! (`catch_unwind`); nothing here blocks the program beyond CUPTI's own calls. The clocks and the
//! guard are the NVTX side's.

#![allow(
    unsafe_code,
    reason = "the CUDA injection ABI and CUPTI's C API, loaded at run time"
)]

use std::{
    ffi::{c_char, c_int, c_void, CStr, CString},
    sync::{Mutex, OnceLock, PoisonError},
};

use super::{collector::Collector, decode};
use crate::cuda::{Api, CudaActivity, Device};
use crate::ffi::{clock, guard, now};

type CuptiResult = c_int;
type BufferRequested = extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type BufferCompleted = extern "C" fn(*mut c_void, u32, *mut u8, usize, usize);
type TimestampFn = extern "C" fn() -> u64;

const SUCCESS: CuptiResult = 0;
const FLUSH_FORCED: u32 = 1;
const DOMAIN_DRIVER: u32 = 1;
const DOMAIN_RUNTIME: u32 = 2;

/// The activity kinds recorded (`CUpti_ActivityKind`); SYNCHRONIZATION may be refused by an
/// old CUPTI, which is fine. DRIVER only with `NSIGHT_CUPTI_DRIVER_API=1`: CUPTI reports every
/// driver call, also those the runtime makes for each of its own calls (on an H200, 2 s of a
/// PyTorch loop gave 919,688 API rows against nsys's 257,620), which filled the record cap and
/// cost kernel rows.
const KINDS: &[u32] = &[
    super::layout::kind::CONCURRENT_KERNEL,
    super::layout::kind::MEMCPY,
    super::layout::kind::MEMSET,
    super::layout::kind::RUNTIME,
    super::layout::kind::SYNCHRONIZATION,
];

/// `CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM`: API records carry the OS thread id (`gettid`), as the
/// NVTX events do, instead of `pthread_self`.
const THREAD_ID_SYSTEM: u32 = 1;

fn kinds() -> Vec<u32> {
    let mut kinds = KINDS.to_vec();
    if std::env::var(super::ENV_DRIVER_API).is_ok_and(|v| v == "1") {
        kinds.push(super::layout::kind::DRIVER);
    }
    kinds
}

/// One CUPTI buffer: 8 MiB, 8-byte aligned, as CUPTI's samples use.
const BUFFER_WORDS: usize = 1 << 20;
const BUFFER_BYTES: usize = BUFFER_WORDS * 8;
/// Free buffers kept for reuse.
const POOL: usize = 8;

/// The CUPTI functions this library calls.
struct Cupti {
    path: String,
    version: u32,
    enable: extern "C" fn(u32) -> CuptiResult,
    disable: extern "C" fn(u32) -> CuptiResult,
    flush_all: extern "C" fn(u32) -> CuptiResult,
    next_record: extern "C" fn(*mut u8, usize, *mut *mut u8) -> CuptiResult,
    dropped: extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult,
    callback_name: Option<extern "C" fn(u32, u32, *mut *const c_char) -> CuptiResult>,
}

struct State {
    /// libcupti, or why it could not be used.
    cupti: Result<Cupti, String>,
    /// Added to every CUPTI timestamp to put it on `CLOCK_MONOTONIC` (0 when CUPTI calls our
    /// clock).
    shift: i64,
    enabled: Mutex<bool>,
    collector: Collector,
    pool: Mutex<Vec<usize>>,
}

static STATE: OnceLock<State> = OnceLock::new();
/// Set once the process is exiting and CUPTI was flushed for the last time: CUPTI may tear
/// itself down right after, so nothing calls into it again.
static EXITED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The devices, read from the driver once CUDA is up (not at exit, when it may be gone).
static DEVICES: OnceLock<Vec<Device>> = OnceLock::new();

fn dl_error() -> String {
    // SAFETY: dlerror returns null or a C string valid until the next dl call on this thread.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "unknown error".into()
    } else {
        // SAFETY: non-null, NUL-terminated (dlerror's contract).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn open(name: &str, flags: c_int) -> Result<*mut c_void, String> {
    let c = CString::new(name).map_err(|_| format!("bad library name {name:?}"))?;
    // SAFETY: a valid C string; dlopen has no other precondition.
    let h = unsafe { libc::dlopen(c.as_ptr(), flags) };
    if h.is_null() {
        Err(dl_error())
    } else {
        Ok(h)
    }
}

fn symbol(handle: *mut c_void, name: &str) -> Option<*mut c_void> {
    let c = CString::new(name).ok()?;
    // SAFETY: `handle` came from dlopen; `c` is a valid C string.
    let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
    (!p.is_null()).then_some(p)
}

macro_rules! required {
    ($handle:expr, $name:literal, $ty:ty) => {
        match symbol($handle, $name) {
            // SAFETY: the symbol is CUPTI's function of this C signature (cupti_activity.h).
            Some(p) => unsafe { std::mem::transmute::<*mut c_void, $ty>(p) },
            None => return Err(format!("{} has no {}", "libcupti", $name)),
        }
    };
}

fn load() -> Result<(Cupti, *mut c_void), String> {
    let explicit = std::env::var(super::ENV_LIB).ok().filter(|s| !s.is_empty());
    let names = match &explicit {
        Some(p) => vec![p.clone()],
        None => super::candidates(std::env::var("CUDA_HOME").ok().as_deref()),
    };
    let mut errors = Vec::new();
    // A CUPTI the process already loaded (PyTorch links its own) comes first: two copies of
    // CUPTI in one process would both drive the same driver interfaces.
    let mut found = ["libcupti.so.13", "libcupti.so.12", "libcupti.so"]
        .iter()
        .find_map(|name| {
            open(name, libc::RTLD_NOW | libc::RTLD_NOLOAD)
                .ok()
                .map(|h| (format!("{name} (already loaded)"), h))
        });
    if found.is_none() {
        for name in &names {
            match open(name, libc::RTLD_NOW | libc::RTLD_LOCAL) {
                Ok(h) => {
                    found = Some((name.clone(), h));
                    break;
                }
                Err(e) => errors.push(e),
            }
        }
    }
    let Some((path, h)) = found else {
        return Err(match explicit {
            Some(p) => format!(
                "cannot load CUPTI from {p} ({}): point NSIGHT_CUPTI_LIB at libcupti.so",
                errors.join("; ")
            ),
            None => "no CUPTI found (libcupti.so on the loader's path, $CUDA_HOME or \
                     /usr/local/cuda): install the CUDA toolkit's CUPTI or give its path with \
                     NSIGHT_CUPTI_LIB"
                .to_owned(),
        });
    };
    let get_version = required!(h, "cuptiGetVersion", extern "C" fn(*mut u32) -> CuptiResult);
    let mut version = 0u32;
    let _ = get_version(&mut version);
    let cupti = Cupti {
        path,
        version,
        enable: required!(h, "cuptiActivityEnable", extern "C" fn(u32) -> CuptiResult),
        disable: required!(h, "cuptiActivityDisable", extern "C" fn(u32) -> CuptiResult),
        flush_all: required!(
            h,
            "cuptiActivityFlushAll",
            extern "C" fn(u32) -> CuptiResult
        ),
        next_record: required!(
            h,
            "cuptiActivityGetNextRecord",
            extern "C" fn(*mut u8, usize, *mut *mut u8) -> CuptiResult
        ),
        dropped: required!(
            h,
            "cuptiActivityGetNumDroppedRecords",
            extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult
        ),
        callback_name: symbol(h, "cuptiGetCallbackName").map(|p| {
            // SAFETY: cuptiGetCallbackName(CUpti_CallbackDomain, uint32_t, const char **).
            unsafe {
                std::mem::transmute::<
                    *mut c_void,
                    extern "C" fn(u32, u32, *mut *const c_char) -> CuptiResult,
                >(p)
            }
        }),
    };
    Ok((cupti, h))
}

extern "C" fn timestamp() -> u64 {
    now()
}

/// The memory cap in bytes.
fn cap() -> usize {
    std::env::var(super::ENV_MAX_MIB)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .map_or(super::collector::DEFAULT_CAP_BYTES, |mib| mib << 20)
}

/// Loads CUPTI and registers the callbacks, once. Called by the CUDA driver's injection.
fn init() -> &'static State {
    STATE.get_or_init(|| {
        let mut shift = 0i64;
        let cupti = load().and_then(|(cupti, h)| {
            // CUPTI's clock is CLOCK_REALTIME on Linux; ours (and NVTX's) is CLOCK_MONOTONIC.
            let ours = symbol(h, "cuptiActivityRegisterTimestampCallback").is_some_and(|p| {
                // SAFETY: cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc).
                let register = unsafe {
                    std::mem::transmute::<*mut c_void, extern "C" fn(TimestampFn) -> CuptiResult>(p)
                };
                register(timestamp) == SUCCESS
            });
            if !ours {
                let real = i64::try_from(clock(libc::CLOCK_REALTIME)).unwrap_or(0);
                let mono = i64::try_from(now()).unwrap_or(0);
                shift = mono - real;
            }
            if let Some(p) = symbol(h, "cuptiSetThreadIdType") {
                // SAFETY: cuptiSetThreadIdType(CUpti_ActivityThreadIdType).
                let set = unsafe {
                    std::mem::transmute::<*mut c_void, extern "C" fn(u32) -> CuptiResult>(p)
                };
                let _ = set(THREAD_ID_SYSTEM);
            }
            let register = required!(
                h,
                "cuptiActivityRegisterCallbacks",
                extern "C" fn(BufferRequested, BufferCompleted) -> CuptiResult
            );
            let rc = register(buffer_requested, buffer_completed);
            if rc == SUCCESS {
                Ok(cupti)
            } else {
                Err(format!(
                    "CUPTI refused the activity callbacks (CUptiResult {rc}): another tool may \
                     be profiling this process"
                ))
            }
        });
        State {
            cupti,
            shift,
            enabled: Mutex::new(false),
            collector: Collector::new(cap()),
            pool: Mutex::new(Vec::new()),
        }
    })
}

extern "C" fn buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    guard((), || {
        let reused = STATE
            .get()
            .and_then(|s| s.pool.lock().unwrap_or_else(PoisonError::into_inner).pop());
        let ptr = match reused {
            Some(p) => p as *mut u8,
            None => {
                let words = vec![0u64; BUFFER_WORDS].into_boxed_slice();
                Box::into_raw(words).cast::<u8>()
            }
        };
        // SAFETY: CUPTI passes valid out-pointers.
        unsafe {
            *buffer = ptr;
            *size = BUFFER_BYTES;
            *max_records = 0;
        }
    });
}

fn release(buffer: *mut u8) {
    let Some(state) = STATE.get() else { return };
    let mut pool = state.pool.lock().unwrap_or_else(PoisonError::into_inner);
    if pool.len() < POOL {
        pool.push(buffer as usize);
    } else {
        // SAFETY: every buffer was made by `buffer_requested` from a boxed [u64; BUFFER_WORDS].
        drop(unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                buffer.cast::<u64>(),
                BUFFER_WORDS,
            ))
        });
    }
}

extern "C" fn buffer_completed(
    context: *mut c_void,
    stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    guard((), || {
        if buffer.is_null() {
            return;
        }
        if let Some(state) = STATE.get() {
            if let Ok(cupti) = &state.cupti {
                drain(state, cupti, buffer, valid);
                let mut dropped = 0usize;
                if (cupti.dropped)(context, stream, &mut dropped) == SUCCESS && dropped > 0 {
                    state.collector.note_dropped(dropped as u64);
                }
            }
        }
        release(buffer);
    });
}

fn drain(state: &State, cupti: &Cupti, buffer: *mut u8, valid: usize) {
    let mut record: *mut u8 = std::ptr::null_mut();
    while (cupti.next_record)(buffer, valid, &mut record) == SUCCESS && !record.is_null() {
        let offset = (record as usize).saturating_sub(buffer as usize);
        if offset >= valid {
            break;
        }
        // SAFETY: CUPTI's record lies inside the buffer's first `valid` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(record, valid - offset) };
        let Some(mut decoded) = decode::decode(bytes) else {
            continue;
        };
        if !decoded.complete() {
            continue;
        }
        decoded.shift(state.shift);
        state
            .collector
            .add(decoded, kernel_name, |api, cbid| api_name(cupti, api, cbid));
    }
}

fn kernel_name(ptr: u64) -> String {
    if ptr == 0 {
        return "<unnamed kernel>".into();
    }
    // SAFETY: a kernel record's `name` is a NUL-terminated string owned by CUPTI, alive while
    // the buffer is being processed.
    unsafe { CStr::from_ptr(ptr as usize as *const c_char) }
        .to_string_lossy()
        .into_owned()
}

fn api_name(cupti: &Cupti, api: Api, cbid: u32) -> String {
    let domain = match api {
        Api::Runtime => DOMAIN_RUNTIME,
        Api::Driver => DOMAIN_DRIVER,
    };
    let mut name: *const c_char = std::ptr::null();
    if let Some(get) = cupti.callback_name {
        if get(domain, cbid, &mut name) == SUCCESS && !name.is_null() {
            // SAFETY: CUPTI returns a static NUL-terminated name.
            return unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned();
        }
    }
    format!("{api:?}Api#{cbid}")
}

fn set_enabled(state: &State, on: bool) {
    let Ok(cupti) = &state.cupti else { return };
    let mut enabled = state.enabled.lock().unwrap_or_else(PoisonError::into_inner);
    if *enabled == on {
        return;
    }
    for k in kinds() {
        let _ = if on {
            (cupti.enable)(k)
        } else {
            (cupti.disable)(k)
        };
    }
    *enabled = on;
}

// ---- what the NVTX side calls ----

/// `InitializeInjection`: called by the CUDA driver in `cuInit` when `CUDA_INJECTION64_PATH`
/// names this library. Returns 1 (success) even when CUPTI is missing: the program must run.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> c_int {
    guard(1, || {
        crate::ffi::init_recorder();
        let state = init();
        if let Err(why) = &state.cupti {
            eprintln!("nsight-cupti: GPU activity is not recorded: {why}");
        }
        if state.cupti.is_ok() {
            // Registered after CUPTI loaded, so it runs before CUPTI's own exit handlers
            // (atexit runs in reverse order): the last flush reaches a live CUPTI.
            // SAFETY: registering a plain extern "C" function with no arguments.
            unsafe {
                libc::atexit(flush_at_exit);
            }
        }
        if crate::ffi::is_recording() {
            set_enabled(state, true);
        }
        1
    })
}

/// The last flush, at exit, while CUPTI is still alive; the dump written after it (by the NVTX
/// side's exit handler) only reads what was collected.
extern "C" fn flush_at_exit() {
    guard((), || {
        if crate::ffi::is_recording() {
            cache_devices();
            before_stop(false);
        }
        EXITED.store(true, std::sync::atomic::Ordering::SeqCst);
    });
}

fn cache_devices() {
    if DEVICES.get().is_none() {
        let found = devices();
        if !found.is_empty() {
            let _ = DEVICES.set(found);
        }
    }
}

/// A window opened: record GPU activity.
pub(crate) fn on_start() {
    if let Some(state) = STATE.get() {
        cache_devices();
        set_enabled(state, true);
    }
}

/// A window is closing: stop recording and have CUPTI hand over every buffer.
pub(crate) fn before_stop(keep_recording: bool) {
    if EXITED.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let Some(state) = STATE.get() else { return };
    let Ok(cupti) = &state.cupti else { return };
    cache_devices();
    if !keep_recording {
        set_enabled(state, false);
    }
    let _ = (cupti.flush_all)(FLUSH_FORCED);
}

/// The window's GPU activity, or `None` when CUDA never initialised with this library.
pub(crate) fn take(start_ns: u64, end_ns: u64) -> Option<CudaActivity> {
    let state = STATE.get()?;
    let mut activity = state.collector.take(start_ns, end_ns);
    match &state.cupti {
        Ok(cupti) => {
            activity.cupti = format!("{} (CUPTI API {})", cupti.path, cupti.version);
            activity.devices = DEVICES.get().cloned().unwrap_or_default();
        }
        Err(why) => activity.unavailable = Some(why.clone()),
    }
    Some(activity)
}

// ---- devices, from the CUDA driver already loaded in the process ----

const ATTR_CLOCK_RATE: c_int = 13;
const ATTR_SM_COUNT: c_int = 16;
const ATTR_PCI_BUS: c_int = 33;
const ATTR_PCI_DEVICE: c_int = 34;
const ATTR_L2: c_int = 38;
const ATTR_PCI_DOMAIN: c_int = 50;
const ATTR_CC_MAJOR: c_int = 75;
const ATTR_CC_MINOR: c_int = 76;

fn devices() -> Vec<Device> {
    guard(Vec::new(), || {
        let Ok(h) = open("libcuda.so.1", libc::RTLD_NOW | libc::RTLD_NOLOAD) else {
            return Vec::new();
        };
        let (Some(count), Some(get), Some(attr)) = (
            symbol(h, "cuDeviceGetCount"),
            symbol(h, "cuDeviceGet"),
            symbol(h, "cuDeviceGetAttribute"),
        ) else {
            return Vec::new();
        };
        // SAFETY: the CUDA driver's functions of these C signatures (cuda.h).
        let (count, get, attr) = unsafe {
            (
                std::mem::transmute::<*mut c_void, extern "C" fn(*mut c_int) -> c_int>(count),
                std::mem::transmute::<*mut c_void, extern "C" fn(*mut c_int, c_int) -> c_int>(get),
                std::mem::transmute::<*mut c_void, extern "C" fn(*mut c_int, c_int, c_int) -> c_int>(
                    attr,
                ),
            )
        };
        let name_fn =
            symbol(h, "cuDeviceGetName").map(|p| {
                // SAFETY: cuDeviceGetName(char *, int, CUdevice).
                unsafe {
                    std::mem::transmute::<
                        *mut c_void,
                        extern "C" fn(*mut c_char, c_int, c_int) -> c_int,
                    >(p)
                }
            });
        let mem_fn = symbol(h, "cuDeviceTotalMem_v2").map(|p| {
            // SAFETY: cuDeviceTotalMem_v2(size_t *, CUdevice).
            unsafe {
                std::mem::transmute::<*mut c_void, extern "C" fn(*mut usize, c_int) -> c_int>(p)
            }
        });
        let uuid_fn =
            symbol(h, "cuDeviceGetUuid_v2")
                .or_else(|| symbol(h, "cuDeviceGetUuid"))
                .map(|p| {
                    // SAFETY: cuDeviceGetUuid(CUuuid *, CUdevice); CUuuid is 16 bytes.
                    unsafe {
                        std::mem::transmute::<
                            *mut c_void,
                            extern "C" fn(*mut [u8; 16], c_int) -> c_int,
                        >(p)
                    }
                });
        let mut n: c_int = 0;
        if count(&mut n) != 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        for ordinal in 0..n {
            let mut dev: c_int = 0;
            if get(&mut dev, ordinal) != 0 {
                continue;
            }
            let a = |which: c_int| {
                let mut v: c_int = 0;
                if attr(&mut v, which, dev) == 0 {
                    u32::try_from(v).unwrap_or(0)
                } else {
                    0
                }
            };
            let mut name = [0 as c_char; 256];
            let name = match name_fn {
                Some(f) if f(name.as_mut_ptr(), 256, dev) == 0 => {
                    // SAFETY: the driver wrote a NUL-terminated name into the buffer.
                    unsafe { CStr::from_ptr(name.as_ptr()) }
                        .to_string_lossy()
                        .into_owned()
                }
                _ => String::new(),
            };
            let mut total = 0usize;
            if let Some(f) = mem_fn {
                let _ = f(&mut total, dev);
            }
            let mut uuid = [0u8; 16];
            let uuid = match uuid_fn {
                Some(f) if f(&mut uuid, dev) == 0 => format_uuid(&uuid),
                _ => String::new(),
            };
            out.push(Device {
                id: u32::try_from(ordinal).unwrap_or(0),
                name,
                uuid,
                total_memory: total as u64,
                sm_count: a(ATTR_SM_COUNT),
                compute_major: a(ATTR_CC_MAJOR),
                compute_minor: a(ATTR_CC_MINOR),
                clock_rate_khz: a(ATTR_CLOCK_RATE),
                l2_cache_size: a(ATTR_L2),
                bus_location: format!(
                    "{:04x}:{:02x}:{:02x}.0",
                    a(ATTR_PCI_DOMAIN),
                    a(ATTR_PCI_BUS),
                    a(ATTR_PCI_DEVICE)
                ),
            });
        }
        out
    })
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as nsys's `TARGET_INFO_GPU.uuid` has it (nvidia-smi
/// adds a `GPU-` prefix).
pub fn format_uuid(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
