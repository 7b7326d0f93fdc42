/**
 * Ten ordinary English sentences used to measure how intelligible a synthesizer is: each is synthesized,
 * transcribed with an offline recognizer (pocketsphinx), and scored by word error rate.
 * Shared by bench/offline-engine-wer.ts and the classic engine's tests, so the numbers stay comparable.
 * Words are common and in pocketsphinx's default en-us dictionary; no digits or abbreviations.
 */
export const INTELLIGIBILITY_SENTENCES: readonly string[] = [
  "The weather will be warm and sunny for most of the week.",
  "Please remember to close the door when you leave the house.",
  "She bought fresh bread and a bottle of milk at the store.",
  "The train to the city leaves every hour from the main station.",
  "We should call our parents this evening before it gets too late.",
  "He found his keys under the newspaper on the kitchen table.",
  "The children played in the park until the sun went down.",
  "Our meeting has been moved to next Tuesday afternoon.",
  "Turn left at the second light and the library is on your right.",
  "I would like a cup of coffee with a little sugar, please.",
];
