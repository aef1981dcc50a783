//! The real agent and its real clients for end-to-end tests: `nsight-agent run` in either mode
//! with a local report directory, NVTX programs compiled with gcc against the NVTX v3 headers,
//! the Python `nvtx` package from the setup venv, and reports read with the sqlite3 CLI; and a
//! MOCK nsys script for the nsys run path's tests (no nsys exists on these machines).

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use crate::{bin, required_path};

/// The setup cache (`NSIGHT_CACHE_DIR`, printed by `cargo xtask env`).
pub fn cache_dir() -> PathBuf {
    required_path("NSIGHT_CACHE_DIR", "cargo xtask setup")
}

/// The venv's Python, which has the PyPI `nvtx` package.
pub fn python() -> PathBuf {
    let p = cache_dir().join("venv/bin/python");
    assert!(
        p.exists(),
        "{} missing: run `cargo xtask setup`",
        p.display()
    );
    p
}

/// The NVTX v3 include directory shipped in the venv (`nvidia/nvtx/include`).
pub fn nvtx_include() -> PathBuf {
    let lib = cache_dir().join("venv/lib");
    let entries = std::fs::read_dir(&lib).expect("read the venv's lib dir");
    entries
        .filter_map(Result::ok)
        .map(|e| e.path().join("site-packages/nvidia/nvtx/include"))
        .find(|p| p.join("nvtx3/nvToolsExt.h").exists())
        .unwrap_or_else(|| {
            panic!(
                "no nvtx3 headers under {}: run `cargo xtask setup`",
                lib.display()
            )
        })
}

/// The CUDA 13 headers and libraries the setup venv carries (PyPI `nvidia-cuda-cupti` and
/// `nvidia-cuda-runtime`: `nvidia/cu13/{include,lib}`): CUPTI's headers, `cuda.h`, libcupti.
pub fn cuda13_dir() -> PathBuf {
    let lib = cache_dir().join("venv/lib");
    let entries = std::fs::read_dir(&lib).expect("read the venv's lib dir");
    entries
        .filter_map(Result::ok)
        .map(|e| e.path().join("site-packages/nvidia/cu13"))
        .find(|p| p.join("include/cupti_activity.h").exists())
        .unwrap_or_else(|| {
            panic!(
                "no CUPTI headers (nvidia/cu13/include) under {}: run `cargo xtask setup python`",
                lib.display()
            )
        })
}

/// A C program that makes every kind of NVTX call the capture records: nested push/pop
/// ranges, a named worker thread, a mark, a domain with a category and a registered string,
/// colour and payload, and a start/end range across threads. Exits with 3.
pub const NVTX_C_PROGRAM: &str = r#"
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
static void* worker(void* arg) {
    (void)arg;
    nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "c-worker");
    nvtxRangePushA("worker");
    usleep(30000);
    nvtxRangePop();
    return 0;
}
int main(void) {
    nvtxRangePushA("outer");
    for (int i = 0; i < 3; i++) {
        nvtxRangePushA("inner");
        usleep(20000);
        nvtxRangePop();
    }
    nvtxMarkA("checkpoint");
    nvtxDomainHandle_t d = nvtxDomainCreateA("cdomain");
    nvtxDomainNameCategoryA(d, 7, "io");
    nvtxEventAttributes_t a = {0};
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.category = 7;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = 0xFF00FF00;
    a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
    a.payload.llValue = 42;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = nvtxDomainRegisterStringA(d, "registered-step");
    nvtxDomainRangePushEx(d, &a);
    usleep(10000);
    nvtxDomainRangePop(d);
    nvtxRangeId_t id = nvtxRangeStartA("async");
    pthread_t t;
    pthread_create(&t, 0, worker, 0);
    pthread_join(t, 0);
    nvtxRangeEnd(id);
    nvtxRangePop();
    return 3;
}
"#;

/// Compiles one C file against the NVTX headers (`gcc -O2 ... -ldl`) into `out`.
pub fn gcc_nvtx(source: &str, out: &Path) {
    let src = out.with_extension("c");
    std::fs::write(&src, source).expect("write the C source");
    let status = Command::new("gcc")
        .args(["-O2", "-o"])
        .arg(out)
        .arg(&src)
        .arg("-I")
        .arg(nvtx_include())
        .arg("-ldl")
        .arg("-lpthread")
        .status()
        .expect("gcc runs (apt-get install gcc)");
    assert!(status.success(), "gcc failed on {}", src.display());
}

/// `nsight-agent run --mode launch --storage-dir <store> [extra] -- argv`, to completion.
pub fn run_launch(store: &Path, extra: &[&str], argv: &[&str]) -> Output {
    let mut cmd = Command::new(bin("nsight-agent"));
    cmd.args(["run", "--mode", "launch", "--storage-dir"])
        .arg(store)
        .args(extra)
        .arg("--")
        .args(argv)
        .env("NSIGHT_AGENT_LOG", "info");
    let out = cmd.output().expect("nsight-agent runs");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every file under `dir` with extension `ext`, sorted.
pub fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.filter_map(Result::ok) {
            let p = e.path();
            if p.is_dir() {
                walk(&p, ext, out);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, ext, &mut out);
    out.sort();
    out
}

/// Runs `sql` on `db` with the sqlite3 CLI (read-only) and returns the rows as JSON objects.
pub fn query(db: &Path, sql: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let out = Command::new("sqlite3")
        .arg("-readonly")
        .arg("-json")
        .arg(db)
        .arg(sql)
        .output()
        .expect("sqlite3 runs (apt-get install sqlite3)");
    assert!(
        out.status.success(),
        "sqlite3 {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() {
        return Vec::new();
    }
    serde_json::from_str(&text).expect("sqlite3 -json output")
}

/// The NVTX range summary as the nvtx_sum recipe computes it (text from StringIds else `text`,
/// prefixed by the domain's name): `(name, instances, total ns)` sorted by name.
pub fn range_summary(db: &Path) -> Vec<(String, i64, i64)> {
    query(
        db,
        "SELECT coalesce(d.text || ':', '') || coalesce(s.value, e.text) AS name, count(*) AS n,
                sum(e.end - e.start) AS total
         FROM NVTX_EVENTS AS e LEFT JOIN StringIds AS s ON s.id = e.textId
         LEFT JOIN NVTX_EVENTS AS d ON d.eventType = 75 AND d.domainId = e.domainId
              AND d.globalTid / 0x1000000 % 0x1000000 = e.globalTid / 0x1000000 % 0x1000000
         WHERE e.eventType IN (59, 60) AND e.end IS NOT NULL GROUP BY 1 ORDER BY 1",
    )
    .into_iter()
    .map(|r| {
        (
            r["name"].as_str().unwrap_or_default().to_owned(),
            r["n"].as_i64().unwrap_or_default(),
            r["total"].as_i64().unwrap_or_default(),
        )
    })
    .collect()
}

/// A MOCK of the nsys CLI (a shell script; no nsys exists on these machines), for the tests of
/// the agent's nsys run path named `mock_nsys_*`. It logs each call's argv to `<dir>/calls`
/// (one line, words separated by `|`) and implements just enough: `profile` and `launch` run the
/// application (passing SIGTERM/SIGINT on to it, as nsys does) and return its exit code;
/// `start` remembers `--output`; `stop`, or the
/// application's exit during a `launch` collection, writes a placeholder `.nsys-rep` there;
/// `export` copies `sqlite` (a real nsys export) to `--output`. Like nsys since 2021.5,
/// `launch` refuses the collection switches (`--sample`, `--cpuctxsw`, `--backtrace`,
/// `--capture-range`, `--duration`...) with nsys's own message, and any command can be told
/// to fail before it starts the application ([`mock_nsys_refuse`]).
pub fn mock_nsys(dir: &Path, sqlite: &Path) -> PathBuf {
    let script = format!(
        r#"#!/bin/sh
state={dir}
echo "$(printf '%s|' "$@")" >> "$state/calls"
verb=$1; shift
if [ -f "$state/refuse-$verb" ]; then cat "$state/refuse-$verb" >&2; exit 1; fi
out=""
write_report() {{ [ -n "$1" ] && echo "MOCK nsys-rep (not a real report)" > "$1"; }}
# Like nsys, pass SIGTERM/SIGINT on to the application, so it never outlives the tool.
run_app() {{ "$@" & app=$!; trap 'kill -TERM $app 2>/dev/null' TERM INT; wait $app; code=$?; wait $app 2>/dev/null; }}
case "$verb" in
  profile)
    while [ "$1" != "--" ]; do case "$1" in --output=*) out=${{1#--output=}};; esac; shift; done
    shift; run_app "$@"; write_report "$out"; exit $code ;;
  launch)
    while [ "$1" != "--" ]; do
      case "$1" in
        --sample*|-s|--cpuctxsw*|--backtrace*|-b|--capture-range*|-c|--duration*|-d|--output*|--stats*)
          sw=${{1%%=*}}
          echo "ERROR: The $sw switch is not supported by the launch command after NVIDIA Nsight Systems v2021.5. The ${{sw#--}} switch can be set on the profile and start commands." >&2
          exit 1 ;;
      esac
      shift
    done
    shift; run_app "$@"
    if [ -f "$state/current" ]; then write_report "$(cat "$state/current")"; rm -f "$state/current"; fi
    exit $code ;;
  start)
    for a in "$@"; do case "$a" in --output=*) echo "${{a#--output=}}" > "$state/current";; esac; done ;;
  stop)
    [ -f "$state/current" ] || {{ echo "no collection in progress" >&2; exit 1; }}
    write_report "$(cat "$state/current")"; rm -f "$state/current" ;;
  export)
    while [ "$1" != "--output" ]; do shift; done
    cp {sqlite} "$2" ;;
  *) echo "mock nsys: unknown command $verb" >&2; exit 2 ;;
esac
"#,
        dir = dir.display(),
        sqlite = sqlite.display(),
    );
    let path = dir.join("nsys");
    std::fs::write(&path, script).expect("write the mock nsys");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .expect("make the mock nsys executable");
    path
}

/// Makes the mock nsys at `dir` fail `verb` (`launch`, `profile`, `start`...) before it
/// starts anything, printing `message` on stderr and exiting 1, as real nsys does when it
/// refuses its arguments.
pub fn mock_nsys_refuse(dir: &Path, verb: &str, message: &str) {
    std::fs::write(dir.join(format!("refuse-{verb}")), format!("{message}\n"))
        .expect("write the mock nsys refusal");
}

/// The calls the mock nsys received, each as its argv.
pub fn mock_nsys_calls(dir: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(dir.join("calls"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            l.trim_end_matches('|')
                .split('|')
                .map(str::to_owned)
                .collect()
        })
        .collect()
}
