//! The one outbound HTTP client of Llooma. It enforces the decisions of `llooma-policy`.
//!
//! Two transports, one policy: [`NetClient::send`] writes requests on HTTP/1 connections it
//! drives in the reading task (`connection.rs`: a model's stream costs no hand-off between
//! tasks per chunk), and [`NetClient::reqwest_client`] is a reqwest client for libraries (rmcp).
//!
//! Where each rule is enforced, and why there:
//! - **Every destination** is decided on before any socket is opened: for `send`, the URL of
//!   every hop (IP-literal hosts included); for the reqwest client, a connector layer, the only
//!   place that sees IP-literal hosts there (reqwest never asks a resolver about them). Once
//!   connected, the peer's address is checked again.
//! - **Every host name** is resolved through a checking wrapper around the [`Resolver`]: each
//!   address is checked and exactly the checked addresses go to the connector, so the
//!   connection is pinned to what was checked and no second lookup can rebind it.
//! - **Every redirect hop** is re-checked (at most [`MAX_REDIRECTS`], never https to http).
//! - **No proxy** is taken from the environment: a proxy would make the connector see the
//!   proxy's address instead of the destination's.
//! - **Time and size**: connect and total timeouts, and a cap on the response body that also
//!   holds for bodies read chunk by chunk ([`NetResponse::chunk`]).
//! - **TLS**: every client verifies servers with the platform verifier over the system's root
//!   certificates, as reqwest does by default; the configuration is built once per process and
//!   shared, so building a client does not read the certificates again.
//!
//! Nothing else in the workspace should build a `reqwest::Client`; get one from
//! [`NetClient::reqwest_client`] when a library (rmcp) needs the raw type.

mod check;
mod client;
mod connection;
mod error;
mod guard;
mod redirect;
mod resolver;
mod same_task;
mod tls;

pub use check::{AddressCheck, ResolvedAddress, check_address};
pub use client::{MAX_REDIRECTS, NetClient, NetClientBuilder, NetResponse};
pub use error::{NetError, PolicyRefusal, RedirectProblem, RedirectRefused};
pub use llooma_policy::{Decision, Origin, OutboundPolicy, PolicyError, Purpose, Refusal, Url};
/// The HTTP library's types, for crates that hand [`NetClient::reqwest_client`] to a library (rmcp)
/// and classify its errors. Building a `Client` from it anywhere else is still forbidden: the
/// layering check refuses a direct dependency on reqwest outside this crate.
pub use reqwest;
pub use resolver::{Lookup, Resolver, SystemResolver};
pub use same_task::SameTask;
