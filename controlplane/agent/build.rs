//! Generates the agent channel's client from the coordinator's proto/agent.proto (the one
//! definition of the wire protocol), and the OTLP TraceService client for NVTX mirroring from
//! the protos the converter vendors (controlplane/otlp/proto).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "../coordinator/proto/agent.proto";
    println!("cargo:rerun-if-changed={proto}");
    tonic_prost_build::configure()
        .build_server(false)
        .compile_protos(&[proto], &["../coordinator/proto"])?;
    let otlp = "../otlp/proto";
    println!("cargo:rerun-if-changed={otlp}");
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .compile_protos(
            &[format!(
                "{otlp}/opentelemetry/proto/collector/trace/v1/trace_service.proto"
            )],
            &[otlp.to_owned()],
        )?;
    Ok(())
}
