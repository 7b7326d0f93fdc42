import { describe, expect, test } from "bun:test";
import { CLOSE_GOING_AWAY, CLOSE_NORMAL, CLOSE_POLICY, CLOSE_TOO_BIG, closeOf, ERRONEOUS_MESSAGE_BURST, ERRONEOUS_MESSAGES_PER_SECOND, ErroneousMessageBudget, outcomeOfClose } from "../../src/speech/stream-rules.ts";

describe("erroneous messages", () => {
  test("the budget: a burst, then one a second; what refills never passes the burst", () => {
    let nowMs = 0;
    const budget = new ErroneousMessageBudget(() => nowMs);
    for (let i = 0; i < ERRONEOUS_MESSAGE_BURST; i++) expect(budget.spend()).toBe(true);
    expect(budget.spend()).toBe(false);
    nowMs += 1000 / ERRONEOUS_MESSAGES_PER_SECOND;
    expect(budget.spend()).toBe(true);
    expect(budget.spend()).toBe(false);
    nowMs += 3_600_000;
    for (let i = 0; i < ERRONEOUS_MESSAGE_BURST; i++) expect(budget.spend()).toBe(true);
    expect(budget.spend()).toBe(false);
  });

});

describe("how a stream's ending closes its socket", () => {
  test("a stream that ran its course closes normally, a shutdown goes away, a broken rule is 1008 and text past a cap 1009", () => {
    expect(closeOf({ kind: "finished" })).toEqual({ code: CLOSE_NORMAL, reason: "session closed" });
    expect(closeOf({ kind: "going_away" }).code).toBe(CLOSE_GOING_AWAY);
    expect(closeOf({ kind: "broken", error: { kind: "invalid", message: "bad" } })).toEqual({ message: "bad", code: CLOSE_POLICY, reason: "bad" });
    expect(closeOf({ kind: "broken", error: { kind: "too_big", message: "long" } }).code).toBe(CLOSE_TOO_BIG);
  });

  test("the outcome a close counts as: ours with 1000/1001 completed, another code failed, the client's aborted", () => {
    expect(outcomeOfClose(CLOSE_NORMAL)).toBe("completed");
    expect(outcomeOfClose(CLOSE_GOING_AWAY)).toBe("completed");
    expect(outcomeOfClose(CLOSE_POLICY)).toBe("failed");
    expect(outcomeOfClose(undefined)).toBe("aborted");
  });
});
