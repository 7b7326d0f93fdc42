/**
 * Version strings: "v2.3.1" → "version two point three point one", "Python 3.10.12" → "Python three point ten point
 * twelve", "Ubuntu 22.04" → "Ubuntu twenty two point oh four". Each part is a number of its own, never a decimal's
 * digits ("3.10" is "three point ten", not "three point one zero"), and three parts are no date.
 */
import type { Rule } from "../tagger.ts";
import { cardinalWords, digitWords } from "./numbers.ts";

/** Names after which "N.N" is a version: languages, systems, runtimes and tools an assistant's answer mentions. */
const SOFTWARE = [
  "version", "Version", "release", "Release", "ver\\.", "Python", "Node", "Node\\.js", "Java", "JDK", "iOS", "iPadOS", "macOS", "OS X", "Android",
  "Windows", "Ubuntu", "Debian", "Fedora", "RHEL", "CentOS", "Chrome", "Firefox", "Safari", "Edge", "Rust", "Go", "Kotlin", "Swift", "PHP", "Ruby",
  "Perl", "TypeScript", "React", "Angular", "Vue", "Django", "Rails", "Kubernetes", "Docker", "Bun", "Deno", "npm", "pip", "Unity", "Blender",
  "Linux", "kernel", "Qt", "CUDA", "PyTorch", "TensorFlow", "Laravel", "Spring", "\\.NET", "Scala", "Elixir", "Erlang", "Julia", "Lua", "Postgres",
  "PostgreSQL", "MySQL", "Redis", "MongoDB", "Elasticsearch", "Terraform", "Helm", "Gradle", "Maven", "Xcode", "Electron", "Next\\.js", "Vite",
];

function partWords(part: string): string {
  if (part.length > 1 && part.startsWith("0")) return `oh ${digitWords(part.slice(1))}`;
  return cardinalWords(part);
}

const versionWords = (dotted: string) => dotted.split(".").map(partWords).join(" point ");

export const versionRules: Rule[] = [
  {
    // "v2", "v2.3.1", "V1.0": the "v" is said.
    class: "version",
    pattern: /(?<![\w.])[vV](\d+(?:\.\d+){0,3})(?![\w]|\.\d)/g,
    verbalize: (m) => `version ${versionWords(m[1]!)}`,
  },
  {
    // Three parts, none a year: "3.10.12", "1.2.0". A date has a year of four digits at one end; four parts
    // without a "v" are an address or a number written with dots.
    class: "version",
    pattern: /(?<![\w.,/:-])(\d{1,3})\.(\d{1,3})\.(\d{1,4})(?![\w]|\.\d|[/-]\d)/g,
    verbalize: (m) => (m[3]!.length === 4 ? null : versionWords(m.slice(1, 4).join("."))),
  },
  {
    // Two parts after a software name: "Python 3.10", "Node 18.17".
    class: "version",
    pattern: new RegExp(String.raw`(?<=(?<![\w.])(?:${SOFTWARE.join("|")})\s)(\d{1,3}\.\d{1,3})(?![\w]|\.\d)`, "g"),
    verbalize: (m) => versionWords(m[1]!),
  },
];
