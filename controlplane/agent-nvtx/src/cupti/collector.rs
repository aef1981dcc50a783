//! The GPU side of the recorder: decoded CUPTI records for the current window, their names
//! interned, capped in number. Safe Rust with names resolved by the caller, so it is tested
//! without CUPTI; [`super::ffi`] feeds it from CUPTI's buffer callbacks.
//!
//! Invariants: the records held take at most `cap` bytes (their in-memory size; more are
//! counted in `dropped`, never stalling the program); [`Collector::take`] keeps only records
//! that began inside the window and leaves the collector empty.

use std::{collections::HashMap, sync::Mutex};

use super::decode::Decoded;
use crate::cuda::{Api, CudaActivity};
use crate::recorder::lock;

/// Runtime calls left out of the report, as nsys leaves them out unless asked for every API
/// (`--cuda-trace-all-apis`): frequent getters that say nothing about the GPU's work. In 200
/// steps of a PyTorch loop they were 9,633 of 10,806 runtime calls.
pub const LEFT_OUT: &[&str] = &[
    "cudaGetDevice",
    "cudaGetDeviceCount",
    "cudaGetLastError",
    "cudaPeekAtLastError",
    "cudaDeviceGetAttribute",
];

/// `cudaGetDevice_v3020` -> `cudaGetDevice`.
fn base_name(name: &str) -> &str {
    match name.rsplit_once("_v") {
        Some((base, version)) if version.chars().all(|c| c.is_ascii_digit()) => base,
        _ => name,
    }
}

/// The memory decoded records may take per process, unless `NSIGHT_CUPTI_MAX_MIB` says
/// otherwise: 256 MiB, about 2.6 million kernels or 5.6 million API calls.
pub const DEFAULT_CAP_BYTES: usize = 256 << 20;

/// What one record costs held (its struct; names are interned once).
fn cost(record: &Decoded) -> usize {
    use crate::cuda::{ApiCall, Kernel, Memcpy, Memset, Sync};
    match record {
        Decoded::Kernel { .. } => size_of::<Kernel>(),
        Decoded::Memcpy(_) => size_of::<Memcpy>(),
        Decoded::Memset(_) => size_of::<Memset>(),
        Decoded::Api(_) => size_of::<ApiCall>(),
        Decoded::Sync(_) => size_of::<Sync>(),
    }
}

#[derive(Debug, Default)]
struct Inner {
    activity: CudaActivity,
    index: HashMap<String, u32>,
    /// Each callback id's interned name, `None` for a call left out ([`LEFT_OUT`]).
    api_names: HashMap<(Api, u32), Option<u32>>,
    held: usize,
}

impl Inner {
    fn intern(&mut self, name: String) -> u32 {
        if let Some(&i) = self.index.get(&name) {
            return i;
        }
        let i = u32::try_from(self.activity.names.len()).unwrap_or(u32::MAX);
        self.activity.names.push(name.clone());
        self.index.insert(name, i);
        i
    }
}

/// Decoded records of one process.
#[derive(Debug)]
pub struct Collector {
    cap: usize,
    inner: Mutex<Inner>,
}

impl Collector {
    /// A collector holding at most `cap` bytes of records.
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Adds one record (or counts it dropped when the cap is reached). `kernel_name` turns a kernel's name pointer into its name and
    /// `api_name` a call's domain and callback id into the function's name; each is called only
    /// when needed.
    pub fn add(
        &self,
        record: Decoded,
        kernel_name: impl FnOnce(u64) -> String,
        api_name: impl FnOnce(Api, u32) -> String,
    ) {
        let mut inner = lock(&self.inner);
        let cost = cost(&record);
        if inner.held + cost > self.cap {
            inner.activity.dropped += 1;
            return;
        }
        inner.held += cost;
        match record {
            Decoded::Kernel {
                mut kernel,
                name_ptr,
            } => {
                kernel.name = inner.intern(kernel_name(name_ptr));
                inner.activity.kernels.push(kernel);
            }
            Decoded::Memcpy(m) => inner.activity.memcpys.push(m),
            Decoded::Memset(m) => inner.activity.memsets.push(m),
            Decoded::Api(mut call) => {
                let key = (call.api, call.cbid);
                let name = match inner.api_names.get(&key) {
                    Some(&known) => known,
                    None => {
                        let name = api_name(call.api, call.cbid);
                        let known =
                            (!LEFT_OUT.contains(&base_name(&name))).then(|| inner.intern(name));
                        inner.api_names.insert(key, known);
                        known
                    }
                };
                let Some(name) = name else {
                    inner.held -= cost;
                    return;
                };
                call.name = name;
                inner.activity.api_calls.push(call);
            }
            Decoded::Sync(s) => inner.activity.syncs.push(s),
        }
    }

    /// Counts records CUPTI says it dropped.
    pub fn note_dropped(&self, n: u64) {
        lock(&self.inner).activity.dropped += n;
    }

    /// Everything held that began in `[start, end]`; the collector is left empty (names and
    /// counts too).
    pub fn take(&self, start: u64, end: u64) -> CudaActivity {
        let mut inner = std::mem::take(&mut *lock(&self.inner));
        let a = &mut inner.activity;
        let inside = |t: u64| t >= start && t <= end;
        a.kernels.retain(|k| inside(k.start));
        a.memcpys.retain(|m| inside(m.start));
        a.memsets.retain(|m| inside(m.start));
        a.api_calls.retain(|c| inside(c.start));
        a.syncs.retain(|s| inside(s.start));
        inner.activity
    }

    /// The bytes the records held take.
    pub fn held(&self) -> usize {
        lock(&self.inner).held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cupti::decode::{decode, synth};
    use crate::cupti::layout;

    fn kernel(start: u64, name_ptr: u64) -> Decoded {
        decode(&synth::kernel(&[
            ("start", start),
            ("end", start + 10),
            ("name", name_ptr),
        ]))
        .unwrap_or_else(|| unreachable!())
    }

    fn call(start: u64, cbid: u64) -> Decoded {
        let mut rec = synth::record(layout::kind::RUNTIME, 40);
        synth::set(&mut rec, layout::api::FIELDS, "start", start);
        synth::set(&mut rec, layout::api::FIELDS, "cbid", cbid);
        decode(&rec).unwrap_or_else(|| unreachable!())
    }

    fn names(p: u64) -> String {
        format!("_Z6kernel{p}v")
    }

    #[test]
    fn names_are_interned_and_the_window_filters() {
        let c = Collector::new(1 << 20);
        for (start, ptr) in [(5, 1), (10, 1), (20, 2), (30, 1), (40, 2)] {
            c.add(kernel(start, ptr), names, |_, _| unreachable!());
        }
        let mut asked = 0;
        for start in [12, 13] {
            c.add(
                call(start, 211),
                |_| unreachable!(),
                |api, cbid| {
                    asked += 1;
                    format!("{api:?}{cbid}")
                },
            );
        }
        assert_eq!(asked, 1, "a callback id's name is resolved once");
        let a = c.take(10, 30);
        let starts: Vec<u64> = a.kernels.iter().map(|k| k.start).collect();
        assert_eq!(starts, [10, 20, 30]);
        assert_eq!(a.name(a.kernels[0].name), "_Z6kernel1v");
        assert_eq!(a.name(a.kernels[1].name), "_Z6kernel2v");
        assert_eq!(a.kernels[0].name, a.kernels[2].name);
        assert_eq!(a.api_calls.len(), 2);
        assert_eq!(a.name(a.api_calls[0].name), "Runtime211");
        assert_eq!(c.held(), 0);
        assert!(
            c.take(0, u64::MAX).is_empty(),
            "taking empties the collector"
        );
    }

    #[test]
    fn frequent_getters_are_left_out_as_nsys_leaves_them_out() {
        let c = Collector::new(1 << 20);
        for (start, cbid) in [(1, 17), (2, 211), (3, 17), (4, 10)] {
            c.add(call(start, cbid), names, |_, cbid| match cbid {
                17 => "cudaGetDevice_v3020".into(),
                10 => "cudaGetLastError_v3020".into(),
                _ => "cudaLaunchKernel_v7000".into(),
            });
        }
        let a = c.take(0, u64::MAX);
        let kept: Vec<&str> = a.api_calls.iter().map(|c| a.name(c.name)).collect();
        assert_eq!(kept, ["cudaLaunchKernel_v7000"]);
        assert_eq!(a.dropped, 0);
        assert_eq!(base_name("cuLaunchKernel"), "cuLaunchKernel");
        assert_eq!(base_name("cuGetProcAddress_v2"), "cuGetProcAddress");
    }

    #[test]
    fn records_over_the_cap_are_counted_not_kept() {
        let c = Collector::new(3 * size_of::<crate::cuda::Kernel>());
        for start in 0..5 {
            c.add(kernel(start, 1), names, |_, _| String::new());
        }
        c.note_dropped(7);
        let a = c.take(0, u64::MAX);
        assert_eq!(a.kernels.len(), 3);
        assert_eq!(a.dropped, 2 + 7);
    }
}
