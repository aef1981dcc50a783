//! `nsight-cloud-ui`: serves the built Cloud UI (the `nsight-cloud-ui` image's entrypoint, what
//! an NsightCloudUI Deployment runs): the files of `--dir` on `--listen`, `index.html` for the
//! app's own routes (`nsight_local::ui_server`, the same server local mode uses).

use std::{net::SocketAddr, path::PathBuf, process::ExitCode};

use clap::Parser;

#[derive(Debug, Parser)]
#[command(version, about = "Serves the Nsight Cloud UI")]
struct Args {
    /// The built UI (index.html, nsight_ui.js, nsight_ui_bg.wasm).
    #[arg(long, env = "NSIGHT_UI_DIR", default_value = "/opt/nsight/ui")]
    dir: PathBuf,
    #[arg(long, env = "NSIGHT_UI_LISTEN", default_value = "0.0.0.0:8080")]
    listen: SocketAddr,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    tracing_subscriber::fmt().with_target(false).init();
    let args = Args::parse();
    if !args.dir.join("index.html").is_file() {
        eprintln!(
            "nsight-cloud-ui: {} has no index.html (the UI build: `cargo xtask build-wasm`)",
            args.dir.display()
        );
        return ExitCode::from(2);
    }
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("nsight-cloud-ui: cannot listen on {}: {e}", args.listen);
            return ExitCode::from(2);
        }
    };
    tracing::info!(dir = %args.dir.display(), addr = %args.listen, "serving the Cloud UI");
    match axum::serve(listener, nsight_local::ui_server::router(args.dir)).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nsight-cloud-ui: {e}");
            ExitCode::FAILURE
        }
    }
}
