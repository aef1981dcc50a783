//! OTLP/gRPC: the TraceService (tonic). Thin: the [`Converter`] decides; this maps its answers
//! to gRPC status codes (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAVAILABLE) as OTLP asks.

use std::sync::Arc;

use tonic::{codec::CompressionEncoding, Request, Response, Status};

use crate::{
    converter::{Converter, IngestError},
    proto::collector::{
        trace_service_server::{TraceService, TraceServiceServer},
        ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
    },
};

/// The TraceService over a converter.
#[derive(Debug, Clone)]
pub struct Service(pub Arc<Converter>);

/// The tonic service, with the converter's message size bound; gzip accepted.
pub fn server(converter: Arc<Converter>) -> TraceServiceServer<Service> {
    let max = converter.config().max_body_bytes;
    TraceServiceServer::new(Service(converter))
        .max_decoding_message_size(max)
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip)
}

#[tonic::async_trait]
impl TraceService for Service {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        match self.0.ingest(request.into_inner()).await {
            Ok(ingested) => Ok(Response::new(ExportTraceServiceResponse {
                partial_success: (ingested.rejected > 0).then(|| ExportTracePartialSuccess {
                    rejected_spans: i64::try_from(ingested.rejected).unwrap_or(i64::MAX),
                    error_message: ingested.message.unwrap_or_default(),
                }),
            })),
            Err(IngestError::BadRequest(m)) => Err(Status::invalid_argument(m)),
            Err(e @ IngestError::Full(_)) => Err(Status::resource_exhausted(e.to_string())),
            Err(e @ IngestError::Unavailable(_)) => Err(Status::unavailable(e.to_string())),
        }
    }
}
