//! Generates the agent channel's client from the coordinator's proto/agent.proto (the one
//! definition of the wire protocol).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "../coordinator/proto/agent.proto";
    println!("cargo:rerun-if-changed={proto}");
    tonic_prost_build::configure()
        .build_server(false)
        .compile_protos(&[proto], &["../coordinator/proto"])?;
    Ok(())
}
