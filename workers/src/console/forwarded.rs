//! The client's address behind a trusted proxy (`--trusted-proxy <CIDR>`): read from the
//! `Forwarded` header (RFC 7239), or else `X-Forwarded-For`, only when the request comes
//! from a trusted proxy, for the logs and the actions' records. Tokens are compared before
//! any address is looked at ([`super::throttle`]), so a forged header wins nothing but a
//! wrong line in a log — and only through a trusted proxy, which appends the address it
//! saw.
//!
//! The chain is read from the right (the hop nearest the console): trusted proxies are
//! skipped, and the first address that is not one is the client. A hop that does not
//! parse (`unknown`, an obfuscated name) ends the walk at the hop after it. Hand-written:
//! the `for=` parameter and the list forms are a few lines, and the crates that parse
//! them bring their own HTTP types.

use std::net::{IpAddr, SocketAddr};

use axum::http::HeaderMap;
use ipnet::IpNet;

/// The client's address: `peer` itself unless it is in `trusted`, else the address the
/// forwarding headers name (its port when given, else 0).
pub(super) fn client(peer: SocketAddr, headers: &HeaderMap, trusted: &[IpNet]) -> SocketAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|net| net.contains(&ip.to_canonical()));
    if !is_trusted(peer.ip()) {
        return peer;
    }
    // `Forwarded` wins when present; its elements carry the node in `for=`.
    let chain: Vec<Option<SocketAddr>> = if headers.contains_key("forwarded") {
        elements(headers, "forwarded")
            .map(|element| for_of(element).and_then(node))
            .collect()
    } else {
        elements(headers, "x-forwarded-for").map(node).collect()
    };
    let mut client = peer;
    for hop in chain.into_iter().rev() {
        match hop {
            Some(address) if is_trusted(address.ip()) => client = address,
            Some(address) => return address,
            None => break,
        }
    }
    client
}

/// The comma-separated elements of every `name` header, in order, trimmed (a value that
/// is not visible ASCII reads as none).
fn elements<'a>(headers: &'a HeaderMap, name: &'static str) -> impl Iterator<Item = &'a str> {
    headers
        .get_all(name)
        .iter()
        .flat_map(|value| value.to_str().unwrap_or("").split(','))
        .map(str::trim)
}

/// The value of the `for` parameter of one `Forwarded` element.
fn for_of(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("for")
            .then(|| value.trim().trim_matches('"'))
    })
}

/// A node: `192.0.2.1`, `192.0.2.1:4711`, `[2001:db8::1]`, `[2001:db8::1]:4711`, or a
/// bare IPv6 address (as `X-Forwarded-For` writes them).
fn node(text: &str) -> Option<SocketAddr> {
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Some(address);
    }
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(SocketAddr::new(ip, 0));
    }
    let inside = text.strip_prefix('[')?.strip_suffix(']')?;
    inside
        .parse::<std::net::Ipv6Addr>()
        .ok()
        .map(|ip| SocketAddr::new(IpAddr::V6(ip), 0))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn nets(cidrs: &[&str]) -> Vec<IpNet> {
        cidrs.iter().map(|c| c.parse().unwrap()).collect()
    }

    const PROXY: &str = "10.0.0.5:40000";

    #[test]
    fn a_peer_that_is_not_a_trusted_proxy_is_the_client_whatever_it_claims() {
        let peer: SocketAddr = "192.0.2.9:5000".parse().unwrap();
        let claims = headers(&[("x-forwarded-for", "198.51.100.1")]);
        assert_eq!(client(peer, &claims, &nets(&["10.0.0.0/8"])), peer);
        assert_eq!(client(peer, &claims, &[]), peer);
    }

    #[test]
    fn behind_a_trusted_proxy_the_nearest_untrusted_hop_is_the_client() {
        let peer: SocketAddr = PROXY.parse().unwrap();
        let trusted = nets(&["10.0.0.0/8"]);
        // A client that forged a first hop: the proxy appended what it saw.
        let chain = headers(&[("x-forwarded-for", "1.2.3.4, 198.51.100.7, 10.0.0.9")]);
        assert_eq!(
            client(peer, &chain, &trusted),
            "198.51.100.7:0".parse().unwrap()
        );
        let forwarded = headers(&[(
            "forwarded",
            r#"for=1.2.3.4, For="[2001:db8:cafe::17]:4711";proto=https"#,
        )]);
        assert_eq!(
            client(peer, &forwarded, &trusted),
            "[2001:db8:cafe::17]:4711".parse().unwrap()
        );
        // `Forwarded` wins over `X-Forwarded-For`; several headers read in order.
        let both = headers(&[
            ("x-forwarded-for", "203.0.113.1"),
            ("forwarded", "for=203.0.113.2"),
            ("forwarded", "for=203.0.113.3"),
        ]);
        assert_eq!(
            client(peer, &both, &trusted),
            "203.0.113.3:0".parse().unwrap()
        );
    }

    #[test]
    fn an_unreadable_hop_ends_the_walk_and_no_header_leaves_the_proxy() {
        let peer: SocketAddr = PROXY.parse().unwrap();
        let trusted = nets(&["10.0.0.0/8"]);
        let unknown = headers(&[("forwarded", "for=unknown")]);
        assert_eq!(client(peer, &unknown, &trusted), peer);
        let garbage = headers(&[("x-forwarded-for", "198.51.100.7, not-an-address, 10.1.1.1")]);
        assert_eq!(
            client(peer, &garbage, &trusted),
            "10.1.1.1:0".parse().unwrap()
        );
        assert_eq!(client(peer, &HeaderMap::new(), &trusted), peer);
        // IPv4-mapped IPv6 peers are matched as IPv4.
        let mapped: SocketAddr = "[::ffff:10.0.0.5]:1".parse().unwrap();
        let one = headers(&[("x-forwarded-for", "198.51.100.8")]);
        assert_eq!(
            client(mapped, &one, &trusted),
            "198.51.100.8:0".parse().unwrap()
        );
    }
}
