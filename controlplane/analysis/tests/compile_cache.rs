//! The on-disk compiled-component cache: a second host (as a new process would) loads a
//! component from the cache instead of compiling it, and the result runs like a fresh
//! compile; corrupt, torn or foreign entries are compiled again and replaced, never used.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

mod common;

use std::{
    path::{Path, PathBuf},
    time::Instant,
};

use common::testdata_dir;
use nsight_analysis::{table_to_csv, Limits, LoadSource, RecipeHost};
use nsight_e2e::wasm_artifact;
use sha2::Digest as _;

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nsight-cc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn kern_sum() -> PathBuf {
    wasm_artifact("recipes/cuda_gpu_kern_sum.wasm")
}

fn host(dir: &Path) -> RecipeHost {
    RecipeHost::with_cache_dir(Limits::default(), dir).unwrap()
}

/// The entry files in `dir`: (`.cwasm`, `.sum`).
fn entry(dir: &Path) -> (PathBuf, PathBuf) {
    let mut cwasm: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    assert_eq!(cwasm.len(), 1, "one entry in {}: {cwasm:?}", dir.display());
    let cwasm = cwasm.remove(0);
    let sum = cwasm.with_extension("sum");
    assert!(sum.is_file(), "{} has its checksum", cwasm.display());
    (cwasm, sum)
}

fn csv_of(host: &RecipeHost, component: &wasmtime::component::Component) -> String {
    let out = host
        .run(component, &testdata_dir().join("nsys-ai/mock.sqlite"), &[])
        .unwrap();
    table_to_csv(out.table("cuda_gpu_kern_sum").unwrap())
}

#[test]
fn a_second_host_loads_from_disk_and_runs_the_same() {
    let dir = temp_dir("second");
    let first = host(&dir);
    let t = Instant::now();
    let (compiled, source) = first.load_traced(&kern_sum()).unwrap();
    let compile_ms = t.elapsed().as_millis();
    assert_eq!(source, LoadSource::Compiled);
    entry(&dir);
    assert_eq!(
        first.load_traced(&kern_sum()).unwrap().1,
        LoadSource::Memory
    );

    let second = host(&dir);
    let t = Instant::now();
    let (cached, source) = second.load_traced(&kern_sum()).unwrap();
    let disk_ms = t.elapsed().as_millis();
    assert_eq!(source, LoadSource::Disk);
    eprintln!("compile {compile_ms} ms, from disk {disk_ms} ms");
    assert_eq!(csv_of(&second, &cached), csv_of(&first, &compiled));
    assert_eq!(second.describe(&cached).unwrap().name, "cuda_gpu_kern_sum");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn corrupt_entries_are_compiled_again_and_replaced() {
    let dir = temp_dir("corrupt");
    host(&dir).load_traced(&kern_sum()).unwrap();
    let (cwasm, sum) = entry(&dir);

    // A flipped byte in the middle of the code.
    let mut bytes = std::fs::read(&cwasm).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&cwasm, &bytes).unwrap();
    let h = host(&dir);
    let (component, source) = h.load_traced(&kern_sum()).unwrap();
    match source {
        LoadSource::Recompiled(reason) => assert!(reason.contains("checksum"), "{reason}"),
        other => panic!("a corrupt entry was used: {other:?}"),
    }
    assert!(!csv_of(&h, &component).is_empty());
    // Replaced by a good entry.
    assert_eq!(
        host(&dir).load_traced(&kern_sum()).unwrap().1,
        LoadSource::Disk
    );

    // A truncated file whose checksum was (wrongly) updated to match: wasmtime refuses it.
    let bytes = std::fs::read(&cwasm).unwrap();
    let cut = &bytes[..bytes.len() / 3];
    std::fs::write(&cwasm, cut).unwrap();
    let digest: String = sha2::Sha256::digest(cut)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    std::fs::write(&sum, digest).unwrap();
    match host(&dir).load_traced(&kern_sum()).unwrap().1 {
        LoadSource::Recompiled(reason) => assert!(reason.contains("wasmtime refused"), "{reason}"),
        other => panic!("a truncated entry was used: {other:?}"),
    }
    assert_eq!(
        host(&dir).load_traced(&kern_sum()).unwrap().1,
        LoadSource::Disk
    );

    // A write cut short: the code without its checksum.
    std::fs::remove_file(&sum).unwrap();
    match host(&dir).load_traced(&kern_sum()).unwrap().1 {
        LoadSource::Recompiled(reason) => assert!(reason.contains("no checksum"), "{reason}"),
        other => panic!("an entry without checksum was used: {other:?}"),
    }
    assert_eq!(
        host(&dir).load_traced(&kern_sum()).unwrap().1,
        LoadSource::Disk
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unusable_cache_directory_is_a_clear_error() {
    let file = temp_dir("file");
    std::fs::write(&file, b"not a directory").unwrap();
    let err = RecipeHost::with_cache_dir(Limits::default(), &file.join("sub")).unwrap_err();
    assert!(
        format!("{err}").contains("compiled-component cache"),
        "{err}"
    );
    std::fs::remove_file(&file).unwrap();
}
