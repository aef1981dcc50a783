//! Generates the agent channel's gRPC code from proto/agent.proto (needs `protoc`, installed by
//! `cargo xtask setup` from Debian's protobuf-compiler).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/agent.proto");
    tonic_prost_build::configure()
        // Small per-stream buffers: see src/codec.rs.
        .codec_path("crate::codec::SmallBufferCodec")
        .compile_protos(&["proto/agent.proto"], &["proto"])?;
    Ok(())
}
