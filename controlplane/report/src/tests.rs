//! The report's tables answer the queries written for real nsys exports.

use nsight_nvtx::dump::{Event, RegisteredString, ThreadName, Window};

use super::*;

fn event(kind: EventKind, start: u64, end: Option<u64>, text: Option<&str>) -> Event {
    Event {
        kind,
        start,
        end,
        tid: 101,
        end_tid: None,
        domain: 0,
        category: 0,
        color: None,
        text: text.map(str::to_owned),
        text_id: None,
        payload: None,
        range_id: None,
    }
}

fn sample() -> Dump {
    let mut registered = event(EventKind::PushPop, 20, Some(50), None);
    registered.text_id = Some(9);
    registered.domain = 4;
    registered.category = 2;
    registered.color = Some(0xff00_ff00);
    registered.payload = Some(Payload::I64(-5));
    let mut domain = event(EventKind::DomainCreate, 10, None, Some("mydomain"));
    domain.domain = 4;
    let mut se = event(EventKind::StartEnd, 30, Some(90), Some("io"));
    se.range_id = Some(77);
    se.end_tid = Some(102);
    Dump {
        cuda: None,
        pid: 100,
        process_name: "app".into(),
        window: Window {
            start_ns: 5,
            end_ns: 100,
            utc_start_ns: 1_779_782_330_176_752_435,
        },
        strings: vec![RegisteredString {
            id: 9,
            domain: 4,
            value: "step".into(),
        }],
        thread_names: vec![ThreadName {
            tid: 101,
            name: "main".into(),
        }],
        events: vec![
            domain,
            event(EventKind::PushPop, 10, Some(60), Some("outer")),
            registered,
            se,
            event(EventKind::Mark, 40, None, Some("here")),
            event(EventKind::PushPop, 95, None, Some("open")),
        ],
    }
}

fn meta() -> ReportMeta {
    ReportMeta {
        export_time_utc: "2026-01-01T00:00:00".into(),
        host: "h".into(),
        output_file: "r.sqlite".into(),
    }
}

fn report() -> Connection {
    let mut conn = Connection::open_in_memory().unwrap();
    write(&mut conn, &sample(), &meta()).unwrap();
    conn
}

#[test]
fn ranges_resolve_names_domains_and_durations_like_an_nsys_export() {
    let conn = report();
    // The shape of the nvtx_sum recipe's query: text from StringIds else `text`, the domain's
    // name from the domain-create event of the same PID, duration end - start.
    let mut stmt = conn
        .prepare(
            "SELECT coalesce(d.text || ':', '') || coalesce(s.value, e.text), e.eventType, e.end - e.start
             FROM NVTX_EVENTS AS e LEFT JOIN StringIds AS s ON s.id = e.textId
             LEFT JOIN NVTX_EVENTS AS d ON d.eventType = 75 AND d.domainId = e.domainId
               AND d.globalTid / 0x1000000 % 0x1000000 = e.globalTid / 0x1000000 % 0x1000000
             WHERE e.eventType IN (59, 60) AND e.end IS NOT NULL ORDER BY e.start",
        )
        .unwrap();
    let rows: Vec<(String, i64, i64)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        rows,
        [
            ("outer".to_string(), 59, 50),
            ("mydomain:step".to_string(), 59, 30),
            ("io".to_string(), 60, 60)
        ]
    );
}

#[test]
fn columns_carry_payload_color_category_and_thread_ids() {
    let conn = report();
    let (category, color, int64, gtid, pid, tid): (i64, i64, i64, i64, i64, i64) = conn
        .query_row(
            "SELECT category, color, int64Value, globalTid, globalTid / 0x1000000 % 0x1000000,
             globalTid % 0x1000000 FROM NVTX_EVENTS WHERE textId IS NOT NULL",
            [],
            |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                ))
            },
        )
        .unwrap();
    assert_eq!(
        (category, color, int64, pid, tid),
        (2, 0xff00_ff00, -5, 100, 101)
    );
    assert_eq!(gtid, global_tid(100, 101));
    let (range_id, end_gtid): (i64, i64) = conn
        .query_row(
            "SELECT rangeId, endGlobalTid FROM NVTX_EVENTS WHERE eventType = 60",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((range_id, end_gtid), (77, global_tid(100, 102)));
    let open: Option<i64> = conn
        .query_row("SELECT end FROM NVTX_EVENTS WHERE text = 'open'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(open, None);
}

#[test]
fn side_tables_name_the_process_thread_session_and_event_types() {
    let conn = report();
    let thread: String = conn
        .query_row(
            "SELECT s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId WHERE t.globalTid = ?1",
            [global_tid(100, 101)],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(thread, "main");
    let (gpid, name): (i64, String) = conn
        .query_row(
            "SELECT globalPid, name FROM PROCESSES WHERE pid = 100",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        (gpid / 0x100_0000 % 0x100_0000, name.as_str()),
        (100, "app")
    );
    let (utc, text, clock): (i64, String, i64) = conn
        .query_row(
            "SELECT utcEpochNs, utcTime, systemClockNs FROM TARGET_INFO_SESSION_START_TIME",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(
        (utc, text.as_str(), clock),
        (1_779_782_330_176_752_435, "2026-05-26T07:58:50", 5)
    );
    let names: Vec<String> = conn
        .prepare("SELECT name FROM ENUM_NSYS_EVENT_TYPE WHERE id IN (34, 59, 60, 75) ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        names,
        [
            "NvtxMark",
            "NvtxPushPopRange",
            "NvtxStartEndRange",
            "NvtxDomainCreate"
        ]
    );
    let schema: String = conn
        .query_row(
            "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(schema, SCHEMA_VERSION);
}

#[test]
fn writing_a_file_replaces_an_old_one() {
    let dir = std::env::temp_dir().join(format!("nsight-report-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("r.sqlite");
    std::fs::write(&path, b"not a database").unwrap();
    write_file(&sample(), &meta(), &path).unwrap();
    let conn = Connection::open(&path).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(*) FROM NVTX_EVENTS", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 6);
    std::fs::remove_dir_all(&dir).unwrap();
}
