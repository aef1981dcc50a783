//! The C side of the injection: the entry points NVTX looks up (`InitializeInjectionNvtx2`,
//! `InitializeInjectionNvtxExtension`), the callbacks it writes into NVTX's function tables, the
//! clocks, and the control thread. Everything else is in safe modules; every callback decodes its
//! arguments and hands them to [`crate::recorder`]. No callback can unwind into C: each body runs
//! under `catch_unwind` and answers a neutral value on a panic.
//!
//! Protocol (nvtxDetail/nvtxInit.h, nvtxImpl.h, nvtxTypes.h): NVTX calls
//! `InitializeInjectionNvtx2(nvtxGetExportTable)`; export table 1 (`NVTX_ETID_CALLBACKS`) has
//! `GetModuleFunctionTable(module, &table, &size)`; `table[cbid]` points at the slot for callback
//! `cbid` of that module (CORE = 1, CORE2 = 5); slots left empty become no-ops.

#![allow(
    unsafe_code,
    reason = "the NVTX injection ABI: exported C entry points, raw pointers from the application"
)]

use std::{
    ffi::{c_char, c_int, c_void, CStr},
    os::unix::net::UnixStream,
    panic::{catch_unwind, AssertUnwindSafe},
    path::{Path, PathBuf},
    sync::{Arc, Mutex, OnceLock},
};

use crate::{
    control::{self, Handler},
    dump::Payload,
    recorder::{os_thread_name, Attrs, Recorder, ThreadLog},
    ENV_CONTROL, ENV_DUMP_DIR, ENV_RECORD_AT_START,
};

static RECORDER: OnceLock<Recorder> = OnceLock::new();

thread_local! {
    static LOG: std::cell::OnceCell<Arc<Mutex<ThreadLog>>> = const { std::cell::OnceCell::new() };
}

/// Runs `f`, or returns `default` if it panics.
pub(crate) fn guard<R>(default: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(default)
}

pub(crate) fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    if rc != 0 {
        return 0;
    }
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

pub(crate) fn now() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

fn utc_now() -> u64 {
    clock(libc::CLOCK_REALTIME)
}

fn gettid() -> u32 {
    // SAFETY: SYS_gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    u32::try_from(tid).unwrap_or(0)
}

/// Runs `f` with the recorder and this thread's log; `default` before init or during thread
/// teardown.
fn with_log<R>(default: R, f: impl FnOnce(&Recorder, &mut ThreadLog) -> R) -> R {
    let Some(recorder) = RECORDER.get() else {
        return default;
    };
    LOG.try_with(|cell| {
        let log = cell.get_or_init(|| recorder.register_thread(gettid()));
        let mut log = log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(recorder, &mut log)
    })
    .unwrap_or(default)
}

/// A C string, lossily decoded; `None` for null.
fn c_str(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: NVTX passes NUL-terminated strings that live for the duration of the call.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// A `wchar_t` (UTF-32 on Linux) string; `None` for null.
fn w_str(p: *const u32) -> Option<String> {
    if p.is_null() {
        return None;
    }
    let mut out = String::new();
    for i in 0..1_000_000 {
        // SAFETY: NUL-terminated wide string from the caller; we stop at the terminator.
        let c = unsafe { *p.add(i) };
        if c == 0 {
            break;
        }
        out.push(char::from_u32(c).unwrap_or(char::REPLACEMENT_CHARACTER));
    }
    Some(out)
}

/// `nvtxEventAttributes_v2`.
#[repr(C)]
struct EventAttributes {
    version: u16,
    size: u16,
    category: u32,
    color_type: i32,
    color: u32,
    payload_type: i32,
    reserved0: i32,
    payload: u64,
    message_type: i32,
    message: *const c_void,
}

fn text(message: *const c_char) -> Attrs {
    Attrs {
        text: c_str(message),
        ..Attrs::default()
    }
}

fn wtext(message: *const u32) -> Attrs {
    Attrs {
        text: w_str(message),
        ..Attrs::default()
    }
}

fn attrs(a: *const EventAttributes) -> Attrs {
    if a.is_null() {
        return Attrs::default();
    }
    // SAFETY: NVTX passes the caller's attribute struct, valid for the call.
    let a = unsafe { &*a };
    let low = (a.payload & 0xffff_ffff) as u32;
    let payload = match a.payload_type {
        1 => Some(Payload::U64(a.payload)),
        2 => Some(Payload::I64(a.payload as i64)),
        3 => Some(Payload::F64(f64::from_bits(a.payload))),
        4 => Some(Payload::U32(low)),
        5 => Some(Payload::I32(low as i32)),
        6 => Some(Payload::F32(f32::from_bits(low))),
        _ => None,
    };
    let (text, text_id) = match a.message_type {
        1 => (c_str(a.message.cast()), None),
        2 => (w_str(a.message.cast()), None),
        3 => (None, Some(a.message as u64)),
        _ => (None, None),
    };
    Attrs {
        category: a.category,
        color: (a.color_type == 1).then_some(a.color),
        text,
        text_id,
        payload,
    }
}

fn domain_id(d: *const c_void) -> u64 {
    d as u64
}

// ---- CORE (module 1) ----

extern "C" fn mark_ex(a: *const EventAttributes) {
    guard((), || with_log((), |r, l| r.mark(l, now(), 0, || attrs(a))));
}
extern "C" fn mark_a(m: *const c_char) {
    guard((), || with_log((), |r, l| r.mark(l, now(), 0, || text(m))));
}
extern "C" fn mark_w(m: *const u32) {
    guard((), || with_log((), |r, l| r.mark(l, now(), 0, || wtext(m))));
}
fn start_range(domain: u64, make: impl FnOnce() -> Attrs) -> u64 {
    guard(0, || {
        RECORDER
            .get()
            .map_or(0, |r| r.range_start(now(), gettid(), domain, make))
    })
}
extern "C" fn range_start_ex(a: *const EventAttributes) -> u64 {
    start_range(0, || attrs(a))
}
extern "C" fn range_start_a(m: *const c_char) -> u64 {
    start_range(0, || text(m))
}
extern "C" fn range_start_w(m: *const u32) -> u64 {
    start_range(0, || wtext(m))
}
extern "C" fn range_end(id: u64) {
    guard((), || {
        if let Some(r) = RECORDER.get() {
            r.range_end(now(), gettid(), id);
        }
    });
}
extern "C" fn push_ex(a: *const EventAttributes) -> c_int {
    guard(-1, || with_log(-1, |r, l| r.push(l, now(), 0, || attrs(a))))
}
extern "C" fn push_a(m: *const c_char) -> c_int {
    guard(-1, || with_log(-1, |r, l| r.push(l, now(), 0, || text(m))))
}
extern "C" fn push_w(m: *const u32) -> c_int {
    guard(-1, || with_log(-1, |r, l| r.push(l, now(), 0, || wtext(m))))
}
extern "C" fn pop() -> c_int {
    guard(-1, || with_log(-1, |r, l| r.pop(l, now(), 0)))
}
extern "C" fn name_category_a(category: u32, name: *const c_char) {
    domain_name_category_a(std::ptr::null(), category, name);
}
extern "C" fn name_category_w(category: u32, name: *const u32) {
    domain_name_category_w(std::ptr::null(), category, name);
}
extern "C" fn name_os_thread_a(tid: u32, name: *const c_char) {
    guard((), || {
        if let (Some(r), Some(name)) = (RECORDER.get(), c_str(name)) {
            r.name_thread(tid, name);
        }
    });
}
extern "C" fn name_os_thread_w(tid: u32, name: *const u32) {
    guard((), || {
        if let (Some(r), Some(name)) = (RECORDER.get(), w_str(name)) {
            r.name_thread(tid, name);
        }
    });
}

// ---- CORE2 (module 5): domains ----

extern "C" fn domain_mark_ex(d: *const c_void, a: *const EventAttributes) {
    guard((), || {
        with_log((), |r, l| r.mark(l, now(), domain_id(d), || attrs(a)));
    });
}
extern "C" fn domain_range_start_ex(d: *const c_void, a: *const EventAttributes) -> u64 {
    start_range(domain_id(d), || attrs(a))
}
extern "C" fn domain_range_end(_d: *const c_void, id: u64) {
    range_end(id);
}
extern "C" fn domain_push_ex(d: *const c_void, a: *const EventAttributes) -> c_int {
    guard(-1, || {
        with_log(-1, |r, l| r.push(l, now(), domain_id(d), || attrs(a)))
    })
}
extern "C" fn domain_pop(d: *const c_void) -> c_int {
    guard(-1, || with_log(-1, |r, l| r.pop(l, now(), domain_id(d))))
}
extern "C" fn domain_name_category_a(d: *const c_void, category: u32, name: *const c_char) {
    guard((), || {
        if let (Some(r), Some(name)) = (RECORDER.get(), c_str(name)) {
            r.name_category(now(), domain_id(d), category, name);
        }
    });
}
extern "C" fn domain_name_category_w(d: *const c_void, category: u32, name: *const u32) {
    guard((), || {
        if let (Some(r), Some(name)) = (RECORDER.get(), w_str(name)) {
            r.name_category(now(), domain_id(d), category, name);
        }
    });
}
extern "C" fn register_string_a(d: *const c_void, s: *const c_char) -> *const c_void {
    guard(std::ptr::null(), || match (RECORDER.get(), c_str(s)) {
        (Some(r), Some(s)) => r.register_string(domain_id(d), s) as *const c_void,
        _ => std::ptr::null(),
    })
}
extern "C" fn register_string_w(d: *const c_void, s: *const u32) -> *const c_void {
    guard(std::ptr::null(), || match (RECORDER.get(), w_str(s)) {
        (Some(r), Some(s)) => r.register_string(domain_id(d), s) as *const c_void,
        _ => std::ptr::null(),
    })
}
extern "C" fn domain_create_a(name: *const c_char) -> *const c_void {
    guard(std::ptr::null(), || {
        RECORDER.get().map_or(std::ptr::null(), |r| {
            r.domain_create(now(), c_str(name).unwrap_or_default()) as *const c_void
        })
    })
}
extern "C" fn domain_create_w(name: *const u32) -> *const c_void {
    guard(std::ptr::null(), || {
        RECORDER.get().map_or(std::ptr::null(), |r| {
            r.domain_create(now(), w_str(name).unwrap_or_default()) as *const c_void
        })
    })
}
extern "C" fn domain_destroy(_d: *const c_void) {}
extern "C" fn initialize(_reserved: *const c_void) {}

// ---- the export table ----

pub type GetExportTable = extern "C" fn(u32) -> *const c_void;
type GetModuleFunctionTable = extern "C" fn(u32, *mut *mut *mut *const c_void, *mut u32) -> c_int;

#[repr(C)]
struct ExportTableCallbacks {
    struct_size: usize,
    get_module_function_table: Option<GetModuleFunctionTable>,
}

#[repr(C)]
struct ExportTableVersionInfo {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set_injection_nvtx_version: Option<extern "C" fn(u32)>,
}

const MODULE_CORE: u32 = 1;
const MODULE_CORE2: u32 = 5;

fn core_slots() -> Vec<(usize, *const c_void)> {
    vec![
        (1, mark_ex as *const c_void),
        (2, mark_a as *const c_void),
        (3, mark_w as *const c_void),
        (4, range_start_ex as *const c_void),
        (5, range_start_a as *const c_void),
        (6, range_start_w as *const c_void),
        (7, range_end as *const c_void),
        (8, push_ex as *const c_void),
        (9, push_a as *const c_void),
        (10, push_w as *const c_void),
        (11, pop as *const c_void),
        (12, name_category_a as *const c_void),
        (13, name_category_w as *const c_void),
        (14, name_os_thread_a as *const c_void),
        (15, name_os_thread_w as *const c_void),
    ]
}

fn core2_slots() -> Vec<(usize, *const c_void)> {
    vec![
        (1, domain_mark_ex as *const c_void),
        (2, domain_range_start_ex as *const c_void),
        (3, domain_range_end as *const c_void),
        (4, domain_push_ex as *const c_void),
        (5, domain_pop as *const c_void),
        (8, domain_name_category_a as *const c_void),
        (9, domain_name_category_w as *const c_void),
        (10, register_string_a as *const c_void),
        (11, register_string_w as *const c_void),
        (12, domain_create_a as *const c_void),
        (13, domain_create_w as *const c_void),
        (14, domain_destroy as *const c_void),
        (15, initialize as *const c_void),
    ]
}

/// Writes our callbacks into one module's table; false if NVTX does not know the module.
fn fill(get: GetModuleFunctionTable, module: u32, slots: &[(usize, *const c_void)]) -> bool {
    let mut table: *mut *mut *const c_void = std::ptr::null_mut();
    let mut size: u32 = 0;
    if get(module, &mut table, &mut size) == 0 || table.is_null() {
        return false;
    }
    for &(cbid, f) in slots {
        if cbid >= size as usize {
            continue;
        }
        // SAFETY: `table` has `size` entries (NVTX's contract); each is null or points at
        // the function-pointer slot for that callback id, which we may overwrite.
        unsafe {
            let slot = *table.add(cbid);
            if !slot.is_null() {
                *slot = f;
            }
        }
    }
    true
}

/// The NVTX entry point: attach to this NVTX instance. Returns 1 on success.
#[no_mangle]
pub extern "C" fn InitializeInjectionNvtx2(get_export_table: Option<GetExportTable>) -> c_int {
    guard(0, || {
        let Some(get_export_table) = get_export_table else {
            return 0;
        };
        let callbacks = get_export_table(1).cast::<ExportTableCallbacks>();
        if callbacks.is_null() {
            return 0;
        }
        // SAFETY: export table 1 is NVTX's NvtxExportTableCallbacks, alive for the process.
        let Some(get) = (unsafe { &*callbacks }).get_module_function_table else {
            return 0;
        };
        init_recorder();
        let ok = fill(get, MODULE_CORE, &core_slots()) && fill(get, MODULE_CORE2, &core2_slots());
        let version = get_export_table(3).cast::<ExportTableVersionInfo>();
        if !version.is_null() {
            // SAFETY: export table 3 is NVTX's NvtxExportTableVersionInfo.
            if let Some(set) = (unsafe { &*version }).set_injection_nvtx_version {
                set(3);
            }
        }
        c_int::from(ok)
    })
}

#[repr(C)]
pub struct ExtModuleSegment {
    segment_id: usize,
    slot_count: usize,
    function_slots: *mut isize,
}

#[repr(C)]
pub struct ExtModuleInfo {
    nvtx_ver: u16,
    struct_size: u16,
    module_id: u16,
    compat_id: u16,
    segments_count: usize,
    segments: *mut ExtModuleSegment,
}

const EXT_PAYLOAD_MODULE: u16 = 2;
const EXT_CBID_DOMAIN_IS_ENABLED: usize = 7;

extern "C" fn domain_is_enabled(_d: *const c_void) -> u8 {
    1
}

/// The NVTX extension entry point: we only answer `nvtxDomainIsEnabled` (always enabled), which
/// the Python `nvtx` package asks before it records anything.
#[no_mangle]
pub extern "C" fn InitializeInjectionNvtxExtension(info: *mut ExtModuleInfo) -> c_int {
    guard(0, || {
        if info.is_null() {
            return 0;
        }
        // SAFETY: NVTX passes its module info, valid for the call.
        let info = unsafe { &*info };
        if info.module_id == EXT_PAYLOAD_MODULE
            && info.segments_count > 0
            && !info.segments.is_null()
        {
            // SAFETY: `segments` has `segments_count` entries; slot arrays have `slot_count`.
            unsafe {
                let segment = &*info.segments;
                if segment.slot_count > EXT_CBID_DOMAIN_IS_ENABLED
                    && !segment.function_slots.is_null()
                {
                    *segment.function_slots.add(EXT_CBID_DOMAIN_IS_ENABLED) =
                        domain_is_enabled as *const () as isize;
                }
            }
        }
        1
    })
}

// ---- recorder setup, control thread, exit dump ----

fn process_name() -> String {
    std::fs::read_to_string("/proc/self/comm")
        .map(|s| s.trim_end().to_owned())
        .unwrap_or_else(|_| "unknown".into())
}

pub(crate) fn init_recorder() {
    let mut fresh = false;
    let recorder = RECORDER.get_or_init(|| {
        fresh = true;
        Recorder::new(std::process::id(), process_name())
    });
    if !fresh {
        return;
    }
    let control = std::env::var_os(ENV_CONTROL).map(PathBuf::from);
    let at_start = std::env::var(ENV_RECORD_AT_START).is_ok_and(|v| v == "1");
    if control.is_none() || at_start {
        recorder.start(now(), utc_now());
    }
    // SAFETY: registering a plain extern "C" function with no arguments.
    unsafe {
        libc::atexit(dump_at_exit);
    }
    if let Some(socket) = control {
        let _ = std::thread::Builder::new()
            .name("nsight-nvtx".into())
            .spawn(move || control_thread(&socket));
    }
}

/// Whether a collection window is open.
pub(crate) fn is_recording() -> bool {
    RECORDER.get().is_some_and(Recorder::is_recording)
}

/// Closes the window: GPU records first (CUPTI flushed), then the NVTX events and the dump.
fn stop_and_dump(r: &Recorder) -> crate::dump::Dump {
    crate::cupti::ffi::before_stop(false);
    let mut dump = r.stop(now(), os_thread_name);
    dump.cuda = crate::cupti::ffi::take(dump.window.start_ns, dump.window.end_ns);
    dump
}

struct Control;

impl Handler for Control {
    fn start(&self) {
        if let Some(r) = RECORDER.get() {
            r.start(now(), utc_now());
            crate::cupti::ffi::on_start();
        }
    }

    fn stop(&self, path: &Path) -> Result<(), String> {
        let r = RECORDER.get().ok_or("the recorder is not initialised")?;
        stop_and_dump(r)
            .write(path)
            .map_err(|e| format!("writing {}: {e}", path.display()))
    }
}

fn control_thread(socket: &Path) {
    let _ = guard(Ok(()), || {
        let stream = UnixStream::connect(socket)?;
        let mut writer = stream.try_clone()?;
        control::serve(
            stream,
            &mut writer,
            std::process::id(),
            &process_name(),
            &Control,
        )
    });
}

extern "C" fn dump_at_exit() {
    guard((), || {
        let Some(r) = RECORDER.get() else { return };
        if !r.is_recording() {
            return;
        }
        let dir = std::env::var_os(ENV_DUMP_DIR)
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let path = dir.join(crate::exit_dump_name(r.pid()));
        if let Err(e) = stop_and_dump(r).write(&path) {
            eprintln!(
                "nsight-nvtx: cannot write the NVTX dump {}: {e}",
                path.display()
            );
        }
    });
}
