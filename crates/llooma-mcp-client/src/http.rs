//! [`McpHttp`]: the reqwest client `llooma-net` hands out, as rmcp's Streamable HTTP client,
//! with one correction.
//!
//! A server that does not know a session may refuse its request with a JSON-RPC error that
//! names no request: server-everything (the TypeScript SDK) answers HTTP 400
//! `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID
//! provided"}}` once it restarted. rmcp passes such an error on as a message, finds no request
//! it belongs to and drops it, so the request waits for its whole timeout (a minute for a
//! `tools/call`). Here it fails the request at once, marked so the caller knows the server did
//! not run it (it could not even tell which request it was). So does an error naming another
//! request: the answer to a POST is that request's.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use llooma_net::reqwest;
use llooma_net::reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, RequestId, ServerJsonRpcMessage};
use rmcp::transport::common::client_side_sse::BoxedSseResponse;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

/// Begins the error a request fails with when the server's answer to it is an error that names
/// no request (or another one).
pub(crate) const UNADDRESSED: &str = "the server refused the request without naming it: ";

/// See the module's documentation.
#[derive(Clone)]
pub(crate) struct McpHttp(pub(crate) reqwest::Client);

type Result<T> = std::result::Result<T, StreamableHttpError<reqwest::Error>>;

impl StreamableHttpClient for McpHttp {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse> {
        let request = request_id(&message);
        let response =
            self.0.post_message(uri, message, session_id, auth_header, custom_headers).await;
        addressed(request, response)
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse> {
        let request = request_id(&message);
        let response = self
            .0
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        addressed(request, response)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse> {
        let request = request_id(&message);
        let response = self
            .0
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        addressed(request, response)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<()> {
        self.0.delete_session(uri, session_id, auth_header, custom_headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxedSseResponse> {
        self.0.get_stream(uri, session_id, last_event_id, auth_header, custom_headers).await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxedSseResponse> {
        self.0
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

/// The id of a request (not of a notification or a reply).
fn request_id(message: &ClientJsonRpcMessage) -> Option<RequestId> {
    match message {
        ClientJsonRpcMessage::Request(request) => Some(request.id.clone()),
        _ => None,
    }
}

/// A request's answer, unless it is an error that names no request or another one: that fails
/// the request.
fn addressed(
    request: Option<RequestId>,
    response: Result<StreamableHttpPostResponse>,
) -> Result<StreamableHttpPostResponse> {
    match response? {
        StreamableHttpPostResponse::Json(ServerJsonRpcMessage::Error(error), _)
            if request.is_some() && error.id != request =>
        {
            Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                "{UNADDRESSED}{} (error {})",
                crate::error::excerpt(&error.error.message, 200),
                error.error.code.0
            ))))
        }
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use rmcp::ErrorData;
    use rmcp::model::ErrorCode;

    use super::*;

    fn error_for(id: Option<RequestId>) -> Result<StreamableHttpPostResponse> {
        let error = ErrorData::new(ErrorCode(-32000), "Bad Request: No valid session ID", None);
        Ok(StreamableHttpPostResponse::Json(ServerJsonRpcMessage::error(error, id), None))
    }

    #[test]
    fn an_error_naming_no_request_or_another_fails_the_request() {
        let ours = Some(RequestId::Number(7));
        for id in [None, Some(RequestId::Number(8)), Some(RequestId::String("server-error".into()))]
        {
            let Err(StreamableHttpError::UnexpectedServerResponse(text)) =
                addressed(ours.clone(), error_for(id.clone()))
            else {
                panic!("{id:?} was passed on");
            };
            assert!(text.starts_with(UNADDRESSED) && text.contains("No valid session"), "{text}");
        }
        // The request's own error is its answer; a notification awaits none.
        assert!(addressed(ours.clone(), error_for(ours)).is_ok());
        assert!(addressed(None, error_for(None)).is_ok());
    }
}
