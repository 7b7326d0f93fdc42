/**
 * ElevenLabs' pronunciation dictionaries through its official SDK: added from rules and from a PLS file,
 * listed, read and downloaded, changed into new versions, and applied by pronunciation_dictionary_locators on
 * text-to-speech and on the stream-input socket; phoneme rules and unknown locators refused in ElevenLabs' shape.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ElevenLabsClient } from "@elevenlabs/elevenlabs-js";
import { refusal } from "../support/elevenlabs-sdk.ts";
import { startTestServer, type TestServer } from "../support/server.ts";
import { ToneModel } from "../support/tone-model.ts";
import { RecordingSocket } from "../support/ws-client.ts";

const API_KEY = "sk-eleven";
const PLS = `<?xml version="1.0" encoding="UTF-8"?>
<lexicon version="1.0" xmlns="http://www.w3.org/2005/01/pronunciation-lexicon" alphabet="ipa" xml:lang="en-US">
  <lexeme><grapheme>Nginx</grapheme><alias>engine x</alias></lexeme>
</lexicon>`;

describe("pronunciation dictionaries", () => {
  let server: TestServer;
  let client: ElevenLabsClient;
  const model = new ToneModel();
  beforeAll(async () => {
    server = await startTestServer(model, { flags: { "api-key": API_KEY } });
    client = new ElevenLabsClient({ apiKey: API_KEY, baseUrl: `${server.url}/elevenlabs`, maxRetries: 0 });
  });
  afterAll(() => server.stop());

  const spoken = async (text: string, locators: { pronunciationDictionaryId: string; versionId?: string }[]) => {
    const audio = await client.textToSpeech.convert("low", { text, outputFormat: "pcm_24000", pronunciationDictionaryLocators: locators as never });
    await new Response(audio).arrayBuffer();
    return model.jobs.at(-1)!.text;
  };

  test("from rules and from a file: applied by locator, earlier locators first, a later version by its id", async () => {
    const rules = await client.pronunciationDictionaries.createFromRules({ name: "tech", rules: [{ type: "alias", stringToReplace: "SQL", alias: "sequel" }, { type: "alias", stringToReplace: "k8s", alias: "kubernetes" }] });
    expect(rules).toMatchObject({ name: "tech", versionRulesNum: 2 });
    const file = await client.pronunciationDictionaries.createFromFile({ name: "servers", file: new File([PLS], "servers.pls", { type: "application/pls+xml" }) });
    expect(file.versionRulesNum).toBe(1);

    expect(await spoken("Run SQL on k8s behind Nginx.", [{ pronunciationDictionaryId: rules.id, versionId: rules.versionId }, { pronunciationDictionaryId: file.id }])).toBe("Run sequel on kubernetes behind engine x.");
    expect(await spoken("Run SQL here.", [])).toBe("Run SQL here.");

    const changed = await client.pronunciationDictionaries.rules.add(rules.id, { rules: [{ type: "alias", stringToReplace: "SQL", alias: "S Q L" }] });
    expect(changed.versionId).not.toBe(rules.versionId);
    expect(await spoken("SQL", [{ pronunciationDictionaryId: rules.id }])).toBe("S Q L");
    expect(await spoken("SQL", [{ pronunciationDictionaryId: rules.id, versionId: rules.versionId }])).toBe("sequel");

    const listed = await client.pronunciationDictionaries.list();
    expect(listed.pronunciationDictionaries.map((dictionary) => dictionary.name).sort()).toEqual(["servers", "tech"]);
    const metadata = await client.pronunciationDictionaries.get(rules.id);
    expect(metadata).toMatchObject({ id: rules.id, latestVersionId: changed.versionId, latestVersionRulesNum: 2 });
    const downloaded = await new Response(await client.pronunciationDictionaries.download(rules.id, changed.versionId)).text();
    expect(downloaded).toContain("<grapheme>SQL</grapheme>");
    expect(downloaded).toContain("<alias>S Q L</alias>");
  });

  test("phoneme rules, an unknown dictionary and a fourth locator are refused in ElevenLabs' shape, before any audio", async () => {
    const phoneme = await refusal(() => client.pronunciationDictionaries.createFromRules({ name: "ipa", rules: [{ type: "phoneme", stringToReplace: "tomato", phoneme: "təˈmeɪtoʊ", alphabet: "ipa" }] }));
    expect(phoneme.statusCode).toBe(400);
    expect(phoneme.body.detail.message).toContain("phoneme rule: the model here reads text");
    const unknown = await refusal(() => spoken("Hello.", [{ pronunciationDictionaryId: "nope" }]));
    expect(unknown.statusCode).toBe(404);
    expect(unknown.body.detail.status).toBe("pronunciation_dictionary_not_found");
    const one = await client.pronunciationDictionaries.createFromRules({ name: "one", rules: [] });
    const four = await refusal(() => spoken("Hello.", Array.from({ length: 4 }, () => ({ pronunciationDictionaryId: one.id }))));
    expect(four.statusCode).toBe(400);
  });

  test("stream-input: the locators of the opening message apply to everything the stream speaks", async () => {
    const dictionary = await client.pronunciationDictionaries.createFromRules({ name: "socket", rules: [{ type: "alias", stringToReplace: "GIF", alias: "jif" }] });
    const socket = new RecordingSocket(`${server.url.replace("http", "ws")}/elevenlabs/v1/text-to-speech/low/stream-input?output_format=pcm_24000`, { "xi-api-key": API_KEY });
    await socket.opened;
    const before = model.jobs.length;
    socket.send({ text: " ", pronunciation_dictionary_locators: [{ pronunciation_dictionary_id: dictionary.id, version_id: dictionary.versionId }] });
    socket.send({ text: "Send the GIF now. " });
    socket.send({ text: "" });
    await socket.waitFor((received) => received.some((entry) => entry.kind === "json" && entry.value.isFinal === true));
    expect(model.jobs.slice(before).map((job) => job.text).join(" ")).toContain("Send the jif now.");
    socket.close();
  });
});
