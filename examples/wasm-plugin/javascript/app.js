// units: a wf source written in JavaScript, built into a WebAssembly component
// with componentize-js (see docs/wasm-plugins.md). The same source as
// ../python/app.py: two tools (`convert`, also a workflow node, and
// `convert_many`, which reports progress and asks the caller for a missing
// unit), a prompt and a resource.
//
//   componentize-js --wit WIT_DIR --world-name source -o units.wasm app.js
import { cancelled, elicit, log, progress } from 'wf:source/host@1.0.0';

// unit -> [dimension, factor to the dimension's base unit]; temperatures are affine (below).
const UNITS = {
  m: ['length', 1], km: ['length', 1000], ft: ['length', 0.3048], mi: ['length', 1609.344],
  kg: ['mass', 1], g: ['mass', 0.001], lb: ['mass', 0.45359237],
  C: ['temperature', 1], F: ['temperature', 1], K: ['temperature', 1],
};
const TO_KELVIN = { C: (v) => v + 273.15, F: (v) => ((v - 32) * 5) / 9 + 273.15, K: (v) => v };
const FROM_KELVIN = { C: (v) => v - 273.15, F: (v) => ((v - 273.15) * 9) / 5 + 32, K: (v) => v };
const NAMES = Object.keys(UNITS).sort();
const UNIT = { type: 'string', enum: NAMES };
const CONVERT_IN = {
  type: 'object', properties: { value: { type: 'number' }, from: UNIT, to: UNIT },
  required: ['value', 'from', 'to'], additionalProperties: false,
};
const CONVERT_OUT = {
  type: 'object', properties: { value: { type: 'number' }, unit: { type: 'string' } }, required: ['value', 'unit'],
};
const MANY_IN = {
  type: 'object', properties: { values: { type: 'array', items: { type: 'number' } }, from: UNIT, to: UNIT },
  required: ['values', 'from'], additionalProperties: false,
};

// Bad arguments: an isError result for a tool, `invalid-arguments` for a node.
class Invalid extends Error {}
const error = (code, message) => ({ code, message, data: undefined });
const round = (v) => Math.round(v * 1e9) / 1e9;

function convert(value, src, dst) {
  for (const unit of [src, dst]) {
    if (!(unit in UNITS)) throw new Invalid(`unknown unit \`${unit}\` (known: ${NAMES.join(', ')})`);
  }
  const [dim, fSrc] = UNITS[src];
  const [dimDst, fDst] = UNITS[dst];
  if (dim !== dimDst) throw new Invalid(`cannot convert ${dim} (\`${src}\`) to ${dimDst} (\`${dst}\`)`);
  if (dim === 'temperature') return round(FROM_KELVIN[dst](TO_KELVIN[src](value)));
  return round((value * fSrc) / fDst);
}

function convertNode(args) {
  if (typeof args.value !== 'number') throw new Invalid('argument `value` must be a number');
  return { value: convert(args.value, args.from, args.to), unit: args.to };
}

function convertMany(args) {
  const values = args.values ?? [];
  let dst = args.to;
  if (dst === undefined) {
    // Ask the person behind the call (throws `unsupported` when nobody can be asked).
    const schema = { type: 'object', properties: { to: { type: 'string', enum: NAMES } }, required: ['to'] };
    const answer = elicit(`Convert ${values.length} values from ${args.from} to which unit?`, JSON.stringify(schema));
    if (answer.action !== 'accept' || answer.content === undefined) {
      throw new Invalid('no target unit: the caller did not choose one');
    }
    dst = JSON.parse(answer.content).to;
  }
  const out = [];
  values.forEach((v, i) => {
    if (cancelled()) throw error('cancelled', 'cancelled');
    out.push(convert(v, args.from, dst));
    progress(i + 1, values.length, `${i + 1} of ${values.length}`);
  });
  log('info', `converted ${values.length} values from ${args.from} to ${dst}`);
  return { values: out, unit: dst };
}

function table() {
  const rows = NAMES.filter((u) => UNITS[u][0] !== 'temperature')
    .map((u) => `| \`${u}\` | ${UNITS[u][0]} | ${UNITS[u][1]} |`);
  return '# Units\n\n| unit | dimension | in base units |\n|---|---|---|\n' + rows.join('\n') +
    '\n\nTemperatures: `C`, `F`, `K` (converted through kelvin).\n';
}

export const guest = {
  describe() {
    return { name: 'units', version: '1.0.0', description: 'Converts between units of length, mass and temperature' };
  },

  catalog() {
    return {
      tools: [{
        name: 'convert_many', description: 'Converts a list of values; asks for the target unit when `to` is missing',
        inputSchema: JSON.stringify(MANY_IN), outputSchema: undefined,
      }],
      nodeSpecs: [{
        name: 'convert', description: 'Converts a value from one unit to another',
        inputSchema: JSON.stringify(CONVERT_IN), outputSchema: JSON.stringify(CONVERT_OUT),
        sideEffects: false, stateful: false,
      }],
      prompts: [{
        name: 'explain_unit', description: 'Asks the model to explain a unit',
        arguments: [{ name: 'unit', description: 'A unit symbol, such as `mi`', required: true }],
      }],
      resources: [{ uri: 'units://table', name: 'Unit table', description: 'Every unit this source knows', mimeType: 'text/markdown' }],
      resourceTemplates: [],
    };
  },

  callTool(name, args) {
    const run = { convert: convertNode, convert_many: convertMany }[name];
    if (run === undefined) throw error('not-found', `no tool \`${name}\``);
    try {
      const out = JSON.stringify(run(JSON.parse(args)));
      return { content: [{ tag: 'text', val: out }], structured: out, isError: false };
    } catch (e) {
      if (e instanceof Invalid) return { content: [{ tag: 'text', val: e.message }], structured: undefined, isError: true };
      throw e;
    }
  },

  runNode(name, input) {
    if (name !== 'convert') throw error('not-found', `no node \`${name}\``);
    try {
      return JSON.stringify(convertNode(JSON.parse(input)));
    } catch (e) {
      if (e instanceof Invalid) throw error('invalid-arguments', e.message);
      throw e;
    }
  },

  readResource(uri) {
    if (uri !== 'units://table') throw error('not-found', `no resource \`${uri}\``);
    return [{ uri, mimeType: 'text/markdown', body: { tag: 'text', val: table() } }];
  },

  getPrompt(name, args) {
    if (name !== 'explain_unit') throw error('not-found', `no prompt \`${name}\``);
    const unit = new Map(args).get('unit') ?? '';
    if (!(unit in UNITS)) throw error('invalid-arguments', `no unit \`${unit}\``);
    const text = `Explain the unit \`${unit}\` (${UNITS[unit][0]}) to a newcomer, with one everyday example.`;
    return { description: `Explain ${unit}`, messages: [{ role: 'user', content: { tag: 'text', val: text } }] };
  },
};
