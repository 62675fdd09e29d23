use super::*;

/// What the table expects of one URL under the default policy (no allow-lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// An IP literal outside every blocked range.
    Public,
    /// A host name, allowed subject to resolution.
    Name,
    /// Refused: the address falls in this range.
    Blocked(&'static str),
    /// Refused: `localhost` and friends.
    Loopback,
    /// Refused: not http(s).
    Scheme,
    /// Refused: user name or password in the URL.
    Userinfo,
    /// Refused: not a URL at all (or no host).
    Invalid,
}

use Expect::*;

#[rustfmt::skip]
const TABLE: &[(&str, Expect)] = &[
    // Every blocked IPv4 range, at its start and its end.
    ("http://0.0.0.0/", Blocked("0.0.0.0/8")),
    ("http://0.255.255.255/", Blocked("0.0.0.0/8")),
    ("http://10.0.0.5/", Blocked("10.0.0.0/8")),
    ("http://10.255.255.255/", Blocked("10.0.0.0/8")),
    ("http://100.64.0.1/", Blocked("100.64.0.0/10")),
    ("http://100.127.255.254/", Blocked("100.64.0.0/10")),
    ("http://127.0.0.1/", Blocked("127.0.0.0/8")),
    ("http://127.255.255.254:8080/x", Blocked("127.0.0.0/8")),
    ("http://169.254.169.254/latest/meta-data/", Blocked("169.254.0.0/16")),
    ("http://172.16.0.1/", Blocked("172.16.0.0/12")),
    ("http://172.31.255.255/", Blocked("172.16.0.0/12")),
    ("http://192.0.0.8/", Blocked("192.0.0.0/24")),
    ("http://192.0.2.1/", Blocked("192.0.2.0/24")),
    ("http://192.88.99.1/", Blocked("192.88.99.0/24")),
    ("http://192.168.1.1/", Blocked("192.168.0.0/16")),
    ("http://198.18.0.1/", Blocked("198.18.0.0/15")),
    ("http://198.19.255.255/", Blocked("198.18.0.0/15")),
    ("http://198.51.100.7/", Blocked("198.51.100.0/24")),
    ("http://203.0.113.9/", Blocked("203.0.113.0/24")),
    ("http://224.0.0.1/", Blocked("224.0.0.0/4")),
    ("http://239.255.255.250/", Blocked("224.0.0.0/4")),
    ("http://240.0.0.1/", Blocked("240.0.0.0/4")),
    ("http://255.255.255.254/", Blocked("240.0.0.0/4")),
    ("http://255.255.255.255/", Blocked("255.255.255.255/32")),
    // Just outside the blocked IPv4 ranges.
    ("http://9.255.255.255/", Public),
    ("http://11.0.0.0/", Public),
    ("http://100.63.255.255/", Public),
    ("http://100.128.0.0/", Public),
    ("http://172.15.255.255/", Public),
    ("http://172.32.0.0/", Public),
    ("http://169.253.255.255/", Public),
    ("http://192.169.0.0/", Public),
    ("http://198.17.255.255/", Public),
    ("http://198.20.0.0/", Public),
    ("http://223.255.255.255/", Public),
    ("http://8.8.8.8/", Public),
    ("https://1.1.1.1:8443/dns-query", Public),
    // Every blocked IPv6 range.
    ("http://[::]/", Blocked("::/128")),
    ("http://[::1]/", Blocked("::1/128")),
    ("http://[0:0:0:0:0:0:0:1]:8080/", Blocked("::1/128")),
    ("http://[::7f00:1]/", Blocked("::/96")),
    ("http://[::ffff:127.0.0.1]/", Blocked("::ffff:0:0/96")),
    ("http://[::ffff:7f00:1]/", Blocked("::ffff:0:0/96")),
    ("http://[::ffff:8.8.8.8]/", Blocked("::ffff:0:0/96")),
    ("http://[64:ff9b::7f00:1]/", Blocked("64:ff9b::/96")),
    ("http://[64:ff9b::a00:5]/", Blocked("64:ff9b::/96")),
    ("http://[64:ff9b:1::1]/", Blocked("64:ff9b:1::/48")),
    ("http://[100::1]/", Blocked("100::/64")),
    ("http://[2001::1]/", Blocked("2001::/32")),
    ("http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", Blocked("2001::/32")),
    ("http://[2001:db8::1]/", Blocked("2001:db8::/32")),
    ("http://[2002:7f00:1::]/", Blocked("2002::/16")),
    ("http://[2002:a00:5::1]/", Blocked("2002::/16")),
    ("http://[fc00::1]/", Blocked("fc00::/7")),
    ("http://[fd12:3456:789a::1]/", Blocked("fc00::/7")),
    ("http://[fe80::1]/", Blocked("fe80::/10")),
    ("http://[febf::1]/", Blocked("fe80::/10")),
    ("http://[fec0::1]/", Blocked("fec0::/10")),
    ("http://[ff02::1]/", Blocked("ff00::/8")),
    // Public IPv6.
    ("http://[2606:4700:4700::1111]/", Public),
    ("https://[2a00:1450:4001:81b::200e]:443/", Public),
    ("http://[2001:1::1]/", Public),
    ("http://[64:ff9b:2::1]/", Public),
    // IPv4 written in other forms: the URL parser normalises them, so the policy sees 127.0.0.1.
    ("http://2130706433/", Blocked("127.0.0.0/8")),
    ("http://017700000001/", Blocked("127.0.0.0/8")),
    ("http://0177.0.0.1/", Blocked("127.0.0.0/8")),
    ("http://0x7f000001/", Blocked("127.0.0.0/8")),
    ("http://0x7F.0x0.0x0.0x1/", Blocked("127.0.0.0/8")),
    ("http://0x7f.1/", Blocked("127.0.0.0/8")),
    ("http://127.1/", Blocked("127.0.0.0/8")),
    ("http://127.0.1/", Blocked("127.0.0.0/8")),
    ("http://10.1/", Blocked("10.0.0.0/8")),
    ("http://167772165/", Blocked("10.0.0.0/8")),
    ("http://0xa9.0xfe.0xa9.0xfe/", Blocked("169.254.0.0/16")),
    ("http://0251.0376.0251.0376/", Blocked("169.254.0.0/16")),
    ("http://0/", Blocked("0.0.0.0/8")),
    ("http://0x08080808/", Public),
    ("http://134744072/", Public),
    // Percent-encoded and full-width spellings.
    ("http://%31%32%37.0.0.1/", Blocked("127.0.0.0/8")),
    ("http://%31%30.0.0.5/", Blocked("10.0.0.0/8")),
    ("http://\u{ff11}\u{ff12}\u{ff17}.\u{ff10}.\u{ff10}.\u{ff11}/", Blocked("127.0.0.0/8")),
    ("http://\u{ff11}\u{ff10}.0.0.5/", Blocked("10.0.0.0/8")),
    ("http://127\u{3002}0\u{3002}0\u{3002}1/", Blocked("127.0.0.0/8")),
    ("http://%6c%6f%63%61%6c%68%6f%73%74/", Loopback),
    // Zone ids are not valid in URLs: refused, never guessed at.
    ("http://[fe80::1%25eth0]/", Invalid),
    ("http://[fe80::1%eth0]/", Invalid),
    ("http://[::1%251]/", Invalid),
    // Userinfo tricks.
    ("http://user:pass@example.com/", Userinfo),
    ("http://example.com@127.0.0.1/", Userinfo),
    ("http://example.com:80@10.0.0.5/", Userinfo),
    ("http://:@example.com/", Name),
    ("http://user@8.8.8.8/", Userinfo),
    ("http://127.0.0.1#@example.com/", Blocked("127.0.0.0/8")),
    ("http://127.0.0.1?@example.com/", Blocked("127.0.0.0/8")),
    ("http://example.com\\@127.0.0.1/", Name),
    // Names that always mean this machine.
    ("http://localhost/", Loopback),
    ("http://localhost./", Loopback),
    ("http://LOCALHOST:8080/", Loopback),
    ("http://api.localhost/", Loopback),
    ("http://api.LocalHost./", Loopback),
    ("http://notlocalhost/", Name),
    ("http://localhost.example.com/", Name),
    // Upper case and ordinary names.
    ("HTTP://EXAMPLE.COM/", Name),
    ("HTTPS://Example.Com:8443/Path", Name),
    ("https://example.com/", Name),
    ("http://example.com./", Name),
    ("https://bücher.example/", Name),
    ("HTTP://127.0.0.1/", Blocked("127.0.0.0/8")),
    ("HTTP://[::FFFF:7F00:1]/", Blocked("::ffff:0:0/96")),
    // Schemes other than http(s).
    ("file:///etc/passwd", Scheme),
    ("ftp://example.com/", Scheme),
    ("gopher://127.0.0.1:6379/_INFO", Scheme),
    ("dict://127.0.0.1:11211/", Scheme),
    ("ws://example.com/", Scheme),
    ("wss://example.com/", Scheme),
    ("data:text/plain,hello", Scheme),
    ("javascript:alert(1)", Scheme),
    ("jar:http://example.com!/", Scheme),
    ("httpx://example.com/", Scheme),
    // Not URLs, or no host.
    ("", Invalid),
    ("example.com", Invalid),
    ("//example.com/", Invalid),
    ("http://", Invalid),
    ("http://1.2.3.4.5/", Invalid),
    ("http://256.0.0.1/", Invalid),
    ("http://0x100000000/", Invalid),
    ("http://[::1/", Invalid),
    ("http://exa mple.com/", Invalid),
];

fn check(policy: &OutboundPolicy, url: &str, expect: Expect) -> Result<(), String> {
    let decision = policy.decide_str(Purpose::Mcp, url);
    let ok = match (expect, &decision) {
        (Public, Decision::Allowed(Allowance::PublicAddress(_))) => true,
        (Name, Decision::Allowed(Allowance::NameToCheck)) => true,
        (Blocked(cidr), Decision::Refused { reason: Refusal::BlockedAddress { range, .. } }) => {
            range.cidr == cidr
        }
        (Loopback, Decision::Refused { reason: Refusal::LoopbackName { .. } }) => true,
        (Scheme, Decision::Refused { reason: Refusal::UnsupportedScheme { .. } }) => true,
        (Userinfo, Decision::Refused { reason: Refusal::Userinfo }) => true,
        (
            Invalid,
            Decision::Refused { reason: Refusal::Unparseable { .. } | Refusal::MissingHost },
        ) => true,
        _ => false,
    };
    if ok { Ok(()) } else { Err(format!("{url:?}: expected {expect:?}, got {decision:?}")) }
}

#[test]
fn ssrf_table_under_default_policy() {
    assert!(TABLE.len() >= 80, "the table should keep at least 80 cases");
    let policy = OutboundPolicy::public_only();
    let failures: Vec<String> =
        TABLE.iter().filter_map(|(url, expect)| check(&policy, url, *expect).err()).collect();
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_blocked_range_has_a_table_case() {
    for range in &BLOCKED_RANGES {
        assert!(
            TABLE.iter().any(|(_, e)| *e == Blocked(range.cidr)),
            "no table case for {}",
            range.cidr
        );
    }
}

#[test]
fn allow_list_is_the_only_thing_reachable() {
    let policy = OutboundPolicy::from_allow_lists(
        Some("http://127.0.0.1:8080, https://gateway.internal, http://[::1]:9000,"),
        None,
        Some("https://chat.example.com:8443"),
    )
    .unwrap();
    #[rustfmt::skip]
    let cases: &[(Purpose, &str, bool)] = &[
        (Purpose::Mcp, "http://127.0.0.1:8080/mcp", true),
        (Purpose::Mcp, "http://127.1:8080/mcp", true),
        (Purpose::Mcp, "http://127.0.0.1:8081/mcp", false),
        (Purpose::Mcp, "https://127.0.0.1:8080/mcp", false),
        (Purpose::Mcp, "https://gateway.internal/mcp", true),
        (Purpose::Mcp, "https://gateway.internal:443/mcp", true),
        (Purpose::Mcp, "https://GATEWAY.internal/", true),
        (Purpose::Mcp, "http://gateway.internal/", false),
        (Purpose::Mcp, "http://[::1]:9000/", true),
        (Purpose::Mcp, "http://[0::1]:9000/", true),
        (Purpose::Mcp, "https://example.com/", false),
        (Purpose::Mcp, "http://8.8.8.8/", false),
        (Purpose::Mcp, "http://user@127.0.0.1:8080/", false),
        (Purpose::Mcp, "ftp://127.0.0.1:8080/", false),
        // Fetch has no list: public only, the MCP list does not leak into it.
        (Purpose::Fetch, "http://127.0.0.1:8080/", false),
        (Purpose::Fetch, "https://example.com/", true),
        (Purpose::Bot, "https://chat.example.com:8443/api", true),
        (Purpose::Bot, "https://chat.example.com/api", false),
        (Purpose::Bot, "https://8.8.8.8/", false),
    ];
    for (purpose, url, allowed) in cases {
        let decision = policy.decide_str(*purpose, url);
        assert_eq!(decision.is_allowed(), *allowed, "{purpose} {url}: {decision:?}");
    }
    // Resolved addresses of an allow-listed name are reachable, private or not.
    assert!(
        policy
            .decide_resolved(Purpose::Mcp, "gateway.internal", "10.0.0.5".parse().unwrap())
            .is_allowed()
    );
    assert!(
        !policy
            .decide_resolved(Purpose::Mcp, "other.internal", "8.8.8.8".parse().unwrap())
            .is_allowed()
    );
    assert!(
        !policy
            .decide_resolved(Purpose::Fetch, "example.com", "10.0.0.5".parse().unwrap())
            .is_allowed()
    );
    assert!(
        policy
            .decide_resolved(Purpose::Fetch, "example.com", "8.8.8.8".parse().unwrap())
            .is_allowed()
    );
}

#[test]
fn refusal_messages_say_what_to_do() {
    let policy = OutboundPolicy::public_only();
    let Decision::Refused { reason } = policy.decide_str(Purpose::Mcp, "http://10.0.0.5/") else {
        panic!("10.0.0.5 must be refused");
    };
    assert_eq!(
        reason.to_string(),
        "address 10.0.0.5 is private (10.0.0.0/8); an administrator can allow it by adding its \
         origin (scheme://host:port) to MCP_ALLOWED_ORIGINS"
    );
    let Decision::Refused { reason } =
        policy.decide_resolved(Purpose::Fetch, "intranet.example", "192.168.1.4".parse().unwrap())
    else {
        panic!("192.168.1.4 must be refused");
    };
    assert!(
        reason.to_string().starts_with("host intranet.example resolves to address 192.168.1.4")
    );
    assert!(reason.to_string().contains("FETCH_ALLOWED_ORIGINS"));

    let listed =
        OutboundPolicy::from_allow_lists(None, None, Some("https://chat.example")).unwrap();
    let Decision::Refused { reason } =
        listed.decide_str(Purpose::Bot, "https://other.example:444/x")
    else {
        panic!("an unlisted origin must be refused");
    };
    assert_eq!(
        reason.to_string(),
        "origin https://other.example:444 is not in BOT_ALLOWED_ORIGINS; while \
         BOT_ALLOWED_ORIGINS is set, only the origins it lists are reachable for chat servers; \
         an administrator can add it there"
    );
}

#[test]
fn malformed_allow_list_entries_are_named() {
    #[rustfmt::skip]
    let bad = [
        "127.0.0.1:8080",
        "localhost:8080",
        "ftp://example.com",
        "http://user:pw@example.com",
        "http://example.com/mcp",
        "http://example.com?x=1",
        "http://example.com#frag",
        "https://*.example.com",
        "http://",
        "http://[::1",
    ];
    for entry in bad {
        let value = format!("http://ok.example, {entry}");
        match OutboundPolicy::from_allow_lists(None, Some(&value), None) {
            Err(PolicyError::MalformedOrigin { variable, entry: named, .. }) => {
                assert_eq!(variable, "FETCH_ALLOWED_ORIGINS");
                assert_eq!(named, entry);
            }
            other => panic!("{entry:?} should be rejected, got {other:?}"),
        }
    }
    let err = OutboundPolicy::from_allow_lists(Some("localhost:8080"), None, None).unwrap_err();
    assert!(
        err.to_string().starts_with("MCP_ALLOWED_ORIGINS entry `localhost:8080` is not an origin")
    );
}

#[test]
fn empty_allow_list_value_means_unset() {
    let policy = OutboundPolicy::from_allow_lists(Some(""), Some("  "), None).unwrap();
    assert_eq!(policy, OutboundPolicy::public_only());
    assert!(policy.allow_list(Purpose::Mcp).is_none());
}

#[test]
fn origins_normalise_default_ports() {
    let list = AllowList::parse(
        Purpose::Mcp,
        "https://a.example:443, http://b.example:80, http://c.example:8080/",
    )
    .unwrap();
    let shown: Vec<String> = list.origins().iter().map(ToString::to_string).collect();
    assert_eq!(shown, ["https://a.example", "http://b.example", "http://c.example:8080"]);
}

#[test]
fn purposes_parse_and_name_their_variables() {
    for purpose in Purpose::ALL {
        assert_eq!(purpose.as_str().parse::<Purpose>().unwrap(), purpose);
    }
    assert_eq!("MCP".parse::<Purpose>().unwrap().env_var(), "MCP_ALLOWED_ORIGINS");
    assert!("web".parse::<Purpose>().is_err());
}

#[test]
fn the_search_origin_opens_nothing_for_page_reading() {
    let policy = OutboundPolicy::public_only()
        .with_allow_list(Purpose::Search, Some("http://192.168.1.20:8888"))
        .unwrap();
    assert!(policy.decide_str(Purpose::Search, "http://192.168.1.20:8888/search?q=x").is_allowed());
    assert!(!policy.decide_str(Purpose::Search, "http://192.168.1.21:8888/").is_allowed());
    assert!(!policy.decide_str(Purpose::Search, "https://example.com/").is_allowed());
    let Decision::Refused { reason } =
        policy.decide_str(Purpose::Fetch, "http://192.168.1.20:8888/")
    else {
        panic!("page reading reached the search service's LAN address");
    };
    assert!(reason.to_string().contains("FETCH_ALLOWED_ORIGINS"), "{reason}");
}

fn local(url: &str) -> OutboundPolicy {
    let origin = Origin::of_url(&Url::parse(url).unwrap()).unwrap();
    OutboundPolicy::public_only().with_local_origin(Purpose::Provider, origin)
}

#[test]
fn a_local_origin_reaches_this_machine_and_the_lan_and_nothing_else() {
    let ollama = local("http://127.0.0.1:11434");
    assert!(ollama.decide_str(Purpose::Provider, "http://127.0.0.1:11434/v1/chat").is_allowed());
    // Another port of the same machine, another purpose, another origin: still refused.
    assert!(!ollama.decide_str(Purpose::Provider, "http://127.0.0.1:22/").is_allowed());
    assert!(!ollama.decide_str(Purpose::Mcp, "http://127.0.0.1:11434/").is_allowed());
    assert!(!ollama.decide_str(Purpose::Fetch, "http://127.0.0.1:11434/").is_allowed());
    // Public providers are still reachable beside it.
    assert!(ollama.decide_str(Purpose::Provider, "https://93.184.215.14/v1").is_allowed());

    for lan in [
        "http://10.1.2.3:8000",
        "http://192.168.1.20:1234",
        "http://100.101.1.2:8080",
        "http://[fd00::5]:8000",
        "http://[::1]:8000",
    ] {
        let policy = local(lan);
        assert!(policy.decide_str(Purpose::Provider, &format!("{lan}/v1")).is_allowed(), "{lan}");
    }
    // Never the metadata service, multicast, a mapped address or reserved space, even when an
    // administrator marks it local.
    for never in [
        "http://169.254.169.254",
        "http://[fe80::1]:80",
        "http://224.0.0.1",
        "http://[::ffff:127.0.0.1]",
        "http://240.0.0.1",
        "http://0.0.0.0:11434",
    ] {
        let policy = local(never);
        let Decision::Refused { reason } =
            policy.decide_str(Purpose::Provider, &format!("{never}/"))
        else {
            panic!("{never} was allowed as a local origin");
        };
        assert!(matches!(reason, Refusal::BlockedAddress { .. }), "{never}: {reason}");
    }
}

#[test]
fn a_local_origin_s_name_must_resolve_to_this_machine_the_lan_or_the_internet() {
    let policy = local("http://ollama.lan:11434");
    assert_eq!(
        policy.decide_str(Purpose::Provider, "http://ollama.lan:11434/v1"),
        Decision::Allowed(Allowance::NameToCheck)
    );
    let lan: IpAddr = "192.168.1.5".parse().unwrap();
    let metadata: IpAddr = "169.254.169.254".parse().unwrap();
    assert!(policy.decide_resolved(Purpose::Provider, "ollama.lan", lan).is_allowed());
    assert!(!policy.decide_resolved(Purpose::Provider, "ollama.lan", metadata).is_allowed());
    assert!(!policy.decide_resolved(Purpose::Provider, "other.lan", lan).is_allowed());
    assert!(!policy.decide_resolved(Purpose::Mcp, "ollama.lan", lan).is_allowed());
    // `localhost` itself, marked local.
    let localhost = local("http://localhost:11434");
    assert!(localhost.decide_str(Purpose::Provider, "http://localhost:11434/v1").is_allowed());
    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    assert!(localhost.decide_resolved(Purpose::Provider, "localhost", loopback).is_allowed());
    // After connecting: a LAN peer is fine for the purpose with a local origin, not for others.
    assert!(policy.allows_peer(Purpose::Provider, lan).is_ok());
    assert!(policy.allows_peer(Purpose::Provider, metadata).is_err());
    assert!(policy.allows_peer(Purpose::Mcp, lan).is_err());
}

#[test]
fn a_set_allow_list_decides_alone_over_a_local_origin() {
    let policy = local("http://127.0.0.1:11434")
        .with_allow_list(Purpose::Provider, Some("http://127.0.0.1:8090"))
        .unwrap();
    assert!(policy.decide_str(Purpose::Provider, "http://127.0.0.1:8090/v1").is_allowed());
    let Decision::Refused { reason } =
        policy.decide_str(Purpose::Provider, "http://127.0.0.1:11434/v1")
    else {
        panic!("a local origin widened a set allow-list");
    };
    assert!(reason.to_string().contains("PROVIDER_ALLOWED_ORIGINS"), "{reason}");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn arbitrary_text_never_panics(s in "\\PC*") {
            let policy = OutboundPolicy::public_only();
            let _ = policy.decide_str(Purpose::Fetch, &s);
        }

        #[test]
        fn url_shaped_text_never_panics(
            scheme in "(https?|HTTPS?|ftp|file|gopher|[a-z]{1,6})",
            userinfo in "(|[a-z:@%0-9]{0,8}@)",
            host in "(\\[[0-9a-fA-F:.%]{0,40}\\]|[0-9a-zA-Z.%\u{ff10}-\u{ff19}\u{3002}-]{0,30})",
            port in "(|:[0-9]{0,6})",
            rest in "[/?#@\\\\a-z0-9%.]{0,20}",
        ) {
            let url = format!("{scheme}://{userinfo}{host}{port}{rest}");
            let listed = OutboundPolicy::from_allow_lists(Some("http://127.0.0.1:8080"), None, None).unwrap();
            for policy in [OutboundPolicy::public_only(), listed] {
                let decision = policy.decide_str(Purpose::Mcp, &url);
                // A refusal always has words for the operator.
                if let Decision::Refused { reason } = &decision {
                    prop_assert!(!reason.to_string().is_empty());
                }
            }
        }

        #[test]
        fn every_address_is_classified_consistently(bits in any::<u32>(), bits6 in any::<u128>()) {
            let v4 = IpAddr::V4(std::net::Ipv4Addr::from(bits));
            let url = format!("http://{v4}/");
            let decision = OutboundPolicy::public_only().decide_str(Purpose::Fetch, &url);
            prop_assert_eq!(decision.is_allowed(), classify_ip(v4).is_none());
            let v6 = IpAddr::V6(std::net::Ipv6Addr::from(bits6));
            let url = format!("http://[{v6}]/");
            let decision = OutboundPolicy::public_only().decide_str(Purpose::Fetch, &url);
            prop_assert_eq!(decision.is_allowed(), classify_ip(v6).is_none());
        }
    }
}
