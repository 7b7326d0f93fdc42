/** Measures: a quantity and a unit ("5 km/h", "12kg", "2°C", "4 1/2 lbs", "41,459.00 km³"). */
import type { Rule } from "../tagger.ts";
import { QUANTITY, quantityWords } from "./cardinal.ts";
import { sentenceEndsAfter } from "./patterns.ts";

interface Unit { one: string; many: string }
const unit = (one: string, many = `${one}s`): Unit => ({ one, many });

/**
 * Unit symbols as written after a number. Ambiguous ones ("in", "s", "t", "A", "B", "K": words, grades or scales) are left out
 * or kept to forms that cannot be ordinary words; longest symbols are tried first.
 */
const UNITS: Record<string, Unit> = {
  km: unit("kilometer"), m: unit("meter"), cm: unit("centimeter"), mm: unit("millimeter"), nm: unit("nanometer"), µm: unit("micrometer"),
  mi: unit("mile"), ft: unit("foot", "feet"), yd: unit("yard"), kg: unit("kilogram"), KG: unit("kilogram"), g: unit("gram"),
  mg: unit("milligram"), µg: unit("microgram"), lb: unit("pound"), lbs: unit("pound"), oz: unit("ounce"),
  ml: unit("milliliter"), mL: unit("milliliter"), l: unit("liter"), L: unit("liter"), cl: unit("centiliter"), gal: unit("gallon"),
  "fl oz": unit("fluid ounce"), mph: unit("mile per hour", "miles per hour"), kph: unit("kilometer per hour", "kilometers per hour"),
  "km/h": unit("kilometer per hour", "kilometers per hour"), "m/s": unit("meter per second", "meters per second"),
  "°C": unit("degree Celsius", "degrees Celsius"), "°F": unit("degree Fahrenheit", "degrees Fahrenheit"), "°": unit("degree"),
  KB: unit("kilobyte"), kB: unit("kilobyte"), MB: unit("megabyte"), GB: unit("gigabyte"),
  TB: unit("terabyte"), PB: unit("petabyte"), Kb: unit("kilobit"), Mb: unit("megabit"), Gb: unit("gigabit"),
  kbps: unit("kilobit per second", "kilobits per second"), mbps: unit("megabit per second", "megabits per second"),
  Mbps: unit("megabit per second", "megabits per second"), Gbps: unit("gigabit per second", "gigabits per second"),
  Hz: unit("hertz", "hertz"), kHz: unit("kilohertz", "kilohertz"), MHz: unit("megahertz", "megahertz"), GHz: unit("gigahertz", "gigahertz"),
  W: unit("watt"), kW: unit("kilowatt"), MW: unit("megawatt"), kWh: unit("kilowatt hour"), V: unit("volt"), mA: unit("milliamp"),
  mAh: unit("milliamp hour"), ms: unit("millisecond"), sec: unit("second"), min: unit("minute"), hr: unit("hour"),
  hrs: unit("hour"), h: unit("hour"), ha: unit("hectare"), ac: unit("acre"), cc: unit("cc", "cc"), kcal: unit("kilocalorie"),
  cal: unit("calorie"), psi: unit("psi", "psi"), dB: unit("decibel"), mmHg: unit("millimeter of mercury", "millimeters of mercury"),
  "sq ft": unit("square foot", "square feet"), "sq mi": unit("square mile"), "sq m": unit("square meter"),
  "m²": unit("square meter"), m2: unit("square meter"), "km²": unit("square kilometer"), km2: unit("square kilometer"),
  "cm²": unit("square centimeter"), "ft²": unit("square foot", "square feet"), "m³": unit("cubic meter"), m3: unit("cubic meter"),
  "km³": unit("cubic kilometer"), "cm³": unit("cubic centimeter"),
  // Greek mu as often as the micro sign.
  μm: unit("micrometer"), μg: unit("microgram"), µs: unit("microsecond"), μs: unit("microsecond"), µl: unit("microliter"), μl: unit("microliter"),
  µL: unit("microliter"), μL: unit("microliter"), ns: unit("nanosecond"), kPa: unit("kilopascal"), hPa: unit("hectopascal"), Pa: unit("pascal"),
  // The kitchen's.
  tbsp: unit("tablespoon"), Tbsp: unit("tablespoon"), tbs: unit("tablespoon"), Tbs: unit("tablespoon"), tsp: unit("teaspoon"), Tsp: unit("teaspoon"),
  qt: unit("quart"), pt: unit("pint"), doz: unit("dozen", "dozen"),
};

/** Units that follow "per" or "/" ("$20/mo", "12kg/kg"), said in the singular. */
const PER_UNITS: Record<string, string> = {
  ...Object.fromEntries(Object.entries(UNITS).map(([symbol, { one }]) => [symbol, one])),
  s: "second", d: "day", day: "day", wk: "week", week: "week", mo: "month", month: "month", yr: "year", year: "year", hour: "hour",
};

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
const bySymbolLength = (a: string, b: string) => b.length - a.length;
const UNIT = Object.keys(UNITS).sort(bySymbolLength).map(escape).join("|");
const PER_UNIT = Object.keys(PER_UNITS).sort(bySymbolLength).map(escape).join("|");
const SCALE = "(?:\\s(thousand|million|billion|trillion))?";

/** "per kilogram" for "/kg". */
export function perWords(symbol: string | undefined): string {
  return symbol ? ` per ${PER_UNITS[symbol]}` : "";
}
export const PER = String.raw`(?:\/(${PER_UNIT})(?![\p{L}\d]))?`;

function unitWords(quantity: string, scale: string | undefined, symbol: string, hyphenated: boolean): string | null {
  const words = quantityWords(quantity);
  if (!words) return null;
  const { one, many } = UNITS[symbol]!;
  // "a 7.2-mm bullet": before a noun the unit stays singular.
  // "1/2 tsp" is one half teaspoon: a proper fraction alone takes the singular too.
  const properFraction = /^(\d+)\/(\d+)$/.exec(quantity);
  const single = hyphenated || (!scale && (/^[-−]?1$/.test(quantity) || (properFraction !== null && Number(properFraction[1]) < Number(properFraction[2]))));
  return `${words}${scale ? ` ${scale}` : ""} ${single ? one : many}`;
}

export const measureRules: Rule[] = [
  {
    // Heights: 5'11" and 6′2″.
    class: "measure",
    pattern: /(?<![\p{L}\d.,])(\d)['′](\d{1,2})(?:"|″|'')(?![\p{L}\d])/gu,
    verbalize: (m) => (Number(m[2]) < 12 ? `${quantityWords(m[1]!)} ${m[1] === "1" ? "foot" : "feet"} ${quantityWords(m[2]!)}` : null),
  },
  {
    // "in" is an inch only where it cannot be the preposition: glued to the number ("27in") or hyphenated ("12-in").
    class: "measure",
    pattern: new RegExp(String.raw`(?<![\p{L}\d.,])(${QUANTITY})(-?)in\.?(?![\p{L}\d])`, "gu"),
    verbalize: (m, text) => {
      const words = quantityWords(m[1]!);
      if (!words) return null;
      const inches = `${words} ${m[2] || /^1$/.test(m[1]!) ? "inch" : "inches"}`;
      return sentenceEndsAfter(text, m.index + m[0].length, m[0]) ? `${inches}.` : inches;
    },
  },
  {
    // Dimensions: "2x4", "1920 x 1080", "25 x 7 m"; the unit after the last number covers them all.
    class: "measure",
    pattern: new RegExp(String.raw`(?<![\p{L}\d.,])(${QUANTITY})\s?[x×]\s?(${QUANTITY})(?:\s?(${UNIT}))?(?![\p{L}\d])`, "gu"),
    verbalize: (m) => {
      const first = quantityWords(m[1]!);
      const second = m[3] ? unitWords(m[2]!, undefined, m[3], false) : quantityWords(m[2]!);
      return first && second && `${first} by ${second}`;
    },
  },
  {
    class: "measure",
    pattern: new RegExp(String.raw`(?<![\p{L}\d.,])(${QUANTITY})${SCALE}(\s?|-)(${UNIT})${PER}(?![\p{L}\d])`, "gu"),
    verbalize: (m) => {
      const words = unitWords(m[1]!, m[2], m[4]!, m[3] === "-");
      return words && words + perWords(m[5]);
    },
  },
  {
    // "12/kg": a bare quantity per unit.
    class: "measure",
    pattern: new RegExp(String.raw`(?<![\p{L}\d.,])(${QUANTITY})\/(${PER_UNIT})(?![\p{L}\d])`, "gu"),
    verbalize: (m) => {
      const words = quantityWords(m[1]!);
      return words && words + perWords(m[2]);
    },
  },
];
