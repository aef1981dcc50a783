//! The OTLP converter: receives OpenTelemetry spans (OTLP/HTTP protobuf and OTLP/gRPC), buffers
//! them on disk per session and collection, and at collection stop writes them as a report in
//! the Nsight Systems SQLite export schema (the agent's writer, `nsight-report`) into storage,
//! under the agent's key layout, so recipes and the timeline run on it as on an agent's report.
//!
//! ```text
//!  OTLP/HTTP (protobuf, JSON), OTLP/gRPC ──> http / grpc ──> Converter::ingest ──group::split──> buffer (fsync) ──> ack
//!  POST .../stop, late spans ──> Converter::flush ──> buffer::seal ──> convert::dumps
//!      ──> nsight_report::write ──> Uploader (spool, upload) ──> <tag>/<session>/<collection>/...
//! ```
//! Pure parts: [`attributes`], [`group`], [`convert`], [`json`] (OTLP/JSON), [`buffer::admit`],
//! [`log`]'s framing.
//! I/O: [`buffer`] (files), [`converter`] (storage), [`http`] and [`grpc`] (servers).

pub mod attributes;
pub mod buffer;
pub mod convert;
pub mod converter;
pub mod group;
pub mod grpc;
pub mod http;
pub mod json;
pub mod log;
pub mod proto;
