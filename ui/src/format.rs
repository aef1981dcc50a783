//! How times and sizes are written on the pages (UTC, so that what two people in different
//! places see matches the CLI's output and the logs).

/// A unix-milliseconds time as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc(ms: u64) -> String {
    let iso: String = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(ms as f64))
        .to_iso_string()
        .into();
    // 2024-05-01T12:00:00.000Z -> 2024-05-01 12:00:00 UTC
    match (iso.get(..10), iso.get(11..19)) {
        (Some(day), Some(time)) => format!("{day} {time} UTC"),
        _ => iso,
    }
}

/// An optional time, or a dash.
pub fn utc_or_dash(ms: Option<u64>) -> String {
    ms.map(utc).unwrap_or_else(|| "–".to_owned())
}

/// A duration in milliseconds as `1.2 s`, `3 min 4 s`, `2 h 5 min`.
pub fn duration(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..=59 => format!("{:.1} s", ms as f64 / 1000.0),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// A byte count as `512 B`, `1.5 KiB`, `2.0 MiB`, `3.1 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
