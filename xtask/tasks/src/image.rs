//! `cargo xtask image operator [--tag TAG] [--repository REPO]`: the operator image, built
//! from `controlplane/operator/Containerfile`.
//!
//! Owns staging the image's build context: the release `nsight-operator` binary and the
//! proxy-wasm filters of `cargo xtask build-wasm` under `plugins/` (the image's `/plugins`, which
//! a gateway Pod's init container copies next to Envoy with `nsight-operator install-plugins`).
//! The context is then built with `docker` (or `podman`) when one is installed and its engine
//! answers; otherwise the task says so and prints the command to run elsewhere. Nothing is
//! pushed.
//!
//! ```text
//! target/release/nsight-operator ─┐
//! dist/<filter>.wasm (FILTERS) ───┼─> <cache>/image/nsight-operator/ ── docker build ──> REPO/nsight-operator:TAG
//! controlplane/operator/Containerfile
//! ```

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{bail, Context, Result};

use crate::{
    bench_webhook::build_release, cmd::run as run_cmd, image_oci::DEFAULT_REPOSITORY,
    paths::Layout, wasm,
};

/// The auth filter without its response hook (`wasm_exports.rs`), loaded by operator gateways
/// for API-key and JWT listeners (the operator's `LEAN_AUTH_WASM`).
pub(crate) const LEAN_AUTH_FILTER: &str = "nsight_auth_filter_lean.wasm";

/// `image operator [--tag TAG] [--repository REPO]`.
pub fn run(layout: &Layout, args: &[String]) -> Result<()> {
    let Some((what, flags)) = args.split_first() else {
        bail!("usage: cargo xtask image all|operator [--tag TAG] [--repository REPO]");
    };
    if what == "all" {
        return crate::image_oci::run(layout, flags);
    }
    if what != "operator" {
        bail!("unknown image `{what}`: `all` (OCI archives) or `operator` (docker/podman build)");
    }
    let mut tag = env!("CARGO_PKG_VERSION").to_owned();
    let mut repository = DEFAULT_REPOSITORY.to_owned();
    let mut it = flags.iter();
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .with_context(|| format!("{flag} needs a value"))?
            .clone();
        match flag.as_str() {
            "--tag" => tag = value,
            "--repository" => repository = value,
            other => bail!("unknown flag {other} (--tag, --repository)"),
        }
    }
    let dist = wasm::build_all(layout)?;
    let release = build_release(layout)?;
    let context = layout.cache.join("image").join("nsight-operator");
    stage(
        &context,
        &layout.root.join("controlplane/operator/Containerfile"),
        &release.join("nsight-operator"),
        &dist,
    )?;
    let image = format!("{repository}/nsight-operator:{tag}");
    let Some(engine) = container_engine() else {
        eprintln!(
            "no container engine answers here (docker/podman): the context is staged in {}; \
             build it with\n  docker build -f {0}/Containerfile -t {image} {0}",
            context.display()
        );
        return Ok(());
    };
    run_cmd(
        Command::new(engine)
            .arg("build")
            .arg("-f")
            .arg(context.join("Containerfile"))
            .args(["-t", &image])
            .arg(&context),
    )?;
    eprintln!("built {image} (not pushed)");
    Ok(())
}

/// Writes the build context into `context` (emptied first): the Containerfile, the binary and
/// `plugins/<filter>.wasm` for every filter the gateways load (and the auth filter's lean
/// variant, which operator gateways load for API-key and JWT). Returns the plugin paths.
pub fn stage(
    context: &Path,
    containerfile: &Path,
    binary: &Path,
    dist: &Path,
) -> Result<Vec<PathBuf>> {
    if context.exists() {
        fs::remove_dir_all(context)
            .with_context(|| format!("cannot empty {}", context.display()))?;
    }
    let plugins_dir = context.join("plugins");
    fs::create_dir_all(&plugins_dir)
        .with_context(|| format!("cannot create {}", plugins_dir.display()))?;
    let copy = |from: &Path, to: &Path| {
        fs::copy(from, to)
            .map(|_| ())
            .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))
    };
    copy(containerfile, &context.join("Containerfile"))?;
    copy(binary, &context.join("nsight-operator"))?;
    let mut plugins = Vec::new();
    let files = wasm::FILTERS
        .iter()
        .map(|(_, name)| format!("{name}.wasm"))
        .chain([LEAN_AUTH_FILTER.to_owned()]);
    for file in files {
        let from = dist.join(&file);
        if !from.is_file() {
            bail!(
                "{} is missing: `cargo xtask build-wasm` builds it",
                from.display()
            );
        }
        let to = plugins_dir.join(&file);
        copy(&from, &to)?;
        plugins.push(to);
    }
    Ok(plugins)
}

/// `docker` or `podman`, whichever is installed and reaches its engine.
fn container_engine() -> Option<&'static str> {
    ["docker", "podman"].into_iter().find(|engine| {
        Command::new(engine)
            .arg("info")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    #[test]
    fn the_context_holds_the_binary_and_every_filter_under_plugins() {
        let dir = nsight_e2e::TempDir::new("nsight-image-test");
        let d = dir.path();
        let dist = d.join("dist");
        fs::create_dir_all(&dist).unwrap();
        for (_, name) in wasm::FILTERS {
            fs::write(dist.join(format!("{name}.wasm")), b"\0asm\x01\0\0\0").unwrap();
        }
        fs::write(dist.join(LEAN_AUTH_FILTER), b"\0asm").unwrap();
        // Only the filters the gateways load, not every artifact of the dist dir.
        fs::write(dist.join("nsight_other.wasm"), b"\0asm").unwrap();
        fs::write(d.join("Containerfile"), "FROM scratch\n").unwrap();
        fs::write(d.join("bin"), b"\x7fELF").unwrap();
        let context = d.join("context");
        let plugins = stage(&context, &d.join("Containerfile"), &d.join("bin"), &dist).unwrap();
        assert_eq!(plugins.len(), wasm::FILTERS.len() + 1);
        let mut names: Vec<String> = fs::read_dir(context.join("plugins"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "nsight_auth_filter.wasm",
                "nsight_auth_filter_lean.wasm",
                "nsight_routing_filter.wasm"
            ]
        );
        assert!(context.join("nsight-operator").is_file());
        assert!(context.join("Containerfile").is_file());

        // A missing filter is named.
        fs::remove_file(dist.join("nsight_routing_filter.wasm")).unwrap();
        let err = stage(&context, &d.join("Containerfile"), &d.join("bin"), &dist).unwrap_err();
        assert!(
            err.to_string().contains("nsight_routing_filter.wasm"),
            "{err}"
        );
    }

    #[test]
    fn the_containerfile_copies_plugins_to_the_directory_install_plugins_reads() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../controlplane/operator");
        let text = fs::read_to_string(root.join("Containerfile")).unwrap();
        assert!(text.contains("COPY plugins/ /plugins/"), "{text}");
        assert!(text.contains("/usr/local/bin/nsight-operator"), "{text}");
        let gateway = fs::read_to_string(root.join("src/render/gateway.rs")).unwrap();
        assert!(
            gateway.contains(r#"PLUGINS_SOURCE_DIR: &str = "/plugins";"#),
            "the init container reads another directory than the image fills"
        );
    }
}
