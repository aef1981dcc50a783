//! Toolchain proof 3: the Leptos UI, built to Wasm with wasm-bindgen, rendered by a real
//! headless Chromium. The asserted text exists only once the Wasm code has run. The sessions
//! page fetches `/coordinator/v1/sessions`, `/status` and `/tags` from the same
//! origin; here fixture files answer them (the coordinator's wire form), so the rows prove
//! fetch, decode (the contract's types) and render in a real browser without any server. The whole flow against
//! the real platform is `ui_platform.rs`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests fail loudly on unexpected errors"
)]

use std::process::Command;

use nsight_e2e::{chromium_bin, http, wasm_artifact, TempDir};

#[test]
fn chromium_renders_the_wasm_ui() {
    let index = wasm_artifact("ui/index.html");
    let html = std::fs::read_to_string(&index).unwrap();
    assert!(
        !html.contains("running in WebAssembly"),
        "the asserted text must come from Wasm, not from index.html"
    );
    let site = TempDir::new("ui-site");
    for entry in std::fs::read_dir(index.parent().unwrap()).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), site.path().join(entry.file_name())).unwrap();
        }
    }
    let api = site.path().join("coordinator/v1");
    std::fs::create_dir_all(&api).unwrap();
    std::fs::write(api.join("sessions"), SESSIONS).unwrap();
    std::fs::write(api.join("status"), STATUS).unwrap();
    std::fs::write(api.join("tags"), TAGS).unwrap();
    let addr = http::serve_dir(site.path().to_path_buf());
    let dom = dump_dom(&format!("http://{addr}/"));
    assert!(
        dom.contains(r#"data-testid="product">Nsight Cloud</h1>"#),
        "header not rendered; DOM:\n{dom}"
    );
    assert!(
        dom.contains(&format!(
            "UI {} running in WebAssembly",
            env!("CARGO_PKG_VERSION")
        )),
        "Wasm-rendered text missing; DOM:\n{dom}"
    );
    assert!(
        dom.contains(r#"data-session="67e55044-10b1-426f-9247-bb680e5fe0c8""#)
            && dom.contains("baseline run")
            && dom.contains("2024-05-01 12:00:00 UTC"),
        "the sessions page did not list the session; DOM:\n{dom}"
    );
    assert!(
        dom.contains("2 of 3 agent(s) connected") && dom.contains("No open session"),
        "the tag's status is not shown; DOM:\n{dom}"
    );
    // The tag selector offers the tags that have sessions.
    assert!(
        dom.contains(r#"<option value="baseline-tag""#),
        "the tag selector lacks the session's tag; DOM:\n{dom}"
    );

    // A hand-edited link: an invalid tag falls back to `default`; a session and a job that do
    // not exist, and an analysis service that is not there, each give an error on the page (the
    // app keeps running: the header and the tabs are still drawn).
    let bad = dump_dom(&format!(
        "http://{addr}/?tag=no%20spaces%21&session=not-a-uuid"
    ));
    assert!(bad.contains("Tag default</h2>"), "DOM:\n{bad}");
    assert!(
        bad.contains(r#"data-testid="detail-error""#) && bad.contains("Cannot read the session"),
        "the missing session is not reported; DOM:\n{bad}"
    );
    let analysis = dump_dom(&format!("http://{addr}/?tab=analysis&job=nope"));
    assert!(
        analysis.contains(r#"data-testid="recipes-error""#)
            && analysis.contains(r#"data-testid="job-error""#)
            && analysis.contains(r#"data-testid="tab-analysis" aria-current="page""#),
        "the analysis tab's errors are not shown; DOM:\n{analysis}"
    );
}

/// The DOM of `url` once headless Chromium has run its scripts.
fn dump_dom(url: &str) -> String {
    let profile = TempDir::new("chromium-profile");
    let out = Command::new(chromium_bin())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--virtual-time-budget=15000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `GET /coordinator/v1/sessions` as the coordinator answers it (the fixture server ignores
/// the query, so the page's `?tag=` listing gets both).
const SESSIONS: &str = r#"{"sessions":[{"id":"67e55044-10b1-426f-9247-bb680e5fe0c8","tag":"default","title":"baseline run","state":"ended","createdAt":1714564800000,"endedAt":1714564900000,"collections":2},{"id":"11e55044-10b1-426f-9247-bb680e5fe0c8","tag":"baseline-tag","title":null,"state":"open","createdAt":1714564800000,"endedAt":null,"collections":0}]}"#;

/// `GET /coordinator/v1/tags`: the tag selector's list.
const TAGS: &str = r#"{"tags":[{"tag":"baseline-tag","sessions":1,"open":true},{"tag":"default","sessions":1,"open":false}]}"#;

/// `GET /coordinator/v1/status?tag=default`.
const STATUS: &str = r#"{"tag":"default","agents":[],"agentCounts":{"known":3,"connected":2},"activeSession":null,"activeCollection":null}"#;
