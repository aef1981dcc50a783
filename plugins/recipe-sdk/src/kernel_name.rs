//! `--name demangled|base|mangled`: which `CUPTI_ACTIVITY_KIND_KERNEL` column names a kernel,
//! shared by the kernel listings (`cuda_kern_exec_sum`, `cuda_gpu_trace`, `nvtx_kern_sum`,
//! `nccl_sum`). Owns the argument's description, its parsing and the fallback to the
//! demangled name in older exports; not the SQL that reads the names.

use crate::{Args, Output};

/// The kernel table whose name columns these are.
const KERNEL_TABLE: &str = "CUPTI_ACTIVITY_KIND_KERNEL";

/// `describe`'s entry for `--name` (name, description, default).
pub const KERNEL_NAME_ARGUMENT: (&str, &str, Option<&str>) = (
    "name",
    "Kernel names: demangled (full signature), base (short name) or mangled.",
    Some("demangled"),
);

/// Which name of a kernel a listing shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelName {
    /// `demangledName`: the full signature (the default).
    #[default]
    Demangled,
    /// `shortName`: the function's name alone.
    Base,
    /// `mangledName`.
    Mangled,
}

impl KernelName {
    /// `--name` of `args`: `demangled` (also when absent), `base` or `mangled`; anything else
    /// is an error naming the accepted values.
    pub fn parse(args: &Args) -> Result<Self, String> {
        match args.get("name").unwrap_or("demangled") {
            "demangled" => Ok(Self::Demangled),
            "base" => Ok(Self::Base),
            "mangled" => Ok(Self::Mangled),
            other => Err(format!(
                "--name {other}: expected demangled, base or mangled"
            )),
        }
    }

    /// The kernel table's column of this name.
    pub fn column(self) -> &'static str {
        match self {
            Self::Demangled => "demangledName",
            Self::Base => "shortName",
            Self::Mangled => "mangledName",
        }
    }

    /// The column to read in a kernel table with `columns`: [`column`](Self::column) when the
    /// report has it, else `demangledName` with a note (older exports lack `shortName` and
    /// `mangledName`).
    pub fn column_in(self, columns: &[String], out: &mut Output) -> &'static str {
        let column = self.column();
        if self == Self::Demangled || columns.iter().any(|c| c == column) {
            return column;
        }
        out.note(missing_note(column));
        "demangledName"
    }
}

/// The note for a report whose kernel table lacks `column`.
pub fn missing_note(column: &str) -> String {
    format!(
        "column {KERNEL_TABLE}.{column} not in this report (older export); kernels are named by \
         their demangled names"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[(&str, &str)]) -> Args {
        let v: Vec<(String, String)> = v
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect();
        Args::parse(&v, &["name"]).unwrap()
    }

    #[test]
    fn parses_the_three_names_and_refuses_others() {
        assert_eq!(KernelName::parse(&args(&[])), Ok(KernelName::Demangled));
        assert_eq!(
            KernelName::parse(&args(&[("name", "base")])).map(KernelName::column),
            Ok("shortName")
        );
        assert_eq!(
            KernelName::parse(&args(&[("name", "mangled")])).map(KernelName::column),
            Ok("mangledName")
        );
        assert_eq!(
            KernelName::parse(&args(&[("name", "short")])),
            Err("--name short: expected demangled, base or mangled".to_owned())
        );
    }

    #[test]
    fn falls_back_to_the_demangled_name_with_a_note() {
        let mut out = Output::default();
        let old = vec!["demangledName".to_owned()];
        assert_eq!(KernelName::Base.column_in(&old, &mut out), "demangledName");
        assert_eq!(out.notes, [missing_note("shortName")]);
        let new = vec!["demangledName".to_owned(), "shortName".to_owned()];
        let mut out = Output::default();
        assert_eq!(KernelName::Base.column_in(&new, &mut out), "shortName");
        assert!(out.notes.is_empty());
    }
}
