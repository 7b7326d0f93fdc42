/** Every relative link in README.md, CHANGELOG.md and docs/*.md points at a file of the repository, and every #anchor at a heading. */
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { REPO_ROOT } from "../../support/repo.ts";

const ROOT = REPO_ROOT;
const PAGES = ["README.md", "CHANGELOG.md", ...readdirSync(join(ROOT, "docs")).filter((name) => name.endsWith(".md")).map((name) => join("docs", name))];

/** Inline links `[text](target)`, outside fenced code blocks and code spans. */
function linkTargets(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, "").replace(/`[^`\n]*`/g, "");
  return [...prose.matchAll(/\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((match) => match[1]!);
}

/** GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, "");
  for (const [, heading] of prose.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = heading!
      .replace(/`/g, "")
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

test("the pages exist and link to one another", () => {
  expect(PAGES).toContain(join("docs", "api.md"));
  expect(PAGES).toContain(join("docs", "configuration.md"));
  expect(linkTargets(readFileSync(join(ROOT, "README.md"), "utf-8")).length).toBeGreaterThan(5);
});

test("the link reader finds links and anchors as GitHub renders them", () => {
  expect(linkTargets("see [a](docs/a.md#x) and `[b](no.md)`\n```\n[c](no.md)\n```\n")).toEqual(["docs/a.md#x"]);
  expect([...headingAnchors("## Small containers (1 GiB)\n## `deno serve`\n## Voices\n## Voices\n")]).toEqual(["small-containers-1-gib", "deno-serve", "voices", "voices-1"]);
});

for (const page of PAGES) {
  test(`${page}: every relative link resolves`, () => {
    const broken: string[] = [];
    for (const target of linkTargets(readFileSync(join(ROOT, page), "utf-8"))) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      const [path = "", anchor] = target.split("#");
      const file = path === "" ? join(ROOT, page) : join(ROOT, dirname(page), decodeURIComponent(path));
      if (!file.startsWith(ROOT + "/") || !existsSync(file)) {
        broken.push(`${target} (no file ${relative(ROOT, file)})`);
        continue;
      }
      if (anchor !== undefined && file.endsWith(".md") && statSync(file).isFile() && !headingAnchors(readFileSync(file, "utf-8")).has(anchor)) {
        broken.push(`${target} (no heading #${anchor} in ${relative(ROOT, file)})`);
      }
    }
    expect(broken).toEqual([]);
  });
}
