/** Address classification is a pure function of the text: these examples are parsed, never contacted. */
import { describe, expect, test } from "bun:test";
import { addressFamily, classifyAddress, describeRefusal, type Embedding, type RefusedKind } from "../../src/voices/address-policy.ts";

const REFUSED: [address: string, kind: RefusedKind, range: string][] = [
  ["127.0.0.1", "loopback", "127.0.0.0/8"],
  ["127.255.255.254", "loopback", "127.0.0.0/8"],
  ["::1", "loopback", "::1/128"],
  ["0.0.0.0", "unspecified", "0.0.0.0/8"],
  ["0.1.2.3", "unspecified", "0.0.0.0/8"],
  ["::", "unspecified", "::/128"],
  ["10.0.0.1", "private", "10.0.0.0/8"],
  ["10.255.255.255", "private", "10.0.0.0/8"],
  ["172.16.0.1", "private", "172.16.0.0/12"],
  ["172.31.255.255", "private", "172.16.0.0/12"],
  ["192.168.1.1", "private", "192.168.0.0/16"],
  ["fc00::1", "private", "fc00::/7"],
  ["fd12:3456:789a::1", "private", "fc00::/7"],
  ["fec0::1", "private", "fec0::/10"],
  ["64:ff9b:1::a00:1", "private", "64:ff9b:1::/48"],
  ["169.254.0.1", "link-local", "169.254.0.0/16"],
  ["fe80::1", "link-local", "fe80::/10"],
  ["fe80::1%eth0", "link-local", "fe80::/10"],
  ["febf:ffff::1", "link-local", "fe80::/10"],
  ["100.64.0.1", "shared (CGNAT)", "100.64.0.0/10"],
  ["100.127.255.254", "shared (CGNAT)", "100.64.0.0/10"],
  ["224.0.0.1", "multicast", "224.0.0.0/4"],
  ["239.255.255.250", "multicast", "224.0.0.0/4"],
  ["ff02::1", "multicast", "ff00::/8"],
  ["255.255.255.255", "broadcast", "255.255.255.255/32"],
  ["240.0.0.1", "reserved", "240.0.0.0/4"],
  ["192.0.0.8", "reserved", "192.0.0.0/24"],
  ["192.88.99.1", "reserved", "192.88.99.0/24"],
  ["100::1", "reserved", "100::/64"],
  ["2001::1", "reserved", "2001::/23"],
  ["1:2:3:4:5:6:7::", "reserved", "outside 2000::/3"],
  ["4000::1", "reserved", "outside 2000::/3"],
  ["198.18.0.1", "benchmarking", "198.18.0.0/15"],
  ["198.19.255.255", "benchmarking", "198.18.0.0/15"],
  ["2001:2::1", "benchmarking", "2001:2::/48"],
  ["192.0.2.1", "documentation", "192.0.2.0/24"],
  ["198.51.100.7", "documentation", "198.51.100.0/24"],
  ["203.0.113.9", "documentation", "203.0.113.0/24"],
  ["2001:db8::1", "documentation", "2001:db8::/32"],
  ["3fff:fff::1", "documentation", "3fff::/20"],
  ["169.254.169.254", "cloud metadata", "169.254.169.254/32"],
  ["100.100.100.200", "cloud metadata", "100.100.100.200/32"],
  ["168.63.129.16", "cloud metadata", "168.63.129.16/32"],
  ["fd00:ec2::254", "cloud metadata", "fd00:ec2::254/128"],
];

// Public per the policy: used as classification inputs only.
const PUBLIC = ["8.8.8.8", "1.1.1.1", "172.32.0.1", "172.15.255.255", "100.128.0.1", "198.20.0.1", "223.255.255.255", "2606:4700::1111", "2a00:1450::1"];

describe("classifyAddress", () => {
  test.each(REFUSED)("%s is %s (%s)", (address, kind, range) => {
    expect(classifyAddress(address)).toEqual({ allowed: false, kind, range });
  });

  test.each(PUBLIC)("%s is public", (address) => {
    expect(classifyAddress(address)).toEqual({ allowed: true });
  });
});

describe("IPv6 forms carrying an IPv4 address are judged by the IPv4 address", () => {
  const EMBEDDED: [address: string, kind: RefusedKind, range: string, embeddedIn: Embedding][] = [
    ["::ffff:127.0.0.1", "loopback", "127.0.0.0/8", "IPv4-mapped IPv6"],
    ["::ffff:7f00:1", "loopback", "127.0.0.0/8", "IPv4-mapped IPv6"], // how the URL parser writes [::ffff:127.0.0.1]
    ["::FFFF:10.1.2.3", "private", "10.0.0.0/8", "IPv4-mapped IPv6"],
    ["::ffff:169.254.169.254", "cloud metadata", "169.254.169.254/32", "IPv4-mapped IPv6"],
    ["0:0:0:0:0:ffff:c0a8:101", "private", "192.168.0.0/16", "IPv4-mapped IPv6"],
    ["::127.0.0.1", "loopback", "127.0.0.0/8", "IPv4-compatible IPv6"],
    ["::a9fe:a9fe", "cloud metadata", "169.254.169.254/32", "IPv4-compatible IPv6"],
    ["::0.0.1.0", "unspecified", "0.0.0.0/8", "IPv4-compatible IPv6"],
    ["64:ff9b::127.0.0.1", "loopback", "127.0.0.0/8", "NAT64"],
    ["64:ff9b::a00:1", "private", "10.0.0.0/8", "NAT64"],
    ["64:ff9b::6464:64c8", "cloud metadata", "100.100.100.200/32", "NAT64"],
    ["2002:7f00:1::1", "loopback", "127.0.0.0/8", "6to4"],
    ["2002:c0a8:101::", "private", "192.168.0.0/16", "6to4"],
    ["2002:a9fe:a9fe:1::1", "cloud metadata", "169.254.169.254/32", "6to4"],
    ["2002:6440:1::1", "shared (CGNAT)", "100.64.0.0/10", "6to4"],
  ];

  test.each(EMBEDDED)("%s is %s (%s inside %s)", (address, kind, range, embeddedIn) => {
    expect(classifyAddress(address)).toEqual({ allowed: false, kind, range, embeddedIn });
  });

  test.each(["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"])("%s carries a public IPv4 address and is public", (address) => {
    expect(classifyAddress(address)).toEqual({ allowed: true });
  });

  test("an IPv4-compatible address is refused even around a public IPv4 address (deprecated, never a real host)", () => {
    expect(classifyAddress("::8.8.8.8")).toEqual({ allowed: false, kind: "reserved", range: "::/96" });
  });
});

describe("text that is not a canonical IP address is refused as invalid", () => {
  test.each(["", "localhost", "1.2.3", "1.2.3.4.5", "256.0.0.1", "010.0.0.1", "0x7f.0.0.1", "2130706433", "[::1]", "1::2::3", "::1.2.3", "1:2:3:4:5:6:7:8:9", "::1:2:3:4:5:6:7:8", "12345::", "g::1", ":1:2:3:4:5:6:7"])(
    "%p",
    (text) => {
      expect(classifyAddress(text)).toEqual({ allowed: false, kind: "invalid", range: "not an IP address" });
      expect(addressFamily(text)).toBeUndefined();
    },
  );
});

test("addressFamily tells IPv4 from IPv6", () => {
  expect(addressFamily("127.0.0.1")).toBe(4);
  expect(addressFamily("::ffff:127.0.0.1")).toBe(6);
  expect(addressFamily("fe80::1%lo")).toBe(6);
});

test("describeRefusal words the verdict for an error message", () => {
  const wording = (address: string) => {
    const verdict = classifyAddress(address);
    if (verdict.allowed) throw new Error(`${address} unexpectedly public`);
    return describeRefusal(verdict);
  };
  expect(wording("10.1.2.3")).toBe("a private address (10.0.0.0/8)");
  expect(wording("::")).toBe("an unspecified address (::/128)");
  expect(wording("::ffff:7f00:1")).toBe("a loopback address (127.0.0.0/8 inside IPv4-mapped IPv6)");
});
