//! The one outbound HTTP client of Llooma. It enforces the decisions of `llooma-policy`.
//!
//! [`NetClient::send`] writes requests on HTTP/1 connections it drives in the reading task
//! (`connection.rs`: a model's stream costs no hand-off between tasks per chunk), and keeps them
//! for reuse until they sit unused too long or the server closes them. Libraries that speak HTTP
//! themselves (rmcp's Streamable HTTP transport) are given a transport written over `send`
//! (`llooma-mcp-client`'s `McpHttp`), never a client of their own.
//!
//! Where each rule is enforced, and why there:
//! - **Every destination** is decided on before any socket is opened: the URL of every hop,
//!   IP-literal hosts included. Once connected, the peer's address is checked again.
//! - **Every host name** is resolved through a checking wrapper around the [`Resolver`]: each
//!   address is checked and exactly the checked addresses are connected to, so the connection
//!   is pinned to what was checked and no second lookup can rebind it. Several addresses are
//!   raced as a browser does (Happy Eyeballs, RFC 8305), each of them checked first.
//! - **Every redirect hop** is re-checked (at most [`MAX_REDIRECTS`], never https to http), and
//!   credentials are dropped when the origin changes.
//! - **No proxy** is taken from the environment: a proxy would be the address the connector
//!   sees instead of the destination's.
//! - **Time and size**: connect and total timeouts, and a cap on the response body that also
//!   holds for bodies read chunk by chunk ([`NetResponse::chunk`]).
//! - **TLS**: every client verifies servers with the platform verifier over the system's root
//!   certificates; the configuration is built once per process and shared, so building a client
//!   does not read the certificates again.

mod check;
mod client;
mod connection;
mod error;
mod redirect;
mod request;
mod resolver;
mod tls;

pub use check::{AddressCheck, ResolvedAddress, check_address};
pub use client::{DEFAULT_IDLE_TIMEOUT, MAX_REDIRECTS, NetClient, NetClientBuilder, NetResponse};
pub use error::{NetError, RedirectProblem, RedirectRefused};
/// The request and response types of `http` (hyper's own), which requests are built from.
pub use http::{HeaderMap, Method, StatusCode, header};
pub use llooma_policy::{
    Allowance, Decision, Origin, OutboundPolicy, PolicyError, Purpose, Refusal, Url,
};
pub use request::{InvalidHeader, NetRequest};
pub use resolver::{Lookup, Resolver, SystemResolver};
