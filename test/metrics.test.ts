import { expect, test } from "bun:test";
import { ServiceMetrics } from "../src/metrics.ts";

test("countStreamEnd counts each streamed response under its delivery mode and outcome", async () => {
  const metrics = new ServiceMetrics();
  metrics.countStreamEnd("websocket", "aborted");
  metrics.countStreamEnd("websocket", "aborted");
  metrics.countStreamEnd("sse", "completed");
  const text = await metrics.render();
  expect(text).toContain('voxedge_streams_total{mode="websocket",outcome="aborted"} 2');
  expect(text).toContain('voxedge_streams_total{mode="sse",outcome="completed"} 1');
  expect(text).not.toContain('outcome="failed"');
});
