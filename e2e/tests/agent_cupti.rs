//! The CUPTI side of the injection library without a GPU (CI): the record layouts it reads
//! agree with CUPTI's own headers, and the library loads the real libcupti (PyPI
//! `nvidia-cuda-cupti`, CUDA 13.0) in a process with no CUDA driver, stays inert, and says why
//! no GPU activity was recorded. The GPU path is checked by `cargo xtask gpu-check` on a GPU.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

use std::{path::Path, process::Command};

use nsight_e2e::{
    agent::{cuda13_dir, files_with_ext, query},
    bin, TempDir,
};
use nsight_nvtx::{cupti::layout, dump::Dump};

/// Enough of CUDA's `crt/host_defines.h` (shipped with nvcc, not in the runtime wheel) for
/// host-only C that includes the CUPTI headers.
const HOST_DEFINES_SHIM: &str = "
#define __host__
#define __device__
#define __cudart_builtin__
#define __device_builtin__
#define __device_builtin_texture_type__
#define __device_builtin_surface_type__
#define CUDARTAPI
#define CUDARTAPI_CDECL
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(a) __align__(a)
#define __CUDA_ALIGN__(n) __attribute__((aligned(n)))
#define __inline__ inline
#define __forceinline__ inline
#define __specialization_static
#define __no_return__ __attribute__((noreturn))
#define __annotate__(a)
#define __location__(a)
#define CUDA_CB
#define __dv(v)
";

#[test]
fn cupti_record_layouts_agree_with_the_headers() {
    let dir = TempDir::new("cupti-layout");
    std::fs::create_dir_all(dir.path().join("shim/crt")).unwrap();
    std::fs::write(
        dir.path().join("shim/crt/host_defines.h"),
        HOST_DEFINES_SHIM,
    )
    .unwrap();
    let mut c = String::from("#include <stddef.h>\n#include <cupti_activity.h>\n");
    let mut checked = 0;
    for (cstruct, fields) in layout::ALL {
        for (field, offset, size) in *fields {
            c.push_str(&format!(
                "_Static_assert(offsetof({cstruct}, {field}) == {offset}, \"{cstruct}.{field} is not at {offset}\");\n\
                 _Static_assert(sizeof((({cstruct} *)0)->{field}) == {size}, \"{cstruct}.{field} is not {size} bytes\");\n"
            ));
            checked += 1;
        }
    }
    for (name, value) in [
        ("MEMCPY", layout::kind::MEMCPY),
        ("MEMSET", layout::kind::MEMSET),
        ("KERNEL", layout::kind::KERNEL),
        ("DRIVER", layout::kind::DRIVER),
        ("RUNTIME", layout::kind::RUNTIME),
        ("CONCURRENT_KERNEL", layout::kind::CONCURRENT_KERNEL),
        ("SYNCHRONIZATION", layout::kind::SYNCHRONIZATION),
    ] {
        c.push_str(&format!(
            "_Static_assert(CUPTI_ACTIVITY_KIND_{name} == {value}, \"kind {name}\");\n"
        ));
    }
    let src = dir.path().join("layout.c");
    std::fs::write(&src, c).unwrap();
    let include = cuda13_dir().join("include");
    let out = Command::new("gcc")
        .args(["-fsyntax-only", "-std=c11"])
        .arg("-I")
        .arg(&include)
        .arg("-I")
        .arg(dir.path().join("shim"))
        .arg(&src)
        .output()
        .expect("gcc runs");
    assert!(
        out.status.success(),
        "the layouts differ from {}:\n{}",
        include.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(checked >= 50, "{checked} fields checked");
}

/// A program that initialises the injection as the CUDA driver would (`InitializeInjection`)
/// and exits with 3.
fn fake_driver(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("driver.c");
    std::fs::write(
        &src,
        r#"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 10; }
    int (*init)(void) = (int (*)(void))dlsym(lib, "InitializeInjection");
    if (!init) { fprintf(stderr, "no InitializeInjection\n"); return 11; }
    printf("InitializeInjection returned %d\n", init());
    return 3;
}
"#,
    )
    .unwrap();
    let exe = dir.join("driver");
    let status = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-ldl")
        .status()
        .expect("gcc runs");
    assert!(status.success());
    exe
}

fn run_injected(dir: &Path, cupti_lib: &Path) -> (std::process::Output, Dump) {
    let dumps = dir.join("dumps");
    let _ = std::fs::remove_dir_all(&dumps);
    std::fs::create_dir_all(&dumps).unwrap();
    let out = Command::new(fake_driver(dir))
        .arg(bin("libnsight_nvtx.so"))
        .env("NSIGHT_CUPTI_LIB", cupti_lib)
        .env("NSIGHT_NVTX_RECORD_AT_START", "1")
        .env("NSIGHT_NVTX_DUMP_DIR", &dumps)
        .env_remove("NSIGHT_NVTX_CONTROL")
        .output()
        .unwrap();
    let dump = files_with_ext(&dumps, "json")
        .first()
        .map(|p| Dump::read(p).unwrap())
        .unwrap_or_else(|| panic!("no exit dump; {out:?}"));
    (out, dump)
}

#[test]
fn without_a_gpu_the_library_loads_cupti_stays_inert_and_says_why() {
    let dir = TempDir::new("cupti-inert");
    let cupti = cuda13_dir().join("lib/libcupti.so.13");
    let (out, dump) = run_injected(dir.path(), &cupti);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The program ran to its own end: initialisation succeeded and nothing crashed.
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("InitializeInjection returned 1"),
        "{stdout}"
    );
    let cuda = dump.cuda.expect("the dump has a CUDA section");
    assert!(cuda.is_empty(), "no GPU, no records: {cuda:?}");
    // Either CUPTI loaded (and simply saw no GPU), or it said why it could not be used.
    match &cuda.unavailable {
        None => assert!(cuda.cupti.contains("libcupti.so.13"), "{cuda:?}"),
        Some(why) => assert!(
            stderr.contains("GPU activity is not recorded") && why.contains("CUPTI"),
            "{why} / {stderr}"
        ),
    }
}

#[test]
fn a_missing_cupti_is_reported_and_the_program_still_runs() {
    let dir = TempDir::new("cupti-missing");
    let (out, dump) = run_injected(dir.path(), Path::new("/nonexistent/libcupti.so"));
    assert_eq!(out.status.code(), Some(3));
    let why = dump.cuda.and_then(|c| c.unavailable).unwrap_or_default();
    assert!(
        why.contains("cannot load CUPTI from /nonexistent/libcupti.so")
            && why.contains("NSIGHT_CUPTI_LIB"),
        "{why}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("GPU activity is not recorded"));
}

#[test]
fn the_agent_with_the_cupti_backend_keeps_the_exit_code_and_notes_it_in_the_report() {
    let dir = TempDir::new("cupti-agent");
    let store = dir.path().join("store");
    let driver = fake_driver(dir.path());
    let out = Command::new(bin("nsight-agent"))
        .args([
            "run",
            "--mode",
            "launch",
            "--backend",
            "nvtx+cupti",
            "--storage-dir",
        ])
        .arg(&store)
        .arg("--cupti-lib")
        .arg("/nonexistent/libcupti.so")
        .arg("--")
        .arg(&driver)
        .arg(bin("libnsight_nvtx.so"))
        .env("NSIGHT_AGENT_LOG", "info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("no CUPTI found"),
        "preflight says so: {stderr}"
    );
    let reports = files_with_ext(&store, "sqlite");
    assert_eq!(reports.len(), 1, "{stderr}");
    let meta = query(
        &reports[0],
        "SELECT name, value FROM META_DATA_EXPORT WHERE name LIKE 'NSIGHT_CUPTI%' OR name = 'EXPORT_PRODUCT_NAME' ORDER BY name",
    );
    let text = format!("{meta:?}");
    assert!(
        text.contains("nvtx+cupti backend") && text.contains("cannot load CUPTI from /nonexistent"),
        "{text}"
    );
}
