//! Preflight diagnostics: what stands between this container and a useful profile, as short
//! sentences a person can act on, sent in `Register.diagnostics` (visible in the coordinator's
//! `status`). [`diagnose`] is a pure function over [`Facts`]; [`Facts::gather`] reads them from
//! the machine (and nothing else does).

use std::path::Path;

/// What the agent found out about the machine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Facts {
    /// `/dev/nvidia*` device nodes that can be opened for reading and writing.
    pub gpu_devices: Vec<String>,
    /// `/proc/sys/kernel/perf_event_paranoid`, if readable.
    pub perf_event_paranoid: Option<i32>,
    /// `NVreg_RestrictProfilingToAdminUsers` from `/proc/driver/nvidia/params`, if present.
    pub restrict_profiling_to_admin: Option<bool>,
    pub is_root: bool,
    /// The backend the agent runs (`nvtx` or `nsys`).
    pub backend: String,
    /// Where nsys was found (`--nsys` / `NSIGHT_NSYS`, else on PATH), if anywhere.
    pub nsys: Option<String>,
    /// The path given with `--nsys` / `NSIGHT_NSYS`, if any.
    pub nsys_given: Option<String>,
}

/// Every problem [`Facts`] show, one sentence each (empty when all is well).
pub fn diagnose(f: &Facts) -> Vec<String> {
    let mut out = Vec::new();
    if f.gpu_devices.is_empty() {
        out.push(
            "no GPU access: no usable /dev/nvidia* device in this container; CUDA and GPU \
             traces will be empty (request a GPU or run with the NVIDIA container runtime)"
                .to_owned(),
        );
    }
    if let Some(level) = f.perf_event_paranoid.filter(|l| *l > 2) {
        out.push(format!(
            "perf_event_paranoid is {level}: CPU sampling and OS runtime traces need 2 or \
             less (sysctl kernel.perf_event_paranoid=2 on the node)"
        ));
    }
    if f.restrict_profiling_to_admin == Some(true) && !f.is_root {
        out.push(
            "the NVIDIA driver restricts GPU performance counters to admin users \
             (NVreg_RestrictProfilingToAdminUsers=1) and this agent is not root: CUPTI \
             metrics will fail (run as root or set the driver option to 0)"
                .to_owned(),
        );
    }
    if f.backend == "nsys" && f.nsys.is_none() {
        out.push(match &f.nsys_given {
            Some(path) => format!(
                "the nsys backend is selected but {path} (--nsys / NSIGHT_NSYS) is not an \
                 executable file: point it at the Nsight Systems CLI or choose the nvtx backend"
            ),
            None => "the nsys backend is selected but nsys is not on PATH: mount the Nsight \
                     Systems CLI volume or choose the nvtx backend"
                .to_owned(),
        });
    }
    out
}

impl Facts {
    /// Reads the facts from this machine; `nsys` is the path given with `--nsys` /
    /// `NSIGHT_NSYS`, looked for as the backend does ([`crate::nsys_run::locate`]).
    pub fn gather(backend: &str, nsys: Option<&Path>) -> Self {
        let gpu_devices = std::fs::read_dir("/dev")
            .map(|entries| {
                let mut v: Vec<String> = entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with("nvidia"))
                    })
                    .filter(|p| {
                        std::fs::OpenOptions::new()
                            .read(true)
                            .write(true)
                            .open(p)
                            .is_ok()
                    })
                    .map(|p| p.display().to_string())
                    .collect();
                v.sort();
                v
            })
            .unwrap_or_default();
        let perf_event_paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .ok()
            .and_then(|s| s.trim().parse().ok());
        let restrict_profiling_to_admin = std::fs::read_to_string("/proc/driver/nvidia/params")
            .ok()
            .and_then(|s| parse_restrict(&s));
        let is_root = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| effective_uid(&s))
            == Some(0);
        Self {
            gpu_devices,
            perf_event_paranoid,
            restrict_profiling_to_admin,
            is_root,
            backend: backend.to_owned(),
            nsys: crate::nsys_run::locate(nsys, std::env::var_os("PATH").as_deref())
                .ok()
                .map(|p| p.display().to_string()),
            nsys_given: nsys.map(|p| p.display().to_string()),
        }
    }
}

/// `RestrictProfilingToAdminUsers: 1` in the driver's params file.
fn parse_restrict(params: &str) -> Option<bool> {
    params.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "RestrictProfilingToAdminUsers").then(|| v.trim() != "0")
    })
}

/// The effective uid from `/proc/self/status` (`Uid: real effective saved fs`).
fn effective_uid(status: &str) -> Option<u32> {
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Facts {
        Facts {
            gpu_devices: vec!["/dev/nvidia0".into()],
            perf_event_paranoid: Some(2),
            restrict_profiling_to_admin: Some(false),
            is_root: false,
            backend: "nvtx".into(),
            nsys: None,
            nsys_given: None,
        }
    }

    #[test]
    fn a_ready_machine_has_no_diagnostics() {
        assert!(diagnose(&good()).is_empty());
    }

    #[test]
    fn each_problem_gives_one_actionable_sentence() {
        let f = Facts {
            gpu_devices: vec![],
            ..good()
        };
        let d = diagnose(&f);
        assert_eq!(d.len(), 1);
        assert!(d[0].starts_with("no GPU access"), "{d:?}");

        let d = diagnose(&Facts {
            perf_event_paranoid: Some(4),
            ..good()
        });
        assert_eq!(d.len(), 1);
        assert!(d[0].contains("perf_event_paranoid is 4"), "{d:?}");

        let restricted = Facts {
            restrict_profiling_to_admin: Some(true),
            ..good()
        };
        assert!(diagnose(&restricted)[0].contains("NVreg_RestrictProfilingToAdminUsers"));
        assert!(diagnose(&Facts {
            is_root: true,
            ..restricted
        })
        .is_empty());

        let nsys = Facts {
            backend: "nsys".into(),
            ..good()
        };
        assert!(diagnose(&nsys)[0].contains("nsys is not on PATH"));
        let given = Facts {
            nsys_given: Some("/opt/nsys/bin/nsys".into()),
            ..nsys.clone()
        };
        let d = diagnose(&given);
        assert!(
            d[0].contains("/opt/nsys/bin/nsys (--nsys / NSIGHT_NSYS) is not an executable")
                && !d[0].contains("PATH"),
            "{d:?}"
        );
        assert!(diagnose(&Facts {
            nsys: Some("/opt/nsys/bin/nsys".into()),
            ..given
        })
        .is_empty());
        assert!(diagnose(&Facts {
            nsys: Some("/usr/bin/nsys".into()),
            ..nsys
        })
        .is_empty());
    }

    #[test]
    fn driver_params_and_proc_status_are_parsed() {
        assert_eq!(
            parse_restrict("EnableMSI: 1\nRestrictProfilingToAdminUsers: 1\n"),
            Some(true)
        );
        assert_eq!(
            parse_restrict("RestrictProfilingToAdminUsers: 0"),
            Some(false)
        );
        assert_eq!(parse_restrict("Other: 1"), None);
        assert_eq!(
            effective_uid("Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t0"),
            Some(0)
        );
    }
}
