/** Events as an SSE client reads them: blank-line separated, `event:` and `data:` fields. */
export function parseSse(text: string): { event: string; data: any }[] {
  return text
    .split("\n\n")
    .filter((block) => block.trim().length > 0)
    .map((block) => {
      const lines = block.split("\n");
      const event = lines.find((line) => line.startsWith("event: "))!.slice(7);
      const data = lines.filter((line) => line.startsWith("data: ")).map((line) => line.slice(6)).join("\n");
      return { event, data: JSON.parse(data) };
    });
}
