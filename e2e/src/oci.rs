//! OCI image archives written in Rust: one layer from a list of files, the image config, the
//! manifest and an `index.json` naming the image, packed as an image-layout tarball that
//! `ctr images import` (and `docker load`/`podman load`) accept. No registry, no daemon.
//!
//! ```text
//! ImageSpec { name, files: [(path in image, source | bytes, mode)], user, entrypoint, env }
//!   -> layer.tar (sorted, fixed mtime: the same inputs give the same digest)
//!   -> blobs/sha256/<layer> <config> <manifest>, index.json, oci-layout -> <name>.oci.tar
//! ```
//!
//! Owns the archive format only; which files go into which image is `cargo xtask image`'s.

use std::{
    collections::BTreeMap,
    fs,
    io::Write as _,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};
use oci_spec::image::{
    Arch, ConfigBuilder, DescriptorBuilder, ImageConfigurationBuilder, ImageIndexBuilder,
    ImageManifestBuilder, MediaType, Os, RootFsBuilder, Sha256Digest,
};
use sha2::{Digest as _, Sha256};

/// The annotation containerd reads for the image's name on import.
const CONTAINERD_NAME: &str = "io.containerd.image.name";
/// The annotation of the OCI spec for the reference (tag) of a manifest in an index.
const REF_NAME: &str = "org.opencontainers.image.ref.name";
/// Every entry's mtime: fixed, so that rebuilding unchanged inputs keeps the digests.
const MTIME: u64 = 1_700_000_000;

/// Where a file's bytes come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A file on this machine, read when the layer is written.
    Path(PathBuf),
    /// Bytes given directly (e.g. `/etc/passwd`).
    Bytes(Vec<u8>),
    /// A symbolic link to this target.
    Symlink(String),
    /// An empty directory (owned by `uid`:`gid` of the entry).
    Dir,
}

/// One entry of the image's single layer.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Absolute path inside the image (`/usr/local/bin/x`).
    pub path: String,
    pub source: Source,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
}

impl Entry {
    pub fn file(path: impl Into<String>, from: impl Into<PathBuf>, mode: u32) -> Self {
        Self::new(path, Source::Path(from.into()), mode)
    }

    pub fn bytes(path: impl Into<String>, bytes: impl Into<Vec<u8>>, mode: u32) -> Self {
        Self::new(path, Source::Bytes(bytes.into()), mode)
    }

    pub fn symlink(path: impl Into<String>, target: impl Into<String>) -> Self {
        Self::new(path, Source::Symlink(target.into()), 0o777)
    }

    pub fn dir(path: impl Into<String>, mode: u32) -> Self {
        Self::new(path, Source::Dir, mode)
    }

    fn new(path: impl Into<String>, source: Source, mode: u32) -> Self {
        Self {
            path: path.into(),
            source,
            mode,
            uid: 0,
            gid: 0,
        }
    }

    /// The same entry owned by `uid`:`gid`.
    pub fn owned_by(mut self, uid: u64, gid: u64) -> Self {
        self.uid = uid;
        self.gid = gid;
        self
    }
}

/// What an image is: its name (`repo/name:tag`), its files and how it starts.
#[derive(Debug, Clone, Default)]
pub struct ImageSpec {
    pub name: String,
    pub entries: Vec<Entry>,
    /// `uid[:gid]`; empty means root.
    pub user: String,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub working_dir: String,
    pub labels: BTreeMap<String, String>,
}

/// What was written: the archive and the manifest digest (`sha256:...`).
#[derive(Debug, Clone)]
pub struct Written {
    pub archive: PathBuf,
    pub manifest_digest: String,
    pub layer_bytes: u64,
}

/// Writes `spec` as an OCI image-layout tarball at `archive`.
pub fn write_archive(spec: &ImageSpec, archive: &Path) -> Result<Written> {
    let layer = layer_tar(&spec.entries)?;
    let layer_digest = sha256_hex(&layer);
    let layer_desc = DescriptorBuilder::default()
        .media_type(MediaType::ImageLayer)
        .digest(digest(&layer_digest)?)
        .size(layer.len() as u64)
        .build()?;

    let mut config = ConfigBuilder::default();
    if !spec.user.is_empty() {
        config = config.user(spec.user.clone());
    }
    if !spec.entrypoint.is_empty() {
        config = config.entrypoint(spec.entrypoint.clone());
    }
    if !spec.cmd.is_empty() {
        config = config.cmd(spec.cmd.clone());
    }
    if !spec.working_dir.is_empty() {
        config = config.working_dir(spec.working_dir.clone());
    }
    let mut env = vec!["PATH=/usr/local/bin:/usr/bin:/bin".to_owned()];
    env.extend(spec.env.iter().cloned());
    config = config.env(env);
    if !spec.labels.is_empty() {
        config = config.labels(
            spec.labels
                .clone()
                .into_iter()
                .collect::<std::collections::HashMap<_, _>>(),
        );
    }
    let image_config = ImageConfigurationBuilder::default()
        .architecture(Arch::Amd64)
        .os(Os::Linux)
        .config(config.build()?)
        .rootfs(
            RootFsBuilder::default()
                .typ("layers")
                .diff_ids(vec![format!("sha256:{layer_digest}")])
                .build()?,
        )
        .build()?;
    let config_json = serde_json::to_vec(&image_config)?;
    let config_digest = sha256_hex(&config_json);
    let config_desc = DescriptorBuilder::default()
        .media_type(MediaType::ImageConfig)
        .digest(digest(&config_digest)?)
        .size(config_json.len() as u64)
        .build()?;

    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(config_desc)
        .layers(vec![layer_desc])
        .build()?;
    let manifest_json = serde_json::to_vec(&manifest)?;
    let manifest_digest = sha256_hex(&manifest_json);
    let tag = spec
        .name
        .rsplit_once(':')
        .map(|(_, t)| t)
        .unwrap_or("latest");
    let manifest_desc = DescriptorBuilder::default()
        .media_type(MediaType::ImageManifest)
        .digest(digest(&manifest_digest)?)
        .size(manifest_json.len() as u64)
        .annotations(
            [
                (CONTAINERD_NAME.to_owned(), spec.name.clone()),
                (REF_NAME.to_owned(), tag.to_owned()),
            ]
            .into_iter()
            .collect::<std::collections::HashMap<_, _>>(),
        )
        .build()?;
    let index = ImageIndexBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageIndex)
        .manifests(vec![manifest_desc])
        .build()?;
    let index_json = serde_json::to_vec(&index)?;

    if let Some(dir) = archive.parent() {
        fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let partial = archive.with_extension("tar.partial");
    let file = fs::File::create(&partial)
        .with_context(|| format!("cannot create {}", partial.display()))?;
    let mut out = tar::Builder::new(std::io::BufWriter::new(file));
    let mut put = |name: &str, bytes: &[u8]| -> Result<()> {
        let mut h = tar::Header::new_ustar();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(MTIME);
        h.set_entry_type(tar::EntryType::Regular);
        out.append_data(&mut h, name, bytes)?;
        Ok(())
    };
    put("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    put(&format!("blobs/sha256/{layer_digest}"), &layer)?;
    put(&format!("blobs/sha256/{config_digest}"), &config_json)?;
    put(&format!("blobs/sha256/{manifest_digest}"), &manifest_json)?;
    put("index.json", &index_json)?;
    out.into_inner()?.flush()?;
    fs::rename(&partial, archive).with_context(|| {
        format!(
            "cannot rename {} to {}",
            partial.display(),
            archive.display()
        )
    })?;
    Ok(Written {
        archive: archive.to_path_buf(),
        manifest_digest: format!("sha256:{manifest_digest}"),
        layer_bytes: layer.len() as u64,
    })
}

/// The layer: every entry, parent directories first (created as needed), sorted by path.
fn layer_tar(entries: &[Entry]) -> Result<Vec<u8>> {
    let mut by_path: BTreeMap<String, &Entry> = BTreeMap::new();
    for e in entries {
        let path = e.path.trim_start_matches('/').to_owned();
        anyhow::ensure!(
            !path.is_empty() && !path.split('/').any(|c| c == ".." || c.is_empty()),
            "image path `{}` is not a clean absolute path",
            e.path
        );
        by_path.insert(path, e);
    }
    let mut dirs: BTreeMap<String, ()> = BTreeMap::new();
    for path in by_path.keys() {
        let mut acc = String::new();
        let comps: Vec<&str> = path.split('/').collect();
        for c in &comps[..comps.len() - 1] {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(c);
            if !by_path.contains_key(&acc) {
                dirs.insert(acc.clone(), ());
            }
        }
    }
    let mut all: Vec<(String, Option<&Entry>)> = dirs.into_keys().map(|d| (d, None)).collect();
    all.extend(by_path.into_iter().map(|(p, e)| (p, Some(e))));
    all.sort_by(|a, b| a.0.cmp(&b.0));

    let mut b = tar::Builder::new(Vec::new());
    for (path, entry) in all {
        let mut h = tar::Header::new_gnu();
        h.set_mtime(MTIME);
        match entry {
            None => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                b.append_data(&mut h, format!("{path}/"), std::io::empty())?;
            }
            Some(e) => {
                h.set_mode(e.mode);
                h.set_uid(e.uid);
                h.set_gid(e.gid);
                match &e.source {
                    Source::Dir => {
                        h.set_entry_type(tar::EntryType::Directory);
                        h.set_size(0);
                        b.append_data(&mut h, format!("{path}/"), std::io::empty())?;
                    }
                    Source::Symlink(target) => {
                        h.set_entry_type(tar::EntryType::Symlink);
                        h.set_size(0);
                        b.append_link(&mut h, &path, target)?;
                    }
                    Source::Bytes(bytes) => {
                        h.set_entry_type(tar::EntryType::Regular);
                        h.set_size(bytes.len() as u64);
                        b.append_data(&mut h, &path, bytes.as_slice())?;
                    }
                    Source::Path(from) => {
                        let bytes = fs::read(from).with_context(|| {
                            format!("cannot read {} for /{path}", from.display())
                        })?;
                        h.set_entry_type(tar::EntryType::Regular);
                        h.set_size(bytes.len() as u64);
                        b.append_data(&mut h, &path, bytes.as_slice())?;
                    }
                }
            }
        }
    }
    Ok(b.into_inner()?)
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex_lower(&Sha256::digest(bytes))
}

fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn digest(hex: &str) -> Result<oci_spec::image::Digest> {
    Ok(hex.parse::<Sha256Digest>()?.into())
}

/// The files a dynamically linked program needs beside itself: the `ldd` closure, as
/// (path on this machine, path in the image). The loader keeps its absolute path.
pub fn library_closure(binaries: &[&Path]) -> Result<Vec<PathBuf>> {
    let mut libs = std::collections::BTreeSet::new();
    for bin in binaries {
        let out = std::process::Command::new("ldd")
            .arg(bin)
            .output()
            .with_context(|| format!("ldd {}", bin.display()))?;
        let text = String::from_utf8_lossy(&out.stdout);
        if text.contains("not a dynamic executable") || text.contains("statically linked") {
            continue;
        }
        for line in text.lines() {
            // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" or "/lib64/ld-linux-x86-64.so.2 (0x...)"
            let path = match line.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next(),
                None => line.split_whitespace().next(),
            };
            if let Some(p) = path.filter(|p| p.starts_with('/')) {
                libs.insert(PathBuf::from(p));
            }
        }
    }
    Ok(libs.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_tar(bytes: &[u8]) -> BTreeMap<String, (tar::EntryType, Vec<u8>, u32)> {
        let mut a = tar::Archive::new(bytes);
        let mut out = BTreeMap::new();
        for e in a.entries().expect("entries") {
            let mut e = e.expect("entry");
            let path = e.path().expect("path").to_string_lossy().into_owned();
            let ty = e.header().entry_type();
            let mode = e.header().mode().expect("mode");
            let mut body = Vec::new();
            std::io::Read::read_to_end(&mut e, &mut body).expect("body");
            out.insert(path, (ty, body, mode));
        }
        out
    }

    #[test]
    fn an_archive_is_an_image_layout_whose_digests_match_its_blobs() {
        let dir = crate::TempDir::new("nsight-oci-test");
        let spec = ImageSpec {
            name: "nsight.local/hello:1.0".into(),
            entries: vec![
                Entry::bytes("/usr/local/bin/hello", b"#!hello".to_vec(), 0o755),
                Entry::bytes(
                    "/etc/passwd",
                    b"nonroot:x:65532:65532::/:/sbin/nologin\n".to_vec(),
                    0o644,
                ),
                Entry::symlink("/bin/hi", "/usr/local/bin/hello"),
            ],
            user: "65532:65532".into(),
            entrypoint: vec!["/usr/local/bin/hello".into()],
            ..ImageSpec::default()
        };
        let archive = dir.path().join("hello.oci.tar");
        let written = write_archive(&spec, &archive).expect("write");
        let files = read_tar(&fs::read(&archive).expect("read"));
        let index: serde_json::Value =
            serde_json::from_slice(&files["index.json"].1).expect("index");
        let m = &index["manifests"][0];
        assert_eq!(m["annotations"][CONTAINERD_NAME], "nsight.local/hello:1.0");
        assert_eq!(m["annotations"][REF_NAME], "1.0");
        let digest = m["digest"].as_str().expect("digest");
        assert_eq!(digest, written.manifest_digest);
        // Every descriptor's digest and size match the blob it names.
        let blob = |d: &str| {
            let hex = d.strip_prefix("sha256:").expect("sha256");
            let body = &files[&format!("blobs/sha256/{hex}")].1;
            assert_eq!(sha256_hex(body), hex);
            body.clone()
        };
        let manifest: serde_json::Value = serde_json::from_slice(&blob(digest)).expect("manifest");
        let config: serde_json::Value =
            serde_json::from_slice(&blob(manifest["config"]["digest"].as_str().expect("c")))
                .expect("config");
        assert_eq!(config["config"]["User"], "65532:65532");
        assert_eq!(config["architecture"], "amd64");
        let layer_digest = manifest["layers"][0]["digest"].as_str().expect("layer");
        assert_eq!(config["rootfs"]["diff_ids"][0], layer_digest);
        let layer = read_tar(&blob(layer_digest));
        // Parents are created; the files keep their modes; the link its target.
        assert!(layer.contains_key("usr/local/bin/"), "{:?}", layer.keys());
        let (ty, body, mode) = &layer["usr/local/bin/hello"];
        assert_eq!(
            (*ty, body.as_slice(), *mode),
            (tar::EntryType::Regular, &b"#!hello"[..], 0o755)
        );
        assert_eq!(layer["bin/hi"].0, tar::EntryType::Symlink);

        // Same inputs, same digest.
        let again = write_archive(&spec, &dir.path().join("again.oci.tar")).expect("again");
        assert_eq!(again.manifest_digest, written.manifest_digest);
    }

    #[test]
    fn a_path_that_climbs_out_is_refused() {
        let dir = crate::TempDir::new("nsight-oci-test");
        let spec = ImageSpec {
            name: "x:1".into(),
            entries: vec![Entry::bytes("/etc/../../x", b"".to_vec(), 0o644)],
            ..ImageSpec::default()
        };
        let err = write_archive(&spec, &dir.path().join("x.tar")).expect_err("refused");
        assert!(
            err.to_string().contains("not a clean absolute path"),
            "{err}"
        );
    }
}
