//! The OTLP trace types and the TraceService server stub (crate `nsight-otlp-proto`, shared with
//! the agent's mirroring).

pub use nsight_otlp_proto::*;
