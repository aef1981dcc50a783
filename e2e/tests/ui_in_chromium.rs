//! Toolchain proof 3: the Leptos UI, built to Wasm with wasm-bindgen, rendered by a real
//! headless Chromium. The asserted text exists only once the Wasm code has run.

#![allow(clippy::unwrap_used, reason = "tests fail loudly on unexpected errors")]

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
    let root = index.parent().unwrap().to_path_buf();
    let addr = http::serve_dir(root);
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
        .arg(format!("http://{addr}/"))
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
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
}
