// probe-js: a component the e2e tests (tests/e2e/test_wasm_sandbox.py) use to
// check outgoing HTTP: `fetch` GETs a URL with the JavaScript engine's own
// fetch (wasi:http underneath), which wf lets through only to the hosts the
// operator listed. Built by tests/wasm/build.sh.
const FETCH_IN = {
  type: 'object', properties: { url: { type: 'string' } }, required: ['url'], additionalProperties: false,
};
const text = (val, isError) => ({ content: [{ tag: 'text', val }], structured: undefined, isError });
const notFound = (what) => ({ code: 'not-found', message: `no ${what}`, data: undefined });

export const guest = {
  describe() {
    return { name: 'probe_js', version: '1.0.0', description: 'Fetches a URL on request' };
  },
  catalog() {
    const tools = [{ name: 'fetch', description: 'GETs a URL', inputSchema: JSON.stringify(FETCH_IN), outputSchema: undefined }];
    return { tools, nodeSpecs: [], prompts: [], resources: [], resourceTemplates: [] };
  },
  async callTool(name, args) {
    if (name !== 'fetch') throw notFound(`tool \`${name}\``);
    try {
      const response = await fetch(JSON.parse(args).url);
      return text(`${response.status} ${await response.text()}`, false);
    } catch (e) {
      // What the guest saw, for the test to read.
      return text(`${e.name}: ${e.message}${e.cause ? ` (${e.cause})` : ''}`, true);
    }
  },
  runNode(name) { throw notFound(`node \`${name}\``); },
  readResource(uri) { throw notFound(`resource \`${uri}\``); },
  getPrompt(name) { throw notFound(`prompt \`${name}\``); },
};
