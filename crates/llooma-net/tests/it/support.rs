//! Loopback servers that count what reaches them, and a scripted resolver.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use bytes::Bytes;
use llooma_net::{Lookup, Resolver};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
}

#[derive(Clone, Default)]
struct Log {
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<Seen>>>,
}

/// An HTTP server on 127.0.0.1 that counts connections and records requests.
///
/// Paths: `/` says hello; `/redirect?status=302&to=URL` redirects; `/endless` streams forever;
/// `/big` is 1 MiB with a Content-Length; `/slow` answers after 10 s.
pub struct Server {
    pub addr: SocketAddr,
    log: Log,
}

impl Server {
    pub async fn start() -> Server {
        Server::start_on("127.0.0.1:0".parse().unwrap()).await
    }

    /// On a given address (to share a port with another server on another loopback address).
    pub async fn start_on(addr: SocketAddr) -> Server {
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Log::default();
        let connections = Arc::clone(&log.connections);
        let listener = listener.tap_io(move |_tcp| {
            connections.fetch_add(1, Ordering::SeqCst);
        });
        let app = Router::new().fallback(handle).with_state(log.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Server { addr, log }
    }

    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn connections(&self) -> usize {
        self.log.connections.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.log.requests.lock().unwrap().clone()
    }
}

async fn handle(State(log): State<Log>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    log.requests.lock().unwrap().push(Seen {
        method: request.method().to_string(),
        path: path.clone(),
        headers: request.headers().clone(),
    });
    let query = request.uri().query().unwrap_or("").to_owned();
    match path.as_str() {
        "/redirect" => {
            let mut status = StatusCode::FOUND;
            let mut to = format!("/redirect?{query}");
            for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
                match k.as_ref() {
                    "status" => status = StatusCode::from_u16(v.parse().unwrap()).unwrap(),
                    "to" => to = v.into_owned(),
                    _ => {}
                }
            }
            (status, [(header::LOCATION, to)]).into_response()
        }
        "/endless" => {
            let chunk = Bytes::from(vec![b'x'; 8 * 1024]);
            let stream =
                futures::stream::repeat_with(move || Ok::<_, std::io::Error>(chunk.clone()));
            Response::new(Body::from_stream(stream))
        }
        "/big" => vec![b'x'; 1024 * 1024].into_response(),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(10)).await;
            "late".into_response()
        }
        _ => "hello".into_response(),
    }
}

/// A would-be HTTP proxy on 127.0.0.1 that counts connections and answers 502.
pub struct ProxyCounter {
    pub addr: SocketAddr,
    hits: Arc<AtomicUsize>,
}

impl ProxyCounter {
    pub async fn start() -> ProxyCounter {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&hits);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                // Read the request head first: a response before the request confuses clients.
                let mut head = [0u8; 4096];
                let _ = stream.read(&mut head).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
            }
        });
        ProxyCounter { addr, hits }
    }

    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// A resolver that gives scripted answers in turn (the last one repeats) and counts lookups.
#[derive(Debug)]
pub struct ScriptedResolver {
    answers: Mutex<VecDeque<Vec<IpAddr>>>,
    lookups: AtomicUsize,
}

impl ScriptedResolver {
    pub fn new(answers: &[&[&str]]) -> Arc<ScriptedResolver> {
        Arc::new(ScriptedResolver {
            answers: Mutex::new(
                answers
                    .iter()
                    .map(|ips| ips.iter().map(|ip| ip.parse().unwrap()).collect())
                    .collect(),
            ),
            lookups: AtomicUsize::new(0),
        })
    }

    pub fn lookups(&self) -> usize {
        self.lookups.load(Ordering::SeqCst)
    }
}

impl Resolver for ScriptedResolver {
    fn lookup<'a>(&'a self, _host: &'a str) -> Lookup<'a> {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        let mut answers = self.answers.lock().unwrap();
        let answer = if answers.len() > 1 {
            answers.pop_front().unwrap_or_default()
        } else {
            answers.front().cloned().unwrap_or_default()
        };
        Box::pin(async move { Ok(answer) })
    }
}

/// An HTTPS server on 127.0.0.1 whose certificate (for the IP address 127.0.0.1) is signed by
/// the test CA in `tests/it/tls/ca.pem`, which no system trusts. It answers "hello" to any
/// request and records the ALPN protocol each completed handshake agreed on.
pub struct TlsServer {
    pub addr: SocketAddr,
    alpn: Arc<Mutex<Vec<Option<Vec<u8>>>>>,
}

/// The test CA, for `SSL_CERT_FILE`.
pub const TEST_CA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/tls/ca.pem");

impl TlsServer {
    pub fn start() -> TlsServer {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};

        let certs = CertificateDer::pem_slice_iter(include_bytes!("tls/server.pem"))
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(include_bytes!("tls/server.key")).unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::aws_lc_rs::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let config = Arc::new(config);

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let alpn = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&alpn);
        std::thread::spawn(move || {
            for tcp in listener.incoming() {
                let Ok(tcp) = tcp else { return };
                let config = Arc::clone(&config);
                let seen = Arc::clone(&seen);
                std::thread::spawn(move || serve_tls(config, tcp, &seen));
            }
        });
        TlsServer { addr, alpn }
    }

    pub fn origin(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The ALPN protocol of each completed handshake, in order.
    pub fn alpn(&self) -> Vec<Option<Vec<u8>>> {
        self.alpn.lock().unwrap().clone()
    }
}

/// Reads a request's head off a blocking stream; false if the stream ended or failed first.
pub fn read_request_head(stream: &mut impl std::io::Read) -> bool {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    true
}

fn serve_tls(
    config: Arc<rustls::ServerConfig>,
    tcp: std::net::TcpStream,
    seen: &Mutex<Vec<Option<Vec<u8>>>>,
) {
    use std::io::Write;

    let Ok(connection) = rustls::ServerConnection::new(config) else { return };
    let mut stream = rustls::StreamOwned::new(connection, tcp);
    if !read_request_head(&mut stream) {
        return;
    }
    seen.lock().unwrap().push(stream.conn.alpn_protocol().map(<[u8]>::to_vec));
    let _ =
        stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello");
    stream.conn.send_close_notify();
    let _ = stream.flush();
}
