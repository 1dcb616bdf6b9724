//! The OTLP exporter's HTTP client: one blocking request per export, on the
//! SDK's own export threads.
//!
//! Design decision: **blocking, over ureq**, rather than the exporter's
//! default (reqwest, a second HTTP and TLS stack) or its hyper client
//! (which needs a Tokio runtime on the exporting thread). The SDK's batch
//! span processor and periodic metric reader each export from a thread of
//! their own and wait on the export there, so a blocking request stalls
//! nothing of the host; ureq (rustls with ring, the web PKI roots) is
//! already what the `fetch` module builds.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

/// The most bytes of a collector's answer read (OTLP answers are small).
const MAX_RESPONSE_BYTES: u64 = 1024 * 1024;

/// A blocking HTTP client for the OTLP exporters.
#[derive(Debug, Clone)]
pub(crate) struct BlockingHttp {
    agent: ureq::Agent,
}

impl BlockingHttp {
    /// A client whose every request ends within `timeout`, answered or not.
    pub(crate) fn new(timeout: Duration) -> BlockingHttp {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            // A collector's 4xx/5xx is an answer the exporter reads (its
            // retry policy decides), not a transport error.
            .http_status_as_error(false)
            .build();
        BlockingHttp {
            agent: ureq::Agent::new_with_config(config),
        }
    }

    fn send(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let request = ureq::http::Request::from_parts(parts, body.to_vec());
        let mut response = self.agent.run(request)?;
        let status = response.status();
        let body = response
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE_BYTES)
            .read_to_vec()?;
        Ok(Response::builder().status(status).body(Bytes::from(body))?)
    }
}

// `HttpClient` is an `async_trait`; this is its expansion, written out so
// the host needs no macro crate for one method.
impl HttpClient for BlockingHttp {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.send(request) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};

    /// One request to a listener on the loopback: what it sent arrives
    /// whole, and the answer's status and body come back.
    #[test]
    fn a_request_is_sent_whole_and_its_answer_read() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            let mut first = String::new();
            reader.read_line(&mut first).unwrap();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" {
                    break;
                }
                if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let mut stream = stream;
            stream
                .write_all(
                    b"HTTP/1.1 202 Accepted\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                )
                .unwrap();
            (first, body)
        });
        let client = BlockingHttp::new(Duration::from_secs(10));
        let request = Request::post(format!("http://127.0.0.1:{port}/v1/traces"))
            .header("content-type", "application/x-protobuf")
            .body(Bytes::from_static(b"\x0a\x00payload"))
            .unwrap();
        let response = client.send(request).unwrap();
        assert_eq!(response.status(), 202);
        assert_eq!(response.body(), &Bytes::from_static(b"ok"));
        let (first, body) = server.join().unwrap();
        assert!(first.starts_with("POST /v1/traces HTTP/1.1"), "{first}");
        assert_eq!(body, b"\x0a\x00payload");
    }
}
