// An upstream MCP server on the official TypeScript SDK (v2,
// `@modelcontextprotocol/server`, pinned in package.json), which speaks both
// 2026-07-28 (`server/discover`, input-required rounds) and 2025-11-25
// (`initialize`; the SDK's legacy shim turns the same rounds into real
// server-to-client requests). The generation-matrix tests
// (test_generations.py) put it behind wf over stdio and streamable HTTP.
//
// Tools:
//   sample       asks the client's model (`sampling/createMessage`) and returns its text
//   elicit       asks for a form (`elicitation/create`) and returns the accepted content as JSON
//   elicit_url   asks the client to open a URL (URL-mode elicitation) and returns the action
//   roots        asks for the client's roots and returns their URIs as JSON
//   progress     sends `steps` progress notifications, `gap_ms` (default 50) apart, when the call has a progress token
//   touch        says `notifications/resources/updated` for its `uri` argument
//   sample_push  asks the client's model with a request mid-call, as servers written for
//                2025-11-25 do: only a 2025-11-25 session carries it (the SDK refuses it
//                on 2026-07-28, as the conformance suite's reference server's 2026 path does)
//   log          logs one line at each of debug, info and warning
//   meta         returns the request's `_meta` keys outside `io.modelcontextprotocol/`, and
//                a `_meta` of its own on the result
//   wait         appends `started` to the file `marker`, waits until the call is cancelled
//                (at most 60 s), then appends `cancelled`
//   add_tool     adds a tool `added` (to every instance from then on) and says
//                `notifications/tools/list_changed`
//   test_sampling, test_elicitation
//                the conformance suite 0.1.16's tools of those names (as its scenarios
//                describe them), asking in rounds as `sample` and `elicit` do
//   task         with a request that declares the tasks extension (SEP-2663), answers
//                with a task handle; the task completes with `task done: <text>`, or with
//                `hold` works until cancelled. Without the extension: the plain result.
//                `tasks/get`, `tasks/update` and `tasks/cancel` serve these tasks (see TASKS below)
//   test_tool_with_progress, test_elicitation_sep1034_defaults, test_elicitation_sep1330_enums
//                the conformance suite 0.1.16's tools of those names (as its scenarios
//                describe them): progress 0, 50 and 100 of 100; a form whose fields have
//                defaults; a form with each kind of enum (asked in rounds)
//   test_simple_text, test_error_handling, test_image_content, test_audio_content,
//   test_embedded_resource, test_multiple_content_types
//                the 2026-07-28 set's content tools (as its scenarios describe them): a
//                text, a tool error, a 1x1 PNG, a short WAV, an embedded resource, and
//                text, image and resource together
//   test_input_required_result_elicitation
//                the conformance suite's input-required tool (as its scenarios describe
//                it): asks for `user_name` in a round, then says hello
//   test_input_required_result_sampling, _list_roots, _multiple_inputs, _multi_round,
//   _request_state, _capabilities
//                the other tools the 2026-07-28 requirement set's input-required
//                scenarios call by name, as their descriptions ask: one sampling round;
//                one roots round; elicitation, sampling and roots in one round with a
//                requestState; two rounds, each with a state of its own; a state the
//                retry must echo (`state-ok`); and rounds only for the capabilities the
//                request declared
//   test_input_required_result_tampered_state
//                a round whose retry must echo its requestState unchanged (the server's
//                `requestState.verify` refuses a state it did not mint: -32602)
//   prompt test_input_required_result_prompt
//                asks for a context in a round, then returns a message with it
//   three_asks   elicitation, sampling and roots in one round (keys who, capital, where),
//                then echoes the keys and answers of the one retry (test_generations_rounds.py)
//   json_schema_2020_12_tool, prompts test_simple_prompt, test_prompt_with_arguments
//   (completable arg1), test_prompt_with_embedded_resource, test_prompt_with_image,
//   resources test://static-text, test://static-binary, template test://template/{id}/data
//                what the 2026-07-28 set's prompt, resource, completion and JSON Schema
//                scenarios use by name (as their descriptions ask)
//   greet, slow_compute, failing_job, protocol_error_job
//   confirm_delete, multi_input
//                the tasks extension's `tasks-mrtr-input` tools: with the extension
//                declared, a task that waits in `input_required` on one (`confirm`) or two
//                (`first`, `second`) form elicitations, answered with `tasks/update`
//                (a subset of keys at a time), then completes naming the answers. Without
//                it, the same asks in an input-required round
//                the tasks extension scenarios' tools (as `tasks-lifecycle` describes
//                them): `greet` answers at once; with the extension declared, the others
//                answer with a task that completes after `seconds` (cancellable), completes
//                with a tool error, or fails with a JSON-RPC error
//   header_echo  echoes `region`, which its schema mirrors into the `Mcp-Param-Region`
//                header (SEP-2243, `http-custom-header-server-validation`)
//   test_tool_with_task
//                asks for `user_name` in a round, then answers with a task whose result
//                names it (`tasks-mrtr-composition`)
//
// Resources `test://watched` and `test://watched-resource` (subscribable), prompt `greet` with a completable argument,
// prompt `refuse`, which fails with a JSON-RPC error carrying a code and `data`.

import { appendFileSync } from 'node:fs';
import http from 'node:http';

import { McpServer, ProtocolError, ResourceTemplate, inputRequired, completable, createMcpHandler, fromJsonSchema } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import * as z from 'zod';

const WATCHED = 'test://watched';
// Whether `add_tool` was called: every instance built from then on lists `added`.
let added = false;

// serveStdio picks the generation from the connection's opening
// (`server/discover` or `initialize`) and pins one instance of this factory to it.
function build() {
const server = new McpServer(
  { name: 'wf-ts-generations-upstream', version: '1.0.0' },
  {
    capabilities: {
      logging: {},
      resources: { subscribe: true, listChanged: true },
      extensions: { [TASKS_EXTENSION]: {} }
    },
    // The only states these tools mint are fixed words: any other is refused (-32602).
    requestState: {
      verify: state => {
        if (!MINTED_STATES.has(state)) throw new Error('not a state of ours');
      }
    }
  }
);
serveTasks(server);


server.registerTool(
  'sample',
  { description: 'Asks the client to sample a message', inputSchema: z.object({ prompt: z.string() }) },
  async ({ prompt }, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.llm;
    if (!answer) {
      return inputRequired({
        inputRequests: {
          llm: inputRequired.createMessage({
            messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
            maxTokens: 50
          })
        }
      });
    }
    const content = Array.isArray(answer.content) ? answer.content[0] : answer.content;
    return text(`sampled: ${content?.text}`);
  }
);

server.registerTool(
  'elicit',
  { description: 'Asks the user for a name', inputSchema: z.object({}) },
  async (_args, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.form;
    if (!answer) {
      return inputRequired({
        inputRequests: {
          form: inputRequired.elicit({
            message: 'Who are you?',
            requestedSchema: z.object({ name: z.string() })
          })
        }
      });
    }
    return text(`elicited: ${answer.action} ${JSON.stringify(answer.content ?? null)}`);
  }
);

server.registerTool(
  'elicit_url',
  { description: 'Asks the user to open a URL', inputSchema: z.object({}) },
  async (_args, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.visit;
    if (!answer) {
      return inputRequired({
        inputRequests: {
          visit: inputRequired.elicitUrl({ message: 'Please sign in', url: 'https://example.com/sign-in' })
        }
      });
    }
    return text(`url elicitation: ${answer.action}`);
  }
);

server.registerTool(
  'roots',
  { description: "Lists the client's roots", inputSchema: z.object({}) },
  async (_args, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.roots;
    if (!answer) {
      return inputRequired({ inputRequests: { roots: inputRequired.listRoots() } });
    }
    return text(`roots: ${JSON.stringify((answer.roots ?? []).map(r => r.uri))}`);
  }
);

server.registerTool(
  'progress',
  {
    description: 'Reports progress',
    inputSchema: z.object({ steps: z.number().int().min(1).max(20), gap_ms: z.number().int().min(0).max(1000).optional() })
  },
  async ({ steps, gap_ms = 50 }, ctx) => {
    const token = ctx.mcpReq._meta?.progressToken;
    for (let i = 1; i <= steps; i++) {
      if (token !== undefined) {
        await ctx.mcpReq.notify({
          method: 'notifications/progress',
          params: { progressToken: token, progress: i, total: steps, message: `step ${i}` }
        });
      }
      if (gap_ms > 0) await new Promise(resolve => setTimeout(resolve, gap_ms));
    }
    return text(`progress: ${steps} steps, token ${token === undefined ? 'absent' : 'present'}`);
  }
);

server.registerTool(
  'touch',
  { description: 'Says that a resource changed', inputSchema: z.object({ uri: z.string() }) },
  async ({ uri }) => {
    await server.server.sendResourceUpdated({ uri });
    handler?.notify.resourceUpdated(uri);
    return text(`touched ${uri}`);
  }
);

server.registerTool(
  'sample_push',
  { description: 'Asks the client to sample a message, with a request mid-call', inputSchema: z.object({ prompt: z.string() }) },
  async ({ prompt }, ctx) => {
    try {
      const answer = await ctx.mcpReq.requestSampling({
        messages: [{ role: 'user', content: { type: 'text', text: prompt } }],
        maxTokens: 50
      });
      const content = Array.isArray(answer.content) ? answer.content[0] : answer.content;
      return text(`sampled: ${content?.text}`);
    } catch (e) {
      return { content: [{ type: 'text', text: `sampling failed: ${e.message}` }], isError: true };
    }
  }
);

server.registerTool('log', { description: 'Logs three lines', inputSchema: z.object({}) }, async (_args, ctx) => {
  for (const level of ['debug', 'info', 'warning']) await ctx.mcpReq.log(level, `${level} line`, 'ts');
  return text('logged');
});

server.registerTool('meta', { description: "Echoes the request's _meta", inputSchema: z.object({}) }, async (_args, ctx) => {
  const meta = Object.fromEntries(
    Object.entries(ctx.mcpReq._meta ?? {}).filter(([k]) => !k.startsWith('io.modelcontextprotocol/') && k !== 'progressToken')
  );
  return { ...text(JSON.stringify(meta)), _meta: { 'example.com/upstream': 'from the upstream' } };
});

server.registerPrompt('refuse', { description: 'Always fails', argsSchema: z.object({}) }, async () => {
  throw new ProtocolError(-32050, 'the upstream refuses', { reason: 'test', n: 1 });
});

server.registerTool(
  'wait',
  { description: 'Waits until cancelled', inputSchema: z.object({ marker: z.string() }) },
  async ({ marker }, ctx) => {
    appendFileSync(marker, 'started\n');
    const signal = ctx.mcpReq.signal;
    await new Promise(resolve => {
      const timer = setTimeout(resolve, 60_000);
      signal.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve();
      });
    });
    if (signal.aborted) appendFileSync(marker, 'cancelled\n');
    return text('waited');
  }
);

server.registerTool('add_tool', { description: 'Adds the tool `added`', inputSchema: z.object({}) }, async () => {
  if (!added) {
    added = true;
    addTool(server);
    server.sendToolListChanged();
    handler?.notify.toolsChanged();
  }
  return text('added');
});
if (added) addTool(server);

server.registerTool(
  'test_sampling',
  { description: 'Asks the client to sample a message', inputSchema: z.object({ prompt: z.string() }) },
  async ({ prompt }, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.llm;
    if (!answer) {
      return inputRequired({
        inputRequests: {
          llm: inputRequired.createMessage({ messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 50 })
        }
      });
    }
    const content = Array.isArray(answer.content) ? answer.content[0] : answer.content;
    return text(`LLM response: ${content?.text}`);
  }
);

server.registerTool(
  'test_elicitation',
  { description: 'Asks the user for input', inputSchema: z.object({ message: z.string() }) },
  async ({ message }, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.form;
    if (!answer) {
      return inputRequired({
        inputRequests: { form: inputRequired.elicit({ message, requestedSchema: z.object({ name: z.string() }) }) }
      });
    }
    return text(`User response: ${answer.action}`);
  }
);

server.registerTool(
  'test_input_required_result_elicitation',
  { description: 'Asks for a name in a round', inputSchema: z.object({}) },
  async (_args, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.user_name;
    if (answer?.action !== 'accept' || typeof answer.content?.name !== 'string') {
      return inputRequired({
        inputRequests: {
          user_name: inputRequired.elicit({
            message: 'What is your name?',
            requestedSchema: z.object({ name: z.string() })
          })
        }
      });
    }
    return text(`Hello, ${answer.content.name}!`);
  }
);

server.registerTool(
  'task',
  { description: 'Runs as a task when asked to', inputSchema: z.object({ text: z.string(), hold: z.boolean().optional() }) },
  async ({ text: said, hold }, ctx) => {
    const caps = ctx.mcpReq.envelope?.['io.modelcontextprotocol/clientCapabilities'];
    if (!caps?.extensions?.[TASKS_EXTENSION]) return text(`done: ${said}`);
    const now = new Date().toISOString();
    const task = { taskId: `ts-task-${++taskCount}`, status: 'working', createdAt: now, lastUpdatedAt: now, ttlMs: 600_000, pollIntervalMs: 100 };
    TASKS.set(task.taskId, task);
    if (!hold) {
      setImmediate(() => {
        if (task.status !== 'working') return;
        Object.assign(task, { status: 'completed', lastUpdatedAt: new Date().toISOString(), result: text(`task done: ${said}`) });
      });
    }
    return { resultType: 'task', ...withoutResult(task) };
  }
);

const noArgs = z.object({});

// The tasks extension scenarios' tools (conformance 0.2.0-alpha.12, `tasks-lifecycle`;
// written from its description): `greet` answers at once; the others answer with a task
// when the request declares the extension. `slow_compute` completes after `seconds`
// (cancellable meanwhile), `failing_job` completes with a tool error, and
// `protocol_error_job` fails with a JSON-RPC error.
server.registerTool('greet', { description: 'Greets at once', inputSchema: z.object({ name: z.string() }) }, async ({ name }) => text(`Hello, ${name}!`));
// A task that settles after `ms` with `end` ({result} or {error}).
function startTask(ms, end) {
  const now = new Date().toISOString();
  const task = { taskId: `ts-task-${++taskCount}`, status: 'working', createdAt: now, lastUpdatedAt: now, ttlMs: 600_000, pollIntervalMs: 100 };
  TASKS.set(task.taskId, task);
  setTimeout(() => {
    if (task.status !== 'working') return;
    const status = end.error ? 'failed' : 'completed';
    Object.assign(task, { status, lastUpdatedAt: new Date().toISOString(), ...end });
  }, ms);
  return { resultType: 'task', ...withoutResult(task) };
}
const declaresTasks = ctx => Boolean(ctx.mcpReq.envelope?.['io.modelcontextprotocol/clientCapabilities']?.extensions?.[TASKS_EXTENSION]);
// A tool that runs only as a task refuses a client without the extension: -32021 with
// the capability it needs (the SDK turns the throw into a tool error result, so
// `tasks-required-task-error` fails against this upstream directly).
const tasksRequired = () =>
  new ProtocolError(-32021, 'this tool runs only as a task: declare the tasks extension', {
    requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } }
  });
const jobTool = (name, description, inputSchema, settle, required = false) =>
  server.registerTool(name, { description, inputSchema }, async (args, ctx) => {
    const [ms, end] = settle(args);
    if (!declaresTasks(ctx)) {
      if (required) throw tasksRequired();
      return end.result ?? text(`${name}: ${end.error?.message}`);
    }
    return startTask(ms, end);
  });
jobTool('slow_compute', 'Computes for `seconds`, as a task', z.object({ seconds: z.number(), label: z.string().optional() }), ({ seconds, label }) => [
  seconds * 1000,
  { result: text(`computed ${label ?? ''} in ${seconds} s`) }
]);
jobTool(
  'failing_job',
  'A task whose tool fails (runs only as a task)',
  z.object({}).passthrough(),
  () => [300, { result: { isError: true, content: [{ type: 'text', text: 'the job failed' }] } }],
  true
);
// A tool whose `region` argument also travels as the `Mcp-Param-Region` header
// (SEP-2243; `http-custom-header-server-validation`).
server.registerTool(
  'header_echo',
  {
    description: 'Echoes its region, which is mirrored into an HTTP header',
    inputSchema: fromJsonSchema({
      type: 'object',
      properties: { region: { type: 'string', 'x-mcp-header': 'Region' } },
      required: ['region']
    })
  },
  async ({ region }) => text(`region: ${region}`)
);
// Asks for `user_name` in a round, then runs as a task whose result names it.
server.registerTool('test_tool_with_task', { description: 'A round, then a task', inputSchema: noArgs }, async (_a, ctx) => {
  if (!declaresTasks(ctx)) throw tasksRequired();
  const answer = ctx.mcpReq.inputResponses?.user_name;
  if (answer?.action !== 'accept') return inputRequired({ inputRequests: { user_name: nameForm() } });
  return startTask(100, { result: text(`Hello from the task, ${answer.content?.name}!`) });
});
jobTool('protocol_error_job', 'A task that fails with a protocol error', z.object({}).passthrough(), () => [
  300,
  { error: { code: -32603, message: 'the job crashed' } }
]);
// A task that waits in input_required until `tasks/update` answered every key of
// `asks`; then it completes with `done(answers)`.
function startInputTask(asks, done) {
  const now = new Date().toISOString();
  const task = { taskId: `ts-task-${++taskCount}`, status: 'input_required', createdAt: now, lastUpdatedAt: now, ttlMs: 600_000, pollIntervalMs: 100, inputRequests: { ...asks } };
  TASKS.set(task.taskId, task);
  WAITING.set(task.taskId, { answers: {}, done });
  const { inputRequests: _asks, ...created } = withoutResult(task);
  return { resultType: 'task', ...created };
}
const confirmForm = () => inputRequired.elicit({ message: 'Delete it?', requestedSchema: z.object({ confirm: z.boolean() }) });
const inputTool = (name, description, inputSchema, asks, done) =>
  server.registerTool(name, { description, inputSchema }, async (args, ctx) => {
    if (declaresTasks(ctx)) return startInputTask(asks(), answers => done(args, answers));
    const got = ctx.mcpReq.inputResponses ?? {};
    const missing = Object.fromEntries(Object.entries(asks()).filter(([k]) => !got[k]));
    return Object.keys(missing).length ? inputRequired({ inputRequests: missing }) : done(args, got);
  });
inputTool('confirm_delete', 'Asks before it deletes `filename` (a task with the extension)', z.object({ filename: z.string() }), () => ({ confirm: confirmForm() }), ({ filename }, a) =>
  text(`${filename}: ${a.confirm?.content?.confirm ? 'deleted' : 'kept'}`)
);
inputTool('multi_input', 'Asks two things at once (a task with the extension)', noArgs, () => ({ first: nameForm(), second: confirmForm() }), (_args, a) =>
  text(`answers: ${a.first?.content?.name}, ${a.second?.content?.confirm}`)
);
const capitalQuestion = inputRequired.createMessage({
  messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }],
  maxTokens: 50
});
const nameForm = () => inputRequired.elicit({ message: 'What is your name?', requestedSchema: z.object({ name: z.string() }) });

server.registerTool('test_input_required_result_sampling', { description: 'One sampling round', inputSchema: noArgs }, async (_a, ctx) => {
  const answer = ctx.mcpReq.inputResponses?.capital_question;
  if (!answer) return inputRequired({ inputRequests: { capital_question: capitalQuestion } });
  const content = Array.isArray(answer.content) ? answer.content[0] : answer.content;
  return text(`The model said: ${content?.text}`);
});

server.registerTool('test_input_required_result_list_roots', { description: 'One roots round', inputSchema: noArgs }, async (_a, ctx) => {
  const answer = ctx.mcpReq.inputResponses?.client_roots;
  if (!answer) return inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
  return text(`roots: ${(answer.roots ?? []).map(r => r.uri).join(', ')}`);
});

server.registerTool('test_input_required_result_multiple_inputs', { description: 'Three asks in one round', inputSchema: noArgs }, async (_a, ctx) => {
  const answers = ctx.mcpReq.inputResponses ?? {};
  const asks = { who: nameForm(), capital: capitalQuestion, where: inputRequired.listRoots() };
  if (ctx.mcpReq.requestState() !== 'three-asked' || !Object.keys(asks).every(k => answers[k])) {
    return inputRequired({ inputRequests: asks, requestState: 'three-asked' });
  }
  return text('all three answered');
});

// Asks three things in one round and echoes what came back: which keys (all three
// at once, under its own), the answers, the state (test_generations_rounds.py).
server.registerTool('three_asks', { description: 'Three asks in one round, answers echoed', inputSchema: noArgs }, async (_a, ctx) => {
  const answers = ctx.mcpReq.inputResponses;
  if (!answers) {
    return inputRequired({ inputRequests: { who: nameForm(), capital: capitalQuestion, where: inputRequired.listRoots() }, requestState: 'three' });
  }
  const said = Array.isArray(answers.capital?.content) ? answers.capital.content[0] : answers.capital?.content;
  return text(JSON.stringify({
    state: ctx.mcpReq.requestState(),
    keys: Object.keys(answers).sort(),
    name: answers.who?.content?.name,
    said: said?.text,
    roots: (answers.where?.roots ?? []).map(r => r.uri)
  }));
});

server.registerTool('test_input_required_result_multi_round', { description: 'Two rounds', inputSchema: noArgs }, async (_a, ctx) => {
  const state = ctx.mcpReq.requestState();
  const answers = ctx.mcpReq.inputResponses ?? {};
  if (state === 'round-2' && answers.color) return text(`done: ${answers.color.content?.color}`);
  if (state === 'round-1' && answers.who) {
    const color = inputRequired.elicit({ message: 'Favourite colour?', requestedSchema: z.object({ color: z.string() }) });
    return inputRequired({ inputRequests: { color }, requestState: 'round-2' });
  }
  return inputRequired({ inputRequests: { who: nameForm() }, requestState: 'round-1' });
});

server.registerTool('test_input_required_result_request_state', { description: 'A state to echo', inputSchema: noArgs }, async (_a, ctx) => {
  const answer = ctx.mcpReq.inputResponses?.confirm;
  if (answer && ctx.mcpReq.requestState() === 'echo-me') return text('state-ok');
  const confirm = inputRequired.elicit({ message: 'Go on?', requestedSchema: z.object({ ok: z.boolean() }) });
  return inputRequired({ inputRequests: { confirm }, requestState: 'echo-me' });
});

server.registerTool('test_input_required_result_capabilities', { description: 'Asks only what the client can answer', inputSchema: noArgs }, async (_a, ctx) => {
  if (ctx.mcpReq.inputResponses) return text('answered');
  const caps = ctx.mcpReq.envelope?.['io.modelcontextprotocol/clientCapabilities'] ?? {};
  const asks = {};
  if (caps.elicitation) asks.who = nameForm();
  if (caps.sampling) asks.capital = capitalQuestion;
  if (caps.roots) asks.where = inputRequired.listRoots();
  if (Object.keys(asks).length === 0) return text('nothing to ask');
  return inputRequired({ inputRequests: asks });
});

server.registerTool('test_input_required_result_tampered_state', { description: 'A state that must come back unchanged', inputSchema: noArgs }, async (_a, ctx) => {
  if (ctx.mcpReq.requestState() === 'sealed' && ctx.mcpReq.inputResponses?.confirm) return text('state intact');
  const confirm = inputRequired.elicit({ message: 'Go on?', requestedSchema: z.object({ ok: z.boolean() }) });
  return inputRequired({ inputRequests: { confirm }, requestState: 'sealed' });
});

server.registerPrompt('test_input_required_result_prompt', { description: 'Asks for a context in a round', argsSchema: z.object({}) }, async (_a, ctx) => {
  const answer = ctx.mcpReq.inputResponses?.user_context;
  if (!answer) {
    const ask = inputRequired.elicit({ message: 'Which context?', requestedSchema: z.object({ context: z.string() }) });
    return inputRequired({ inputRequests: { user_context: ask } });
  }
  return { messages: [{ role: 'user', content: { type: 'text', text: `Context: ${answer.content?.context}` } }] };
});

server.registerTool('test_tool_with_progress', { description: 'Reports progress three times', inputSchema: noArgs }, async (_a, ctx) => {
  const token = ctx.mcpReq._meta?.progressToken;
  for (const progress of [0, 50, 100]) {
    if (token !== undefined) await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } });
    if (progress < 100) await new Promise(resolve => setTimeout(resolve, 50));
  }
  return text('progress reported');
});

// A form asked in a round; the tool says what came back.
function formTool(name, description, requestedSchema) {
  server.registerTool(name, { description, inputSchema: noArgs }, async (_a, ctx) => {
    const answer = ctx.mcpReq.inputResponses?.form;
    if (!answer) return inputRequired({ inputRequests: { form: inputRequired.elicit({ message: description, requestedSchema }) } });
    return text(`Elicitation completed: action=${answer.action}, content=${JSON.stringify(answer.content ?? {})}`);
  });
}

formTool('test_elicitation_sep1034_defaults', 'Fields with defaults', {
  type: 'object',
  properties: {
    name: { type: 'string', default: 'John Doe' },
    age: { type: 'integer', default: 30 },
    score: { type: 'number', default: 95.5 },
    status: { type: 'string', enum: ['active', 'inactive', 'pending'], default: 'active' },
    verified: { type: 'boolean', default: true }
  }
});

formTool('test_elicitation_sep1330_enums', 'Each kind of enum', {
  type: 'object',
  properties: {
    untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
    titledSingle: {
      type: 'string',
      oneOf: [
        { const: 'value1', title: 'First Option' },
        { const: 'value2', title: 'Second Option' },
        { const: 'value3', title: 'Third Option' }
      ]
    },
    legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
    untitledMulti: { type: 'array', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
    titledMulti: {
      type: 'array',
      items: {
        anyOf: [
          { const: 'value1', title: 'First Choice' },
          { const: 'value2', title: 'Second Choice' },
          { const: 'value3', title: 'Third Choice' }
        ]
      }
    }
  }
});

// A one-pixel red PNG and eight samples of 8 kHz silence as a WAV, generated for these tests.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC';
const WAV = 'UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==';
const contentTools = {
  test_simple_text: () => text('This is a simple text response for testing.'),
  test_error_handling: () => ({ isError: true, content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] }),
  test_image_content: () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }),
  test_audio_content: () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }),
  test_embedded_resource: () => ({
    content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }]
  }),
  test_multiple_content_types: () => ({
    content: [
      { type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } }
    ]
  })
};
for (const [name, answer] of Object.entries(contentTools)) {
  server.registerTool(name, { description: `Content: ${name}`, inputSchema: noArgs }, async () => answer());
}

// The conformance suite 0.2.0-alpha.12's prompts, resources, completion and JSON
// Schema 2020-12 tool, under the names its scenarios use (written from the scenarios'
// descriptions; test_conformance_2026.py).
server.registerPrompt('test_simple_prompt', { description: 'A prompt without arguments', argsSchema: z.object({}) }, async () => ({
  messages: [{ role: 'user', content: { type: 'text', text: 'A simple prompt, no arguments.' } }]
}));
server.registerPrompt(
  'test_prompt_with_arguments',
  {
    description: 'A prompt with two arguments',
    argsSchema: z.object({ arg1: completable(z.string(), v => ['test', 'testing', 'other'].filter(a => a.startsWith(v))), arg2: z.string() })
  },
  async ({ arg1, arg2 }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `first: ${arg1}; second: ${arg2}` } }] })
);
server.registerPrompt(
  'test_prompt_with_embedded_resource',
  { description: 'A prompt that embeds the resource it is given', argsSchema: z.object({ resourceUri: z.string() }) },
  async ({ resourceUri }) => ({
    messages: [
      { role: 'user', content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'embedded for the prompt' } } },
      { role: 'user', content: { type: 'text', text: 'Summarise the resource above.' } }
    ]
  })
);
server.registerPrompt('test_prompt_with_image', { description: 'A prompt with an image', argsSchema: z.object({}) }, async () => ({
  messages: [
    { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
    { role: 'user', content: { type: 'text', text: 'Describe the image above.' } }
  ]
}));
server.registerResource('static-text', 'test://static-text', { description: 'A text resource', mimeType: 'text/plain' }, async uri => ({
  contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'static text of the generation upstream' }]
}));
server.registerResource('static-binary', 'test://static-binary', { description: 'A binary resource', mimeType: 'image/png' }, async uri => ({
  contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG }]
}));
server.registerResource(
  'template-data',
  new ResourceTemplate('test://template/{id}/data', { list: undefined }),
  { description: 'A resource per id', mimeType: 'application/json' },
  async (uri, { id }) => ({ contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify({ id }) }] })
);
server.registerTool(
  'json_schema_2020_12_tool',
  {
    description: 'Takes an input schema that uses JSON Schema 2020-12 keywords',
    inputSchema: fromJsonSchema({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      $defs: { address: { $anchor: 'address', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
      properties: { name: { type: 'string' }, kind: { type: 'string' }, address: { $ref: '#/$defs/address' } },
      additionalProperties: false,
      allOf: [{ anyOf: [{ required: ['name'] }, { required: ['address'] }] }],
      if: { properties: { kind: { const: 'company' } }, required: ['kind'] },
      then: { required: ['name'] },
      else: {}
    })
  },
  async args => text(`got ${JSON.stringify(args)}`)
);

server.registerResource('watched-resource', 'test://watched-resource', { description: 'The conformance suite subscribes to it' }, async uri => ({
  contents: [{ uri: uri.href, text: 'watched' }]
}));

server.registerResource('watched', WATCHED, { description: 'A resource to subscribe to' }, async uri => ({
  contents: [{ uri: uri.href, text: 'watched' }]
}));

server.registerPrompt(
  'greet',
  {
    description: 'Greets someone',
    argsSchema: z.object({ name: completable(z.string(), v => ['Ada', 'Alan', 'Grace'].filter(n => n.startsWith(v))) })
  },
  async ({ name }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Hello ${name}` } }] })
);

return server;
}

// SEP-2663 tasks, written by hand: the SDK has none at run time (its typings: "Task
// methods are 2025-11-25 wire vocabulary with no SDK runtime"), but on 2026-07-28 it
// lets a server register `tasks/get` and `tasks/cancel` with schemas of its own (the
// tasks extension reuses those names). One table for every instance (over HTTP each
// request gets an instance of its own).
const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
const MINTED_STATES = new Set(['three', 'three-asked', 'round-1', 'round-2', 'echo-me', 'sealed']);
const TASKS = new Map();
// Tasks waiting for input: their answers so far and what completes them.
const WAITING = new Map();
let taskCount = 0;

function withoutResult(task) {
  const { result: _result, error: _error, ...rest } = task;
  return rest;
}

function serveTasks(server) {
  const byId = z.object({ taskId: z.string() }).passthrough();
  const known = taskId => {
    const task = TASKS.get(taskId);
    if (!task) throw new ProtocolError(-32602, `no task ${taskId}`);
    return task;
  };
  server.server.setRequestHandler('tasks/get', { params: byId }, async ({ taskId }) => ({ resultType: 'complete', ...known(taskId) }));
  server.server.setRequestHandler('tasks/cancel', { params: byId }, async ({ taskId }) => {
    const task = known(taskId);
    if (task.status === 'working' || task.status === 'input_required') {
      WAITING.delete(taskId);
      delete task.inputRequests;
      Object.assign(task, { status: 'cancelled', lastUpdatedAt: new Date().toISOString() });
    }
    return { resultType: 'complete' };
  });
  // Answers to a waiting task's requests, some keys at a time; the last one completes it.
  // The SDK takes `inputResponses` out of the params into the request's context.
  server.server.setRequestHandler('tasks/update', { params: byId }, async ({ taskId, inputResponses: inParams }, ctx) => {
    const inputResponses = inParams ?? ctx?.mcpReq?.inputResponses ?? {};
    const task = known(taskId);
    const waiting = WAITING.get(taskId);
    if (!waiting || task.status !== 'input_required') throw new ProtocolError(-32602, `task ${taskId} is not waiting for input`);
    for (const [key, answer] of Object.entries(inputResponses)) {
      if (!(key in task.inputRequests)) continue;
      waiting.answers[key] = answer;
      delete task.inputRequests[key];
    }
    task.lastUpdatedAt = new Date().toISOString();
    if (Object.keys(task.inputRequests).length === 0) {
      WAITING.delete(taskId);
      delete task.inputRequests;
      Object.assign(task, { status: 'completed', result: waiting.done(waiting.answers) });
    }
    return { resultType: 'complete' };
  });
}

function addTool(server) {
  server.registerTool('added', { description: 'Added at run time', inputSchema: z.object({}) }, async () => text('added here'));
}

function text(t) {
  return { content: [{ type: 'text', text: t }] };
}

// `--http PORT [json|sse|auto] [--mute-listen]`: streamable HTTP on
// 127.0.0.1:PORT/mcp (the SDK's web-standard handler under node:http; the second
// argument shapes 2026-07-28 replies; `--mute-listen` takes `subscriptions/listen`
// requests and never answers them). Otherwise stdio.
let handler;
const at = process.argv.indexOf('--http');
if (at >= 0) {
  const port = Number(process.argv[at + 1]);
  const muteListen = process.argv.includes('--mute-listen');
  handler = createMcpHandler(build, { responseMode: process.argv[at + 2] ?? 'auto' });
  http
    .createServer(async (req, res) => {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const body = Buffer.concat(chunks);
      if (muteListen && req.method === 'POST' && JSON.parse(body.toString() || '{}').method === 'subscriptions/listen') {
        // An upstream that takes the listen request and never acknowledges it.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.flushHeaders();
        return;
      }
      const abort = new AbortController();
      res.on('close', () => abort.abort());
      const request = new Request(`http://127.0.0.1:${port}${req.url}`, {
        method: req.method,
        headers: Object.entries(req.headers).flatMap(([k, v]) => (Array.isArray(v) ? v.map(x => [k, x]) : [[k, v]])),
        body: ['GET', 'HEAD', 'DELETE'].includes(req.method) ? undefined : body,
        signal: abort.signal
      });
      const response = await handler.fetch(request);
      res.writeHead(response.status, Object.fromEntries(response.headers));
      if (!response.body) return res.end();
      try {
        for await (const chunk of response.body) res.write(chunk);
      } catch {
        // the client went away
      }
      res.end();
    })
    .listen(port, '127.0.0.1');
} else {
  serveStdio(build);
}
