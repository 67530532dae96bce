"""Kubernetes' CEL IP and CIDR libraries (k8s.io/apiserver
pkg/cel/library/ip.go and cidr.go at v0.35.7), declared with the API
server's overload ids:

    ip(string) -> net.IP            isIP(string) -> bool      ip.isCanonical(string) -> bool
    <IP>.family() -> int            <IP>.isUnspecified()      <IP>.isLoopback()
    <IP>.isLinkLocalMulticast()     <IP>.isLinkLocalUnicast() <IP>.isGlobalUnicast()
    cidr(string) -> net.CIDR        isCIDR(string) -> bool
    <CIDR>.containsIP(IP|string)    <CIDR>.containsCIDR(CIDR|string)
    <CIDR>.ip() -> IP   <CIDR>.masked() -> CIDR   <CIDR>.prefixLength() -> int

Addresses are read as Go's netip.ParseAddr reads them (dotted IPv4 with no
leading zeros; IPv6 without a zone), and, as Kubernetes adds, an
IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) or a zone is refused. A prefix
is netip.ParsePrefix's: `address/bits` with decimal bits and no leading
zero, host bits kept (`cidr('10.0.0.1/8').ip()` is 10.0.0.1). Values are
messages holding the canonical spelling (RFC 5952 for IPv6), so `==`
compares addresses. Predicates are Go's (`isGlobalUnicast` is true for
private addresses, false for 255.255.255.255).

Not registered: the `string(ip)` and `string(cidr)` conversions, because
cel-expr-python lets no library add overloads to `string`; a rule using
them fails the offline check. Error messages keep Kubernetes' wording up to
Go's own parse error, which is not reproduced word for word.
"""

from __future__ import annotations

import ipaddress
import json

from cel_expr_python import cel
from google.protobuf import descriptor_pb2

IP_TYPE, CIDR_TYPE = "net.IP", "net.CIDR"
_DIGITS = frozenset("0123456789")


def add_messages(file: descriptor_pb2.FileDescriptorProto) -> None:
    """Declare net.IP and net.CIDR in `file` (package `net`)."""
    for name in ("IP", "CIDR"):
        message = file.message_type.add(name=name)
        message.field.add(name="text", number=1, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
                          type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)


Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _q(text: str) -> str:
    """Go's %q for the printable strings these messages quote."""
    return json.dumps(text, ensure_ascii=False)


def _parse_addr(raw: str) -> Address:
    """netip.ParseAddr, then Kubernetes' refusals."""
    prefix = f"IP Address {_q(raw)} parse error during conversion from string: ParseAddr({_q(raw)})"
    if "%" in raw:
        if ":" in raw:
            _parse_plain(raw.split("%", 1)[0], prefix)
            raise ValueError(f"IP address {_q(raw)} with zone value is not allowed")
        raise ValueError(f"{prefix}: unexpected character")
    address = _parse_plain(raw, prefix)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {_q(raw)} is not allowed")
    return address


def _parse_plain(raw: str, prefix: str) -> Address:
    if not raw or not raw.isascii() or raw.strip() != raw:
        raise ValueError(f"{prefix}: unable to parse IP")
    try:
        if ":" in raw:
            return ipaddress.IPv6Address(raw)
        parts = raw.split(".")
        if len(parts) != 4 or any(not p or set(p) - _DIGITS or (len(p) > 1 and p[0] == "0") for p in parts):
            raise ValueError
        return ipaddress.IPv4Address(raw)
    except ValueError:
        raise ValueError(f"{prefix}: unable to parse IP") from None


def _parse_prefix(raw: str) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface:
    """netip.ParsePrefix (host bits kept), then Kubernetes' refusal of
    IPv4-mapped IPv6."""
    # Kubernetes wraps the parse error in its prefix twice.
    error = ("network address parse error during conversion from string: " * 2) + f"netip.ParsePrefix({_q(raw)})"
    address_text, slash, bits = raw.rpartition("/")
    if not slash:
        raise ValueError(f"{error}: no '/'")
    if not bits or set(bits) - _DIGITS or (len(bits) > 1 and bits[0] == "0") or len(bits) > 3:
        raise ValueError(f"{error}: bad bits after slash: {_q(bits)}")
    if "%" in address_text:
        raise ValueError(f"{error}: zones cannot be present in a prefix")
    try:
        address = _parse_plain(address_text, error)
    except ValueError:
        raise ValueError(f"{error}: bad address") from None
    if int(bits) > address.max_prefixlen:
        raise ValueError(f"{error}: prefix length out of range")
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise ValueError(f"IPv4-mapped IPv6 address {_q(raw)} is not allowed")
    return ipaddress.ip_interface(f"{address}/{int(bits)}")


def _is_global_unicast(address: Address) -> bool:
    """Go's IsGlobalUnicast: not unspecified, loopback, multicast, link-local
    unicast or the IPv4 broadcast address (private addresses count)."""
    if address.is_unspecified or address.is_loopback or address.is_multicast:
        return False
    if _is_link_local_unicast(address):
        return False
    return not (isinstance(address, ipaddress.IPv4Address) and address == ipaddress.IPv4Address("255.255.255.255"))


def _is_link_local_unicast(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv4Address):
        return address in ipaddress.IPv4Network("169.254.0.0/16")
    return address in ipaddress.IPv6Network("fe80::/10")


def _is_link_local_multicast(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv4Address):
        return address in ipaddress.IPv4Network("224.0.0.0/24")
    return (int(address) >> 112) & 0xFF0F == 0xFF02


def overloads(ip_class: type | None, cidr_class: type | None) -> dict[str, list[tuple]]:
    """name -> [(overload id, return type, parameters, is_member, impl)]."""
    T, IP, CIDR = cel.Type, cel.Type(IP_TYPE), cel.Type(CIDR_TYPE)

    def ip_value(message) -> Address:
        return ipaddress.ip_address(message.text)

    def cidr_value(message):
        return ipaddress.ip_interface(message.text)

    def make_ip(address: Address):
        return ip_class(text=str(address))

    def make_cidr(interface):
        return cidr_class(text=f"{interface.ip}/{interface.network.prefixlen}")

    def is_ip(raw: str) -> bool:
        try:
            _parse_addr(raw)
        except ValueError:
            return False
        return True

    def is_cidr(raw: str) -> bool:
        try:
            _parse_prefix(raw)
        except ValueError:
            return False
        return True

    def contains_ip(cidr, address: Address) -> bool:
        interface = cidr_value(cidr)
        return address.version == interface.version and address in interface.network

    def contains_cidr(cidr, other) -> bool:
        outer, inner = cidr_value(cidr), other
        return (outer.version == inner.version and outer.network.prefixlen <= inner.network.prefixlen
                and inner.network.subnet_of(outer.network))

    return {
        "ip": [("string_to_ip", IP, [T.STRING], False, lambda raw: make_ip(_parse_addr(raw))),
               ("cidr_ip", IP, [CIDR], True, lambda c: make_ip(cidr_value(c).ip))],
        "family": [("ip_family", T.INT, [IP], True, lambda a: ip_value(a).version)],
        "ip.isCanonical": [("ip_is_canonical", T.BOOL, [T.STRING], False,
                            lambda raw: str(_parse_addr(raw)) == raw)],
        "isUnspecified": [("ip_is_unspecified", T.BOOL, [IP], True, lambda a: ip_value(a).is_unspecified)],
        "isLoopback": [("ip_is_loopback", T.BOOL, [IP], True, lambda a: ip_value(a).is_loopback)],
        "isLinkLocalMulticast": [("ip_is_link_local_multicast", T.BOOL, [IP], True,
                                  lambda a: _is_link_local_multicast(ip_value(a)))],
        "isLinkLocalUnicast": [("ip_is_link_local_unicast", T.BOOL, [IP], True,
                                lambda a: _is_link_local_unicast(ip_value(a)))],
        "isGlobalUnicast": [("ip_is_global_unicast", T.BOOL, [IP], True,
                             lambda a: _is_global_unicast(ip_value(a)))],
        "isIP": [("is_ip", T.BOOL, [T.STRING], False, is_ip)],
        "cidr": [("string_to_cidr", CIDR, [T.STRING], False, lambda raw: make_cidr(_parse_prefix(raw)))],
        "containsIP": [("cidr_contains_ip_string", T.BOOL, [CIDR, T.STRING], True,
                        lambda c, raw: contains_ip(c, _parse_addr(raw))),
                       ("cidr_contains_ip_ip", T.BOOL, [CIDR, IP], True, lambda c, a: contains_ip(c, ip_value(a)))],
        "containsCIDR": [("cidr_contains_cidr_string", T.BOOL, [CIDR, T.STRING], True,
                          lambda c, raw: contains_cidr(c, _parse_prefix(raw))),
                         ("cidr_contains_cidr", T.BOOL, [CIDR, CIDR], True,
                          lambda c, o: contains_cidr(c, cidr_value(o)))],
        "prefixLength": [("cidr_prefix_length", T.INT, [CIDR], True, lambda c: cidr_value(c).network.prefixlen)],
        "masked": [("cidr_masked", CIDR, [CIDR], True,
                    lambda c: make_cidr(ipaddress.ip_interface(str(cidr_value(c).network))))],
        "isCIDR": [("is_cidr", T.BOOL, [T.STRING], False, is_cidr)],
    }
