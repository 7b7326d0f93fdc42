/**
 * Which IP addresses a user-supplied media URL may reach. A pure function of the address text, so the
 * fetcher can check every address a host name resolves to, and tests can cover every range without traffic.
 *
 * IPv6 forms that carry an IPv4 address the stack may end up talking to (IPv4-mapped, IPv4-compatible,
 * NAT64, 6to4) are judged by the embedded IPv4 address, so `::ffff:127.0.0.1` is loopback, not "IPv6".
 */

export type RefusedKind =
  | "loopback"
  | "unspecified"
  | "private"
  | "link-local"
  | "shared (CGNAT)"
  | "multicast"
  | "broadcast"
  | "reserved"
  | "benchmarking"
  | "documentation"
  | "cloud metadata"
  | "invalid";

export type Embedding = "IPv4-mapped IPv6" | "IPv4-compatible IPv6" | "NAT64" | "6to4";

export type AddressVerdict =
  | { allowed: true }
  | { allowed: false; kind: RefusedKind; range: string; embeddedIn?: Embedding };

interface Rule {
  range: string;
  kind: RefusedKind;
  bytes: Uint8Array;
  prefixBits: number;
}

// Most specific first: the first matching rule names the refusal, so metadata beats link-local or private.
const IPV4_RULES = rules(parseIPv4, [
  ["169.254.169.254/32", "cloud metadata"], // AWS, GCP, Azure, OpenStack instance metadata
  ["100.100.100.200/32", "cloud metadata"], // Alibaba Cloud metadata
  ["168.63.129.16/32", "cloud metadata"], // Azure WireServer: public-looking, but only answers from inside Azure
  ["0.0.0.0/8", "unspecified"],
  ["10.0.0.0/8", "private"],
  ["100.64.0.0/10", "shared (CGNAT)"],
  ["127.0.0.0/8", "loopback"],
  ["169.254.0.0/16", "link-local"],
  ["172.16.0.0/12", "private"],
  ["192.0.0.0/24", "reserved"], // IETF protocol assignments (includes Oracle Cloud's 192.0.0.192 metadata)
  ["192.0.2.0/24", "documentation"],
  ["192.88.99.0/24", "reserved"], // deprecated 6to4 relay anycast
  ["192.168.0.0/16", "private"],
  ["198.18.0.0/15", "benchmarking"],
  ["198.51.100.0/24", "documentation"],
  ["203.0.113.0/24", "documentation"],
  ["224.0.0.0/4", "multicast"],
  ["255.255.255.255/32", "broadcast"],
  ["240.0.0.0/4", "reserved"],
]);

const IPV6_RULES = rules(parseIPv6, [
  ["::/128", "unspecified"],
  ["::1/128", "loopback"],
  ["fd00:ec2::254/128", "cloud metadata"], // AWS instance metadata over IPv6
  ["fc00::/7", "private"], // unique local
  ["fe80::/10", "link-local"],
  ["fec0::/10", "private"], // deprecated site-local, still routed inside some networks
  ["ff00::/8", "multicast"],
  ["64:ff9b:1::/48", "private"], // local-use NAT64: translates into whatever the local network says
  ["100::/64", "reserved"], // discard-only
  ["2001:2::/48", "benchmarking"],
  ["2001::/23", "reserved"], // IETF protocol assignments, Teredo (which hides its IPv4 client address)
  ["2001:db8::/32", "documentation"],
  ["3fff::/20", "documentation"],
]);

// Only global unicast space is ever a real media host; the rules above carve the special blocks out of it.
const GLOBAL_UNICAST = rules(parseIPv6, [["2000::/3", "reserved"]])[0]!;

/** Classifies an IP address as the resolver or the URL parser writes it (a `%zone` suffix is ignored). */
export function classifyAddress(address: string): AddressVerdict {
  const ipv4 = parseIPv4(address);
  if (ipv4) return classifyIPv4(ipv4);
  const ipv6 = parseIPv6(address.replace(/%.*$/, ""));
  if (!ipv6) return { allowed: false, kind: "invalid", range: "not an IP address" };

  const embedded = embeddedIPv4(ipv6);
  if (embedded) {
    const verdict = classifyIPv4(embedded.ipv4);
    if (!verdict.allowed) return { ...verdict, embeddedIn: embedded.embedding };
    // Deprecated and unroutable on its own even when the IPv4 half is public.
    if (embedded.embedding === "IPv4-compatible IPv6") return { allowed: false, kind: "reserved", range: "::/96" };
    return verdict;
  }
  const rule = IPV6_RULES.find((candidate) => matches(candidate, ipv6));
  if (rule) return { allowed: false, kind: rule.kind, range: rule.range };
  if (!matches(GLOBAL_UNICAST, ipv6)) return { allowed: false, kind: "reserved", range: "outside 2000::/3" };
  return { allowed: true };
}

/** 4 or 6 for an IP address in the textual forms `classifyAddress` accepts, undefined for anything else. */
export function addressFamily(address: string): 4 | 6 | undefined {
  if (parseIPv4(address)) return 4;
  if (parseIPv6(address.replace(/%.*$/, ""))) return 6;
  return undefined;
}

/** "a private address (10.0.0.0/8)", "a loopback address (127.0.0.0/8 inside IPv4-mapped IPv6)". */
export function describeRefusal(verdict: Extract<AddressVerdict, { allowed: false }>): string {
  const article = /^[aeiou]/.test(verdict.kind) ? "an" : "a";
  const where = verdict.embeddedIn ? `${verdict.range} inside ${verdict.embeddedIn}` : verdict.range;
  return `${article} ${verdict.kind} address (${where})`;
}

function classifyIPv4(bytes: Uint8Array): AddressVerdict {
  const rule = IPV4_RULES.find((candidate) => matches(candidate, bytes));
  return rule ? { allowed: false, kind: rule.kind, range: rule.range } : { allowed: true };
}

function embeddedIPv4(bytes: Uint8Array): { ipv4: Uint8Array; embedding: Embedding } | undefined {
  const zeroUpTo = (end: number) => bytes.subarray(0, end).every((byte) => byte === 0);
  if (zeroUpTo(10) && bytes[10] === 0xff && bytes[11] === 0xff) return { ipv4: bytes.slice(12), embedding: "IPv4-mapped IPv6" };
  // :: and ::1 share the IPv4-compatible prefix but are the IPv6 unspecified and loopback addresses.
  if (zeroUpTo(12) && !zeroUpTo(15)) return { ipv4: bytes.slice(12), embedding: "IPv4-compatible IPv6" };
  const nat64Prefix = [0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0];
  if (nat64Prefix.every((byte, index) => bytes[index] === byte)) return { ipv4: bytes.slice(12), embedding: "NAT64" };
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return { ipv4: bytes.slice(2, 6), embedding: "6to4" };
  return undefined;
}

function matches(rule: Rule, bytes: Uint8Array): boolean {
  if (rule.bytes.length !== bytes.length) return false;
  const wholeBytes = Math.floor(rule.prefixBits / 8);
  for (let index = 0; index < wholeBytes; index++) if (bytes[index] !== rule.bytes[index]) return false;
  const remainingBits = rule.prefixBits % 8;
  if (remainingBits === 0) return true;
  const mask = (0xff << (8 - remainingBits)) & 0xff;
  return (bytes[wholeBytes]! & mask) === (rule.bytes[wholeBytes]! & mask);
}

function rules(parse: (text: string) => Uint8Array | undefined, table: [string, RefusedKind][]): Rule[] {
  return table.map(([range, kind]) => {
    const [network, prefixBits] = range.split("/");
    return { range, kind, bytes: parse(network!)!, prefixBits: Number(prefixBits) };
  });
}

/** Dotted decimal only, no leading zeros: what resolvers and the WHATWG URL parser produce. */
function parseIPv4(text: string): Uint8Array | undefined {
  const parts = text.split(".");
  if (parts.length !== 4 || !parts.every((part) => /^(0|[1-9]\d{0,2})$/.test(part) && Number(part) <= 255)) return undefined;
  return Uint8Array.from(parts, Number);
}

function parseIPv6(text: string): Uint8Array | undefined {
  // A trailing dotted quad stands for the last two groups: rewrite it as hex and parse one form.
  let hexText = text;
  const dotted = /^(.*:)([^:]*\.[^:]*)$/.exec(text);
  if (dotted) {
    const quad = parseIPv4(dotted[2]!);
    if (!quad) return undefined;
    hexText = `${dotted[1]}${((quad[0]! << 8) | quad[1]!).toString(16)}:${((quad[2]! << 8) | quad[3]!).toString(16)}`;
  }
  const halves = hexText.split("::");
  if (halves.length > 2) return undefined;
  const groupsOf = (half: string) => (half === "" ? [] : half.split(":"));
  const head = groupsOf(halves[0]!);
  const tail = halves.length === 2 ? groupsOf(halves[1]!) : [];
  const writtenGroups = head.length + tail.length;
  if (halves.length === 1 ? writtenGroups !== 8 : writtenGroups > 7) return undefined;
  const groups = [...head, ...Array<string>(8 - writtenGroups).fill("0"), ...tail];
  if (!groups.every((group) => /^[0-9a-f]{1,4}$/i.test(group))) return undefined;
  const bytes = new Uint8Array(16);
  groups.forEach((group, index) => {
    const value = parseInt(group, 16);
    bytes[index * 2] = value >> 8;
    bytes[index * 2 + 1] = value & 0xff;
  });
  return bytes;
}
