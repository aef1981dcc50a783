//! `nsight-crds`: prints every CRD as one YAML stream, or with `--write <dir>` writes one file
//! per CRD into `<dir>` (what `cargo xtask codegen` runs for `charts/nsight-operator/crds`),
//! or with `--write-values-schema <file>` the chart's `values.schema.json`.

use std::{path::PathBuf, process::ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.as_slice() {
        [] => nsight_api::crds::yaml_stream()
            .map(|s| print!("{s}"))
            .map_err(|e| e.to_string()),
        [flag, dir] if flag == "--write" => write(&PathBuf::from(dir)),
        [flag, file] if flag == "--write-values-schema" => {
            std::fs::write(file, nsight_api::chart::values_schema())
                .map(|()| eprintln!("wrote {file}"))
                .map_err(|e| format!("{file}: {e}"))
        }
        _ => Err("usage: nsight-crds [--write <dir> | --write-values-schema <file>]".to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nsight-crds: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Replaces the `*.yaml` files of `dir` with the current CRDs.
fn write(dir: &std::path::Path) -> Result<(), String> {
    let files = nsight_api::crds::files().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let old = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in old.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    for (name, yaml) in files {
        let path = dir.join(name);
        std::fs::write(&path, yaml).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
