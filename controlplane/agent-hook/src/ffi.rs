//! The C shell of the hook: the six interposed functions, argument conversion, and calls to
//! the real functions through `dlsym(RTLD_NEXT, ..)`; and a constructor that wraps the process
//! the hook is loaded into when that process itself matches (a container's entrypoint is
//! started by the runtime, not by an exec the hook sees). Any failure (a null argument, a bad
//! string, a panic, an agent that cannot be executed) falls back to the original call with the
//! original arguments. A program whose new environment has `NSIGHT_AGENT_ACTIVE` is checked
//! without allocating (safe after `fork` in a threaded program).

#![allow(
    unsafe_code,
    reason = "LD_PRELOAD interposition: exported C functions, dlsym, raw argv/envp pointers"
)]

use std::{
    ffi::{c_char, c_int, c_void, CStr, CString},
    panic::{catch_unwind, AssertUnwindSafe},
};

use crate::matching::{self, ExecRequest, HookConfig};

extern "C" {
    static environ: *const *const c_char;
}

type ExecveFn =
    unsafe extern "C" fn(*const c_char, *const *const c_char, *const *const c_char) -> c_int;
type ExecvFn = unsafe extern "C" fn(*const c_char, *const *const c_char) -> c_int;
type SpawnFn = unsafe extern "C" fn(
    *mut libc::pid_t,
    *const c_char,
    *const c_void,
    *const c_void,
    *const *const c_char,
    *const *const c_char,
) -> c_int;

/// The next definition of `name` (libc's), or `None`.
fn next(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name; the result is checked for null.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    (!f.is_null()).then_some(f)
}

/// Whether a NULL-terminated `envp` has `NSIGHT_AGENT_ACTIVE=` (no allocation).
fn env_has_marker(envp: *const *const c_char) -> bool {
    if envp.is_null() {
        return false;
    }
    let marker = matching::ENV_AGENT_ACTIVE.as_bytes();
    let mut i = 0;
    loop {
        // SAFETY: envp is a NULL-terminated array of C strings (exec's contract).
        let entry = unsafe { *envp.add(i) };
        if entry.is_null() {
            return false;
        }
        // SAFETY: each entry is NUL-terminated.
        let bytes = unsafe { CStr::from_ptr(entry) }.to_bytes();
        if bytes.len() > marker.len() && bytes.starts_with(marker) && bytes[marker.len()] == b'=' {
            return true;
        }
        i += 1;
    }
}

fn strings(list: *const *const c_char) -> Option<Vec<String>> {
    if list.is_null() {
        return None;
    }
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        // SAFETY: NULL-terminated array of C strings.
        let entry = unsafe { *list.add(i) };
        if entry.is_null() {
            return Some(out);
        }
        // SAFETY: NUL-terminated string.
        out.push(unsafe { CStr::from_ptr(entry) }.to_str().ok()?.to_owned());
        i += 1;
    }
}

fn env_value(envp: *const *const c_char, name: &str) -> Option<String> {
    strings(envp)?
        .into_iter()
        .find_map(|e| e.strip_prefix(name)?.strip_prefix('=').map(str::to_owned))
}

fn current_environ() -> *const *const c_char {
    // SAFETY: reading libc's `environ` pointer.
    unsafe { environ }
}

/// The agent argv for this exec, if it is to be wrapped. `search` resolves names via PATH.
fn wrapped(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    search: bool,
) -> Option<Vec<CString>> {
    if path.is_null() || env_has_marker(envp) {
        return None;
    }
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: path is a NUL-terminated string (exec's contract), checked non-null above.
        let file = unsafe { CStr::from_ptr(path) }.to_str().ok()?.to_owned();
        let own = current_environ();
        let path = if search {
            matching::resolve(
                &file,
                env_value(envp, "PATH")
                    .or_else(|| env_value(own, "PATH"))
                    .as_deref(),
            )
        } else {
            file
        };
        let config = HookConfig {
            include: env_value(own, matching::ENV_INCLUDE).unwrap_or_default(),
            exclude: env_value(own, matching::ENV_EXCLUDE).unwrap_or_default(),
            agent_bin: env_value(own, matching::ENV_AGENT_BIN),
        };
        let request = ExecRequest {
            path,
            argv: strings(argv)?,
            agent_active: false,
        };
        let new = matching::decide(&config, &request)?;
        new.into_iter()
            .map(|a| CString::new(a).ok())
            .collect::<Option<Vec<_>>>()
    }))
    .ok()
    .flatten()
}

fn pointers(args: &[CString]) -> Vec<*const c_char> {
    args.iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect()
}

/// execve(agent, new argv, envp), then (if it returned) the original call.
fn exec_or(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    search: bool,
    original: impl FnOnce() -> c_int,
) -> c_int {
    if let (Some(new), Some(real)) = (wrapped(path, argv, envp, search), next(c"execve")) {
        let ptrs = pointers(&new);
        // SAFETY: `real` is libc's execve; ptrs is NULL-terminated and outlives the call.
        let real: ExecveFn = unsafe { std::mem::transmute(real) };
        // SAFETY: valid path, argv and envp (the caller's).
        unsafe { real(ptrs[0], ptrs.as_ptr(), envp) };
    }
    original()
}

/// Runs when the hook is loaded, before `main`: a matching process that is not the agent's own
/// target (no `NSIGHT_AGENT_ACTIVE`) and not the agent re-executes itself under the agent, with
/// the same arguments and environment. Anything unexpected leaves the process as it is.
extern "C" fn wrap_self() {
    let own = current_environ();
    if env_has_marker(own) {
        return;
    }
    let new = catch_unwind(AssertUnwindSafe(|| {
        let exe = std::fs::read_link("/proc/self/exe").ok()?;
        let argv = matching::cmdline_argv(&std::fs::read("/proc/self/cmdline").ok()?)?;
        let config = HookConfig {
            include: env_value(own, matching::ENV_INCLUDE).unwrap_or_default(),
            exclude: env_value(own, matching::ENV_EXCLUDE).unwrap_or_default(),
            agent_bin: env_value(own, matching::ENV_AGENT_BIN),
        };
        let request = ExecRequest {
            path: exe.to_str()?.to_owned(),
            argv,
            agent_active: false,
        };
        matching::decide(&config, &request)?
            .into_iter()
            .map(|a| CString::new(a).ok())
            .collect::<Option<Vec<_>>>()
    }))
    .ok()
    .flatten();
    if let (Some(new), Some(real)) = (new, next(c"execve")) {
        let ptrs = pointers(&new);
        // SAFETY: `real` is libc's execve; ptrs is NULL-terminated and outlives the call; on
        // failure it returns and the process carries on unprofiled.
        let real: ExecveFn = unsafe { std::mem::transmute(real) };
        // SAFETY: valid path and argv; `own` is this process's environment.
        unsafe { real(ptrs[0], ptrs.as_ptr(), own) };
    }
}

/// Registers [`wrap_self`] as an ELF constructor of the library.
#[used]
#[link_section = ".init_array"]
static WRAP_SELF: extern "C" fn() = wrap_self;

/// # Safety
/// The caller's exec arguments, as for libc's `execve`.
#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    exec_or(path, argv, envp, false, || match next(c"execve") {
        // SAFETY: libc's execve with the caller's arguments.
        Some(f) => unsafe { std::mem::transmute::<*mut c_void, ExecveFn>(f)(path, argv, envp) },
        None => -1,
    })
}

/// # Safety
/// As for libc's `execv`.
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    exec_or(path, argv, current_environ(), false, || {
        match next(c"execv") {
            // SAFETY: libc's execv with the caller's arguments.
            Some(f) => unsafe { std::mem::transmute::<*mut c_void, ExecvFn>(f)(path, argv) },
            None => -1,
        }
    })
}

/// # Safety
/// As for libc's `execvp`.
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    exec_or(file, argv, current_environ(), true, || {
        match next(c"execvp") {
            // SAFETY: libc's execvp with the caller's arguments.
            Some(f) => unsafe { std::mem::transmute::<*mut c_void, ExecvFn>(f)(file, argv) },
            None => -1,
        }
    })
}

/// # Safety
/// As for libc's `execvpe`.
#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    exec_or(file, argv, envp, true, || match next(c"execvpe") {
        // SAFETY: libc's execvpe with the caller's arguments.
        Some(f) => unsafe { std::mem::transmute::<*mut c_void, ExecveFn>(f)(file, argv, envp) },
        None => -1,
    })
}

#[allow(
    clippy::too_many_arguments,
    reason = "posix_spawn's six arguments plus the variant"
)]
fn spawn(
    name: &CStr,
    search: bool,
    pid: *mut libc::pid_t,
    path: *const c_char,
    actions: *const c_void,
    attr: *const c_void,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    let Some(real) = next(name) else {
        return libc::ENOSYS;
    };
    // SAFETY: `real` is libc's posix_spawn or posix_spawnp (same signature).
    let real: SpawnFn = unsafe { std::mem::transmute(real) };
    if let Some(new) = wrapped(path, argv, envp, search) {
        let ptrs = pointers(&new);
        // SAFETY: the caller's pid, actions, attr and envp; our NULL-terminated argv.
        let rc = unsafe { real(pid, ptrs[0], actions, attr, ptrs.as_ptr(), envp) };
        if rc == 0 {
            return 0;
        }
    }
    // SAFETY: the original call with the caller's arguments.
    unsafe { real(pid, path, actions, attr, argv, envp) }
}

/// # Safety
/// As for libc's `posix_spawn`.
#[no_mangle]
pub unsafe extern "C" fn posix_spawn(
    pid: *mut libc::pid_t,
    path: *const c_char,
    actions: *const c_void,
    attr: *const c_void,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    spawn(c"posix_spawn", false, pid, path, actions, attr, argv, envp)
}

/// # Safety
/// As for libc's `posix_spawnp`.
#[no_mangle]
pub unsafe extern "C" fn posix_spawnp(
    pid: *mut libc::pid_t,
    file: *const c_char,
    actions: *const c_void,
    attr: *const c_void,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    spawn(c"posix_spawnp", true, pid, file, actions, attr, argv, envp)
}
