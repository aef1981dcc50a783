//! The kernel launches of a report: each kernel joined to the CUDA API call that launched it
//! (same `correlationId`, same process: `kernel.globalPid = call.globalTid` with its thread
//! bits cleared), and the four durations `cuda_kern_exec_sum` summarises, grouped by (PID, TID,
//! device, API name, kernel name). Names are looked up once per distinct id; groups whose
//! names are equal (an API name without its version suffix) are merged, as NVIDIA's GROUP BY on
//! the names does. This module reads rows; it does not build tables.

use std::collections::{BTreeMap, BTreeSet};

use nsight_recipe_sdk::{string_values, strip_api_version, FastMap, Output, Report, Value, Window};

pub const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
pub const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
/// Event class of CUDA backtrace rows: in older exports a second copy of each call, not a launch.
const BACKTRACE_CLASS: i64 = 67;

/// What identifies a group, as shown.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LaunchKey {
    pub pid: i64,
    pub tid: i64,
    pub device: i64,
    pub api: String,
    pub kernel: String,
}

/// The durations (ns) of one group's launches.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Phases {
    /// From the call's start to the later of the call's end and the kernel's end.
    pub total: Vec<i64>,
    /// The call: end - start.
    pub api: Vec<i64>,
    /// From the call's end to the kernel's start, only where that is 0 or more.
    pub queue: Vec<i64>,
    /// The kernel: end - start.
    pub kernel: Vec<i64>,
}

/// One launch before names are looked up: (PID, TID, device, API name id, kernel name id,
/// demangled name id).
type IdKey = (i64, i64, i64, Option<i64>, Option<i64>, Option<i64>);

/// Every launch inside `window` (both the call and the kernel wholly inside), grouped.
/// `name_column` is the kernel name column (`demangledName`, `shortName` or `mangledName`;
/// the demangled name where it is NULL).
pub fn read_launches(
    report: &dyn Report,
    name_column: &str,
    has_event_class: bool,
    window: &Window,
    out: &mut Output,
) -> Result<BTreeMap<LaunchKey, Phases>, String> {
    let not_backtrace = if has_event_class {
        format!("r.eventClass IS NOT {BACKTRACE_CLASS}")
    } else {
        "1".to_owned()
    };
    let sql = format!(
        "SELECT r.globalTid, k.deviceId, r.start, r.\"end\", k.start, k.\"end\", r.nameId, \
         k.{name_column}, k.demangledName \
         FROM {KERNEL} AS k JOIN {RUNTIME} AS r \
           ON k.correlationId = r.correlationId \
          AND k.globalPid = (r.globalTid & -16777216) \
         WHERE {not_backtrace} AND {} AND {}",
        window.sql("k"),
        window.sql("r")
    );
    let mut groups: FastMap<IdKey, Phases> = FastMap::default();
    let mut incomplete = 0u64;
    report.query(&sql, &[], &mut |row| {
        let int = |i: usize| row.get(i).and_then(Value::as_int);
        let (Some(tid), Some(device), Some(rs), Some(re), Some(ks), Some(ke)) =
            (int(0), int(1), int(2), int(3), int(4), int(5))
        else {
            incomplete += 1;
            return Ok(());
        };
        let key = (
            tid / 0x100_0000 % 0x100_0000,
            tid % 0x100_0000,
            device,
            int(6),
            int(7),
            int(8),
        );
        let phases = groups.entry(key).or_default();
        phases.total.push(re.max(ke) - rs);
        phases.api.push(re - rs);
        if ks - re >= 0 {
            phases.queue.push(ks - re);
        }
        phases.kernel.push(ke - ks);
        Ok(())
    })?;
    if incomplete > 0 {
        out.note(format!(
            "{incomplete} kernel launches have no start, end or device and are left out"
        ));
    }
    let ids: BTreeSet<i64> = groups
        .keys()
        .flat_map(|&(_, _, _, a, k, d)| [a, k, d].into_iter().flatten())
        .collect();
    let names = string_values(report, &ids)?;
    let name = |id: Option<i64>| id.and_then(|i| names.get(&i));
    let mut merged: BTreeMap<LaunchKey, Phases> = BTreeMap::new();
    for ((pid, tid, device, api, kernel, demangled), phases) in groups {
        let key = LaunchKey {
            pid,
            tid,
            device,
            api: name(api)
                .map(|n| strip_api_version(n).to_owned())
                .unwrap_or_default(),
            kernel: name(kernel)
                .or_else(|| name(demangled))
                .cloned()
                .unwrap_or_default(),
        };
        let into = merged.entry(key).or_default();
        into.total.extend(phases.total);
        into.api.extend(phases.api);
        into.queue.extend(phases.queue);
        into.kernel.extend(phases.kernel);
    }
    Ok(merged)
}
