use super::{synth, *};
use crate::cupti::layout;

#[test]
fn a_kernel_record_decodes_every_field() {
    let mut rec = synth::kernel(&[
        ("start", 1_000),
        ("end", 3_500),
        ("deviceId", 1),
        ("contextId", 7),
        ("streamId", 13),
        ("gridX", 16_384),
        ("gridY", 2),
        ("gridZ", 1),
        ("blockX", 256),
        ("blockY", 1),
        ("blockZ", 1),
        ("registersPerThread", 32),
        ("staticSharedMemory", 1024),
        ("dynamicSharedMemory", 4096),
        ("localMemoryPerThread", 8),
        ("localMemoryTotal", 65_536),
        ("correlationId", 42),
        ("gridId", 99),
        ("name", 0xdead_beef),
        ("launchType", 1),
        ("sharedMemoryExecuted", 8192),
        ("graphNodeId", 5),
        ("shmemLimitConfig", 1),
    ]);
    // requested = 2 (low nibble), executed = 3 (high nibble).
    rec[layout::kernel::CACHE_CONFIG] = 0x32;
    let Some(Decoded::Kernel { kernel, name_ptr }) = decode(&rec) else {
        panic!("a kernel");
    };
    assert_eq!(name_ptr, 0xdead_beef);
    assert_eq!((kernel.start, kernel.end), (1_000, 3_500));
    assert_eq!((kernel.device, kernel.context, kernel.stream), (1, 7, 13));
    assert_eq!(kernel.grid, [16_384, 2, 1]);
    assert_eq!(kernel.block, [256, 1, 1]);
    assert_eq!(kernel.registers_per_thread, 32);
    assert_eq!(
        (kernel.static_shared_memory, kernel.dynamic_shared_memory),
        (1024, 4096)
    );
    assert_eq!(
        (kernel.local_memory_per_thread, kernel.local_memory_total),
        (8, 65_536)
    );
    assert_eq!((kernel.correlation, kernel.grid_id), (42, 99));
    assert_eq!(kernel.cache_config, 2);
    assert_eq!(
        (
            kernel.launch_type,
            kernel.shared_memory_executed,
            kernel.graph_node_id,
            kernel.shared_memory_limit_config
        ),
        (1, 8192, 5, 1)
    );
}

#[test]
fn copies_sets_calls_and_syncs_decode() {
    let mut m = synth::record(kind::MEMCPY, 96);
    for (f, v) in [
        ("copyKind", 1),
        ("srcKind", 2),
        ("dstKind", 3),
        ("bytes", 1 << 20),
        ("start", 10),
        ("end", 20),
        ("streamId", 7),
        ("correlationId", 8),
    ] {
        synth::set(&mut m, layout::memcpy::FIELDS, f, v);
    }
    let Some(Decoded::Memcpy(c)) = decode(&m) else {
        panic!("a memcpy")
    };
    assert_eq!(
        (
            c.copy_kind,
            c.src_kind,
            c.dst_kind,
            c.bytes,
            c.start,
            c.end,
            c.stream,
            c.correlation
        ),
        (1, 2, 3, 1 << 20, 10, 20, 7, 8)
    );

    let mut s = synth::record(kind::MEMSET, 88);
    for (f, v) in [
        ("value", 0xff),
        ("bytes", 4096),
        ("memoryKind", 3),
        ("start", 5),
        ("end", 6),
    ] {
        synth::set(&mut s, layout::memset::FIELDS, f, v);
    }
    let Some(Decoded::Memset(s)) = decode(&s) else {
        panic!("a memset")
    };
    assert_eq!(
        (s.value, s.bytes, s.memory_kind, s.start, s.end),
        (0xff, 4096, 3, 5, 6)
    );

    for (kind, which) in [(kind::RUNTIME, Api::Runtime), (kind::DRIVER, Api::Driver)] {
        let mut a = synth::record(kind, 40);
        for (f, v) in [
            ("cbid", 211),
            ("start", 1),
            ("end", 2),
            ("processId", 100),
            ("threadId", 101),
            ("correlationId", 3),
            ("returnValue", 0),
        ] {
            synth::set(&mut a, layout::api::FIELDS, f, v);
        }
        let Some(Decoded::Api(call)) = decode(&a) else {
            panic!("an API call")
        };
        assert_eq!(call.api, which);
        assert_eq!(
            (
                call.cbid,
                call.start,
                call.end,
                call.pid,
                call.tid,
                call.correlation
            ),
            (211, 1, 2, 100, 101, 3)
        );
    }

    let mut y = synth::record(kind::SYNCHRONIZATION, 56);
    for (f, v) in [
        ("type", 3),
        ("start", 1),
        ("end", 9),
        ("streamId", 7),
        ("cudaEventId", 4),
    ] {
        synth::set(&mut y, layout::sync::FIELDS, f, v);
    }
    let Some(Decoded::Sync(y)) = decode(&y) else {
        panic!("a sync")
    };
    assert_eq!(
        (y.sync_type, y.start, y.end, y.stream, y.event),
        (3, 1, 9, 7, 4)
    );
}

#[test]
fn short_records_and_other_kinds_are_skipped() {
    let full = synth::kernel(&[("start", 1)]);
    assert!(decode(&full[..layout::kernel::MIN_LEN - 1]).is_none());
    assert!(decode(&full[..layout::kernel::MIN_LEN]).is_some());
    assert!(
        decode(&synth::record(17, 64)).is_none(),
        "OVERHEAD is not read"
    );
    assert!(decode(&[1, 0]).is_none());
    assert!(decode(&[]).is_none());
}
