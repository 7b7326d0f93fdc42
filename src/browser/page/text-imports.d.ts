/** Files the browser build imports as text (Bun.build `with { type: "text" }`). */
declare module "*.wgsl" {
  const source: string;
  export default source;
}
