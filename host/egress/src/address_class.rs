//! Which addresses count as public: the only ones a call reaches without
//! the operator naming them.
//!
//! Design decisions:
//!
//! - **Classified on the address connected to**, never on a name: a name
//!   that resolves to the loopback (DNS rebinding's end state) is refused on
//!   its address, and an IPv6 form that carries an IPv4 address (mapped,
//!   compatible, NAT64, 6to4) is judged by the IPv4 address it reaches.
//! - **The ranges are not the whole answer.** An address of this machine
//!   is never public, whatever its range (a service bound to `0.0.0.0` is
//!   reached through the host's public address as well as through its
//!   loopback): the proxy asks which addresses the host holds at each
//!   connection ([`AddressClass::ThisHost`]).
//! - **Documentation ranges are not public.** 192.0.2.0/24,
//!   198.51.100.0/24, 203.0.113.0/24 and 2001:db8::/32 are reserved for
//!   examples, and some machines are numbered from them all the same (a
//!   virtual machine's own network, its gateway). An operator who runs a
//!   lab there declares them public (`Settings::public_ranges`).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

/// What kind of address an IP address is, as the proxy decides reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AddressClass {
    /// Reachable by any call whose grant names the host.
    Public,
    /// An address the host itself holds, on any interface.
    ThisHost,
    /// 127.0.0.0/8, ::1: the operator's own machine.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16 (RFC 1918): an operator's network.
    Private,
    /// 100.64.0.0/10: carrier-grade NAT, a provider's network.
    SharedAddressSpace,
    /// 169.254/16 (the cloud metadata endpoint among them), fe80::/10.
    LinkLocal,
    /// fc00::/7: IPv6's private ranges.
    UniqueLocal,
    /// 224/4, ff00::/8.
    Multicast,
    /// 0.0.0.0, ::, and the rest of 0/8 (the machine itself, to Linux).
    Unspecified,
    /// 255.255.255.255.
    Broadcast,
    /// 192.0.2/24, 198.51.100/24, 203.0.113/24, 2001:db8::/32.
    Documentation,
    /// Every other range set aside from the public internet (240/4,
    /// 192.0.0/24, 198.18/15, 2001::/23 but its public parts, ...).
    Reserved,
}

impl AddressClass {
    /// How a refusal names it: "a loopback address".
    pub fn phrase(self) -> &'static str {
        match self {
            AddressClass::Public => "a public address",
            AddressClass::ThisHost => "an address of this machine",
            AddressClass::Loopback => "a loopback address",
            AddressClass::Private => "a private (RFC 1918) address",
            AddressClass::SharedAddressSpace => "a carrier-grade NAT address",
            AddressClass::LinkLocal => "a link-local address (the cloud metadata endpoint's range)",
            AddressClass::UniqueLocal => "a unique local IPv6 address",
            AddressClass::Multicast => "a multicast address",
            AddressClass::Unspecified => "an unspecified address",
            AddressClass::Broadcast => "the broadcast address",
            AddressClass::Documentation => {
                "a documentation address (not public unless the operator's public_ranges says so)"
            }
            AddressClass::Reserved => "a reserved address",
        }
    }
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.phrase())
    }
}

/// The class of `ip` (an IPv6 form carrying an IPv4 address counts as
/// that IPv4 address).
pub fn classify(ip: IpAddr) -> AddressClass {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

/// The IPv4 address an IPv6 address stands for, in the forms a connect
/// reaches one through: mapped (`::ffff:a.b.c.d`), compatible (`::a.b.c.d`,
/// deprecated but still routed by some stacks), NAT64 (`64:ff9b::/96`) and
/// 6to4 (`2002:AABB:CCDD::/48`).
pub fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        // `::` and `::1` are IPv6's own unspecified and loopback.
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, _, _] => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

fn classify_v4(ip: Ipv4Addr) -> AddressClass {
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        (127, ..) => AddressClass::Loopback,
        (0, ..) => AddressClass::Unspecified,
        (10, ..) | (172, 16..=31, _) | (192, 168, _) => AddressClass::Private,
        (100, 64..=127, _) => AddressClass::SharedAddressSpace,
        (169, 254, _) => AddressClass::LinkLocal,
        (224..=239, ..) => AddressClass::Multicast,
        (255, 255, 255) if ip == Ipv4Addr::BROADCAST => AddressClass::Broadcast,
        (240..=255, ..) => AddressClass::Reserved,
        // IETF protocol assignments (DS-Lite, NAT64 discovery), 6to4
        // relays, benchmarking.
        (192, 0, 0) | (192, 88, 99) | (198, 18..=19, _) => AddressClass::Reserved,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => AddressClass::Documentation,
        _ => AddressClass::Public,
    }
}

fn classify_v6(ip: Ipv6Addr) -> AddressClass {
    let s = ip.segments();
    if ip.is_loopback() {
        AddressClass::Loopback
    } else if ip.is_unspecified() {
        AddressClass::Unspecified
    } else if s[0] & 0xffc0 == 0xfe80 {
        AddressClass::LinkLocal
    } else if s[0] & 0xfe00 == 0xfc00 {
        AddressClass::UniqueLocal
    } else if s[0] & 0xff00 == 0xff00 {
        AddressClass::Multicast
    } else if s[0] == 0x2001 && s[1] == 0x0db8 {
        AddressClass::Documentation
    } else if s[0] & 0xe000 != 0x2000 {
        // Outside 2000::/3, the global unicast space: 100::/64 discard,
        // fec0::/10 site-local, and everything unassigned.
        AddressClass::Reserved
    } else if s[0] == 0x2001 && s[1] < 0x0200 {
        // 2001::/23, IETF protocol assignments (Teredo, ORCHIDv2, ...).
        AddressClass::Reserved
    } else {
        AddressClass::Public
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(text: &str) -> AddressClass {
        classify(text.parse().unwrap())
    }

    /// Every form of the operator's own machine and networks, and the
    /// metadata endpoint, in IPv4 and in each IPv6 spelling that reaches
    /// IPv4.
    #[test]
    fn nothing_of_the_operators_is_public() {
        for (address, expected) in [
            ("127.0.0.1", AddressClass::Loopback),
            ("127.1.2.3", AddressClass::Loopback),
            ("::1", AddressClass::Loopback),
            ("::ffff:127.0.0.1", AddressClass::Loopback),
            ("::127.0.0.1", AddressClass::Loopback),
            ("64:ff9b::7f00:1", AddressClass::Loopback),
            ("2002:7f00:1::", AddressClass::Loopback),
            ("0.0.0.0", AddressClass::Unspecified),
            ("0.1.2.3", AddressClass::Unspecified),
            ("::", AddressClass::Unspecified),
            ("::ffff:0.0.0.0", AddressClass::Unspecified),
            ("10.0.0.1", AddressClass::Private),
            ("172.16.0.1", AddressClass::Private),
            ("172.31.255.255", AddressClass::Private),
            ("192.168.1.1", AddressClass::Private),
            ("::ffff:10.1.1.1", AddressClass::Private),
            ("100.64.0.1", AddressClass::SharedAddressSpace),
            ("100.127.255.255", AddressClass::SharedAddressSpace),
            ("169.254.169.254", AddressClass::LinkLocal),
            ("::ffff:169.254.169.254", AddressClass::LinkLocal),
            ("fe80::1", AddressClass::LinkLocal),
            ("fd00:ec2::254", AddressClass::UniqueLocal),
            ("fc00::1", AddressClass::UniqueLocal),
            ("224.0.0.1", AddressClass::Multicast),
            ("ff02::1", AddressClass::Multicast),
            ("255.255.255.255", AddressClass::Broadcast),
            ("240.0.0.1", AddressClass::Reserved),
            ("192.0.0.8", AddressClass::Reserved),
            ("198.18.0.1", AddressClass::Reserved),
            ("fec0::1", AddressClass::Reserved),
            ("100::1", AddressClass::Reserved),
            ("2001::1", AddressClass::Reserved),
            ("192.0.2.1", AddressClass::Documentation),
            ("198.51.100.7", AddressClass::Documentation),
            ("203.0.113.9", AddressClass::Documentation),
            ("2001:db8::1", AddressClass::Documentation),
        ] {
            assert_eq!(class(address), expected, "{address}");
        }
    }

    #[test]
    fn public_addresses_are_public() {
        for address in [
            "1.1.1.1",
            "8.8.8.8",
            "172.15.255.255",
            "172.32.0.0",
            "100.63.255.255",
            "100.128.0.0",
            "169.253.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "2a00:1450::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert_eq!(class(address), AddressClass::Public, "{address}");
        }
    }
}
