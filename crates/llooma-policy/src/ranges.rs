//! The address ranges no outbound connection may reach unless an allow-list says so.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// One blocked range, with words for messages.
#[derive(Debug, PartialEq, Eq)]
pub struct BlockedRange {
    /// The range in CIDR notation, e.g. `10.0.0.0/8` (always `net`, a test says so).
    pub cidr: &'static str,
    /// Completes "address X is ...", e.g. `private`.
    pub description: &'static str,
    net: IpNet,
}

const fn v4(
    a: u8,
    b: u8,
    c: u8,
    d: u8,
    prefix: u8,
    cidr: &'static str,
    description: &'static str,
) -> BlockedRange {
    let net = Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), prefix);
    BlockedRange { cidr, description, net: IpNet::V4(net) }
}

const fn v6(
    segments: [u16; 8],
    prefix: u8,
    cidr: &'static str,
    description: &'static str,
) -> BlockedRange {
    let [a, b, c, d, e, f, g, h] = segments;
    let net = Ipv6Net::new_assert(Ipv6Addr::new(a, b, c, d, e, f, g, h), prefix);
    BlockedRange { cidr, description, net: IpNet::V6(net) }
}

/// Every blocked range. More specific ranges come before the ranges that contain them, so the
/// first match gives the most precise words (`::1` is "loopback", not "IPv4-compatible").
pub static BLOCKED_RANGES: [BlockedRange; 30] = [
    v4(0, 0, 0, 0, 8, "0.0.0.0/8", "in \"this network\", which no host should be reached at"),
    v4(10, 0, 0, 0, 8, "10.0.0.0/8", "private"),
    v4(100, 64, 0, 0, 10, "100.64.0.0/10", "in the shared address space of carrier-grade NAT"),
    v4(127, 0, 0, 0, 8, "127.0.0.0/8", "loopback (this machine)"),
    v4(169, 254, 0, 0, 16, "169.254.0.0/16", "link-local (where cloud metadata services live)"),
    v4(172, 16, 0, 0, 12, "172.16.0.0/12", "private"),
    v4(192, 0, 0, 0, 24, "192.0.0.0/24", "reserved for IETF protocol assignments"),
    v4(192, 0, 2, 0, 24, "192.0.2.0/24", "reserved for documentation"),
    v4(192, 88, 99, 0, 24, "192.88.99.0/24", "a 6to4 relay anycast address"),
    v4(192, 168, 0, 0, 16, "192.168.0.0/16", "private"),
    v4(198, 18, 0, 0, 15, "198.18.0.0/15", "reserved for benchmarking"),
    v4(198, 51, 100, 0, 24, "198.51.100.0/24", "reserved for documentation"),
    v4(203, 0, 113, 0, 24, "203.0.113.0/24", "reserved for documentation"),
    v4(224, 0, 0, 0, 4, "224.0.0.0/4", "multicast"),
    v4(255, 255, 255, 255, 32, "255.255.255.255/32", "the broadcast address"),
    v4(240, 0, 0, 0, 4, "240.0.0.0/4", "reserved"),
    v6([0, 0, 0, 0, 0, 0, 0, 0], 128, "::/128", "the unspecified address"),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, "::1/128", "loopback (this machine)"),
    v6([0, 0, 0, 0, 0, 0, 0, 0], 96, "::/96", "an IPv4-compatible IPv6 address (deprecated)"),
    v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96, "::ffff:0:0/96", "an IPv4-mapped IPv6 address"),
    v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96, "64:ff9b::/96", "a NAT64 address"),
    v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, "64:ff9b:1::/48", "a local-use NAT64 address"),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "100::/64", "discard-only"),
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, "2001:db8::/32", "reserved for documentation"),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, "2001::/32", "a Teredo address"),
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "2002::/16", "a 6to4 address"),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "fc00::/7", "a unique local (private) address"),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "fe80::/10", "link-local"),
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "fec0::/10", "site-local (deprecated)"),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "ff00::/8", "multicast"),
];

/// The ranges of this machine and of a local network: what a service an administrator runs
/// beside Llooma (an Ollama on the same host, a vLLM on the LAN, one over a Tailscale address)
/// listens on. A [local origin](crate::OutboundPolicy::with_local_origin) may reach these and no
/// other blocked range: never link-local (where cloud metadata services answer), multicast,
/// reserved space or the IPv6 forms that carry an IPv4 address.
const LOCAL_NETWORK: [&str; 7] = [
    "127.0.0.0/8",
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "100.64.0.0/10",
    "::1/128",
    "fc00::/7",
];

impl BlockedRange {
    /// Whether this range is this machine or a local network (see [`LOCAL_NETWORK`]).
    pub fn is_local_network(&self) -> bool {
        LOCAL_NETWORK.contains(&self.cidr)
    }

    fn contains(&self, ip: IpAddr) -> bool {
        // An IPv4 range never contains an IPv6 address, nor the reverse.
        self.net.contains(&ip)
    }
}

/// The blocked range `ip` falls in, or `None` for a public address.
///
/// IPv6 forms that embed an IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) are blocked
/// as whole ranges rather than judged by the embedded address: a server has no business being
/// reached through them, and judging the embedded part would depend on how the host's network
/// stack translates them.
pub fn classify_ip(ip: IpAddr) -> Option<&'static BlockedRange> {
    BLOCKED_RANGES.iter().find(|range| range.contains(ip))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_range_s_words_name_the_range_it_is() {
        for range in &BLOCKED_RANGES {
            assert_eq!(range.cidr.parse::<IpNet>(), Ok(range.net), "{}", range.cidr);
            // Written as its network address: nothing below the prefix is set.
            assert_eq!(range.net, range.net.trunc(), "{}", range.cidr);
        }
        for local in LOCAL_NETWORK {
            assert!(BLOCKED_RANGES.iter().any(|range| range.cidr == local), "{local}");
        }
    }
}
