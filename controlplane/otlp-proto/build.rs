//! Generates the OTLP trace types with the TraceService client (the agent's mirroring) and
//! server (the converter) from the vendored protos (proto/README.md says where they come from).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(
            &["proto/opentelemetry/proto/collector/trace/v1/trace_service.proto"],
            &["proto"],
        )?;
    Ok(())
}
