//! Generates the OTLP trace types and the TraceService server from the vendored protos
//! (proto/README.md says where they come from).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_protos(
            &["proto/opentelemetry/proto/collector/trace/v1/trace_service.proto"],
            &["proto"],
        )?;
    Ok(())
}
