//! `cargo xtask cluster up|down|status`: the one-node Kubernetes of this machine
//! (`nsight_e2e::cluster`), for people and for `cargo xtask ci`.
//!
//! `up` builds nothing: `cargo xtask setup` has built the binaries, and `cargo xtask image all`
//! the images it imports. It prints the kubeconfig to use.

use anyhow::{bail, Result};
use nsight_e2e::cluster;

pub fn run(args: &[String]) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("up") => {
            let c = cluster::up()?;
            println!("export KUBECONFIG={}", c.kubeconfig().display());
            Ok(())
        }
        Some("down") => {
            cluster::down()?;
            eprintln!("cluster down: daemons stopped, host settings restored");
            Ok(())
        }
        Some("status") => {
            print!("{}", cluster::status());
            Ok(())
        }
        Some("import") => {
            let Some(c) = cluster::current() else {
                bail!("no cluster is up: `cargo xtask cluster up`");
            };
            let n = c.import_all_images()?;
            eprintln!("imported {n} image archive(s)");
            Ok(())
        }
        _ => bail!("usage: cargo xtask cluster up|down|status|import"),
    }
}
