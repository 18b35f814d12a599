// Drives a running `dscale serve` with the official OpenAI Node SDK, the way applications do:
// models, chat and text completions, streamed and not, usage, stream_options.include_usage,
// stop strings, logprobs, n choices, logit_bias and the penalties, tools, reasoning, JSON mode,
// the Responses API, and error handling. Greedy
// decoding makes streamed and non-streamed text equal.
//
// Usage: DSCALE_URL=http://127.0.0.1:PORT/v1 node sdk_test.mjs [rounds]

import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.DSCALE_URL;
if (!baseURL) throw new Error('set DSCALE_URL, e.g. http://127.0.0.1:8000/v1');
const rounds = Number(process.argv[2] ?? 1);
// One server answers every request (DSCALE_ONE_SERVER=1), not several behind a balancer: what
// a server keeps between requests (the prefix cache, stored responses) is then checked too.
const oneServer = process.env.DSCALE_ONE_SERVER === '1';
const client = new OpenAI({baseURL, apiKey: 'not-needed', maxRetries: 0, timeout: 120_000});

function checkUsage(usage) {
  assert.ok(usage.prompt_tokens > 0, 'prompt_tokens');
  assert.ok(usage.completion_tokens > 0, 'completion_tokens');
  assert.equal(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens);
}

// The usage of a request sent again: the same counts, and on one server (not behind a balancer
// that may send it to another) the prompt's pages the first one computed found in the prefix
// cache (all but the page of its last token, at least).
function checkRepeatUsage(again, first) {
  for (const key of ['prompt_tokens', 'completion_tokens', 'total_tokens']) {
    assert.equal(again[key], first[key], key);
  }
  const cached = again.prompt_tokens_details.cached_tokens;
  assert.ok(cached >= 0 && cached < again.prompt_tokens, 'cached_tokens');
  if (oneServer) {
    assert.ok(cached >= first.prompt_tokens_details.cached_tokens, 'cached_tokens');
    assert.ok(cached >= again.prompt_tokens - 16, 'cached_tokens');
  }
  assert.deepEqual(again.completion_tokens_details, first.completion_tokens_details);
}

async function collectChat(stream) {
  let text = '', finish = null, usage = null, role = null, chunks = 0;
  for await (const chunk of stream) {
    ++chunks;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      role ??= choice.delta.role ?? null;
      text += choice.delta.content ?? '';
      finish ??= choice.finish_reason;
    }
  }
  return {text, finish, usage, role, chunks};
}

async function collectText(stream) {
  let text = '', finish = null, usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'text_completion');
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      text += choice.text;
      finish ??= choice.finish_reason;
    }
  }
  return {text, finish, usage};
}

async function chat(model, content) {
  const request = {model, messages: [{role: 'system', content: 'Be brief.'}, {role: 'user', content}],
                   max_tokens: 12, temperature: 0};
  const whole = await client.chat.completions.create(request);
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.model, model);
  assert.match(whole.id, /^chatcmpl-/);
  assert.equal(whole.choices.length, 1);
  const message = whole.choices[0].message;
  assert.equal(message.role, 'assistant');
  assert.equal(typeof message.content, 'string');
  assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
  checkUsage(whole.usage);

  const streamed = await collectChat(await client.chat.completions.create(
      {...request, stream: true, stream_options: {include_usage: true}}));
  assert.equal(streamed.role, 'assistant');
  assert.equal(streamed.text, message.content, 'streamed text equals the non-streamed text');
  assert.equal(streamed.finish, whole.choices[0].finish_reason);
  checkRepeatUsage(streamed.usage, whole.usage);

  const plain = await collectChat(await client.chat.completions.create({...request, stream: true}));
  assert.equal(plain.text, message.content);
  assert.equal(plain.usage, null, 'no usage chunk without include_usage');
  return message.content;
}

async function completions(model, prompt) {
  const request = {model, prompt, max_tokens: 16, temperature: 0};
  const whole = await client.completions.create(request);
  assert.equal(whole.object, 'text_completion');
  assert.match(whole.id, /^cmpl-/);
  assert.equal(typeof whole.choices[0].text, 'string');
  assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
  checkUsage(whole.usage);

  const streamed = await collectText(await client.completions.create(
      {...request, stream: true, stream_options: {include_usage: true}}));
  assert.equal(streamed.text, whole.choices[0].text);
  assert.equal(streamed.finish, whole.choices[0].finish_reason);
  checkRepeatUsage(streamed.usage, whole.usage);
  return whole.choices[0].text;
}

// A stop string cuts the text before it, streamed or not.
async function stopStrings(model, prompt, text) {
  const at = [...text.matchAll(/[A-Za-z]{2}/g)].find((m) => m.index > 0);
  if (!at) {
    console.log(`(no letters to stop on in ${JSON.stringify(text)}; stop strings not checked)`);
    return;
  }
  const stop = at[0];
  const want = text.slice(0, text.indexOf(stop));
  const request = {model, prompt, max_tokens: 16, temperature: 0, stop: [stop]};
  const whole = await client.completions.create(request);
  assert.equal(whole.choices[0].text, want);
  assert.equal(whole.choices[0].finish_reason, 'stop');
  const streamed = await collectText(await client.completions.create({...request, stream: true}));
  assert.equal(streamed.text, want);
  assert.equal(streamed.finish, 'stop');
  // Log-probabilities list the tokens of the text returned, not the stop string's: a token may
  // start before the stop and run into it, no further.
  const lp = (await client.completions.create({...request, logprobs: 1})).choices[0].logprobs;
  const joined = lp.tokens.join('');
  // (Tokens named by their bytes, "bytes:\\x99", do not spell the text; the stop is letters.)
  const spelled = lp.tokens.every((t) => !t.startsWith('bytes:'));
  assert.ok((!spelled || joined.startsWith(want)) && !joined.includes(stop, want.length),
            `logprobs tokens ${JSON.stringify(joined)} for text ${JSON.stringify(want)}`);
}

// logprobs, chat's and completions', streamed and not: one entry per token whose text is
// returned (none for the end of turn), the greedy token the most likely, the entries' bytes
// spelling the text, text offsets indexing it, top_logprobs most likely first, the same values
// streamed or not.
async function logprobs(model, prompt) {
  const request = {model, messages: [{role: 'user', content: prompt}], max_tokens: 8,
                   temperature: 0, logprobs: true, top_logprobs: 3};
  const whole = await client.chat.completions.create(request);
  const content = whole.choices[0].logprobs.content;
  assert.ok(content.length <= whole.usage.completion_tokens);
  if (whole.choices[0].finish_reason === 'length') {
    assert.equal(content.length, whole.usage.completion_tokens);
  }
  assert.equal(Buffer.concat(content.map((e) => Buffer.from(e.bytes))).toString('utf8'),
               whole.choices[0].message.content, 'the entries spell the returned text');
  for (const entry of content) {
    assert.equal(entry.top_logprobs.length, 3);
    assert.ok(entry.logprob <= 0);
    assert.ok(entry.top_logprobs[0].logprob - entry.logprob <= 1e-3, 'greedy: the top token');
    assert.deepEqual(Buffer.from(entry.bytes).toString('utf8'), entry.token.startsWith('bytes:')
        ? Buffer.from(entry.bytes).toString('utf8') : entry.token);
  }
  const streamed = [];
  for await (const chunk of await client.chat.completions.create({...request, stream: true})) {
    for (const choice of chunk.choices) streamed.push(...(choice.logprobs?.content ?? []));
  }
  assert.deepEqual(streamed, content, 'streamed logprobs equal the non-streamed ones');

  const text = await client.completions.create(
      {model, prompt, max_tokens: 8, temperature: 0, logprobs: 5});
  const lp = text.choices[0].logprobs;
  assert.ok(lp.tokens.length <= text.usage.completion_tokens);
  assert.equal(lp.token_logprobs.length, lp.tokens.length);
  assert.equal(lp.text_offset[0], 0);
  const chars = [...text.choices[0].text];
  for (let i = 0; i < lp.tokens.length; ++i) {
    const top = Object.values(lp.top_logprobs[i]);
    assert.equal(top.length, 5);
    for (let j = 1; j < top.length; ++j) assert.ok(top[j - 1] >= top[j], 'most likely first');
    assert.ok(lp.token_logprobs[i] <= 0);
    if (!lp.tokens[i].startsWith('bytes:')) {
      const at = chars.slice(lp.text_offset[i]).join('');
      assert.ok(at.startsWith(lp.tokens[i]), `text_offset ${lp.text_offset[i]} indexes the text`);
    }
  }
  await assert.rejects(client.chat.completions.create(
      {model, messages: [{role: 'user', content: 'x'}], top_logprobs: 2}), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, 'top_logprobs');
    return true;
  });
}

// n choices: indexed 0 .. n-1, each its own sampled completion (seeded: the same again), usage
// summed over them; streamed choices arrive interleaved by index and equal the non-streamed.
async function choices(model, prompt) {
  const request = {model, prompt, max_tokens: 8, temperature: 1, seed: 7, n: 3};
  const whole = await client.completions.create(request);
  assert.equal(whole.choices.length, 3);
  whole.choices.forEach((c, i) => assert.equal(c.index, i));
  const again = await client.completions.create(request);
  assert.deepEqual(again.choices.map((c) => c.text), whole.choices.map((c) => c.text));
  const texts = ['', '', ''];
  let usage = null;
  for await (const chunk of await client.completions.create(
      {...request, stream: true, stream_options: {include_usage: true}})) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) texts[c.index] += c.text;
  }
  assert.deepEqual(texts, whole.choices.map((c) => c.text));
  assert.deepEqual(usage, whole.usage);
  const chat = await client.chat.completions.create(
      {model, messages: [{role: 'user', content: prompt}], max_tokens: 4, temperature: 0, n: 2});
  assert.equal(chat.choices.length, 2);
  assert.equal(chat.choices[0].message.content, chat.choices[1].message.content, 'greedy: equal');
}

// logit_bias, the penalties and min_p as clients send them: a bias of 100 on token 32 ("A" in the
// test tokenizer) makes every greedy token that one, the penalties and min_p are taken, and a
// value out of range, or a biased token beyond the vocabulary, is a 400 naming the field.
async function logitRules(model, prompt) {
  const biased = await client.completions.create(
      {model, prompt, max_tokens: 6, temperature: 0, logit_bias: {'32': 100}});
  assert.equal(biased.choices[0].text, 'AAAAAA');
  const penalised = await client.chat.completions.create(
      {model, messages: [{role: 'user', content: prompt}], max_tokens: 8, temperature: 0.7,
       seed: 3, presence_penalty: 1.5, frequency_penalty: 0.5, repetition_penalty: 1.2,
       min_p: 0.05});
  assert.equal(penalised.choices[0].message.role, 'assistant');
  checkUsage(penalised.usage);
  for (const [field, value] of [['presence_penalty', 2.5], ['logit_bias', {'100000': 1}]]) {
    await assert.rejects(client.completions.create({model, prompt: 'x', [field]: value}), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, field);
      return true;
    });
  }
}

// Tools as agents send them: definitions, a history with a call and its result (arguments as
// JSON text, the tool message's tool_call_id), streamed and not; forcing a call is refused.
async function tools(model, prompt) {
  const weather = {type: 'function', function: {
    name: 'get_weather', description: 'The weather in a city', strict: true,
    parameters: {type: 'object', properties: {city: {type: 'string'}}, required: ['city']}}};
  const request = {
    model, max_tokens: 10, temperature: 0, tools: [weather], tool_choice: 'auto',
    messages: [
      {role: 'user', content: prompt},
      {role: 'assistant', content: null, tool_calls: [{id: 'call_1', type: 'function',
        function: {name: 'get_weather', arguments: '{"city": "Paris"}'}}]},
      {role: 'tool', tool_call_id: 'call_1', content: '18 degrees'},
      {role: 'user', content: 'And tomorrow?'}]};
  const whole = await client.chat.completions.create(request);
  const message = whole.choices[0].message;
  assert.equal(message.role, 'assistant');
  // The test model writes no call: its text is the content, whole.
  assert.equal(typeof message.content, 'string');
  assert.equal(message.tool_calls ?? undefined, undefined);
  assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
  const streamed = await collectChat(await client.chat.completions.create({...request, stream: true}));
  assert.equal(streamed.text, message.content);
  // The tools change the prompt.
  const without = await client.chat.completions.create({...request, tools: undefined,
                                                        tool_choice: undefined});
  assert.ok(whole.usage.prompt_tokens > without.usage.prompt_tokens, 'the tools are in the prompt');
  for (const [change, param] of [[{tool_choice: {type: 'function', function: {name: 'nope'}}},
                                  'tool_choice.function.name'],
                                 [{tools: [{type: 'function', function: {name: 'a b'}}]},
                                  'tools[0].function.name']]) {
    await assert.rejects(client.chat.completions.create({...request, ...change}), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, param);
      return true;
    });
  }
}

// A forced tool_choice: the answer is the calls, held to the tools' parameters. A named
// function's arguments are an object's text (whole where the output stopped by itself);
// "required" gives one call or more, or (cut off before its array closed) the text as content.
async function forcedToolCalls(model, prompt) {
  const weather = {type: 'function', function: {
    name: 'get_weather', parameters: {type: 'object', properties: {city: {type: 'string'}},
                                      required: ['city'], additionalProperties: false}}};
  const now = {type: 'function', function: {name: 'now'}};
  const request = {model, max_tokens: 24, temperature: 0, tools: [weather, now],
                   messages: [{role: 'user', content: prompt}],
                   tool_choice: {type: 'function', function: {name: 'get_weather'}}};
  const named = await client.chat.completions.create(request);
  const call = named.choices[0].message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.match(call.id, /^call_[0-9a-f]{24}$/);
  assert.ok(/^\{\s*("c|$)/.test(call.function.arguments), call.function.arguments);
  if (named.choices[0].finish_reason === 'tool_calls') {
    assert.equal(typeof JSON.parse(call.function.arguments).city, 'string');
  }
  let streamedName = '', streamedArguments = '';
  for await (const chunk of await client.chat.completions.create({...request, stream: true})) {
    for (const choice of chunk.choices) {
      for (const delta of choice.delta.tool_calls ?? []) {
        streamedName += delta.function?.name ?? '';
        streamedArguments += delta.function?.arguments ?? '';
      }
    }
  }
  assert.equal(streamedName, 'get_weather');
  assert.equal(streamedArguments, call.function.arguments);
  const required = await client.chat.completions.create({...request, tool_choice: 'required'});
  const message = required.choices[0].message;
  if (required.choices[0].finish_reason === 'tool_calls') {
    assert.ok(message.tool_calls.length >= 1);
    for (const c of message.tool_calls) assert.ok(['get_weather', 'now'].includes(c.function.name));
  } else {
    assert.ok(message.content.trimStart().startsWith('['), message.content);
  }
}

// Thinking on: the reasoning block comes back as reasoning_content (null when the output opens
// none), streamed as delta.reasoning_content; separate_reasoning false keeps it in the content.
async function reasoning(model, prompt) {
  const request = {model, messages: [{role: 'user', content: prompt}], max_tokens: 10,
                   temperature: 0, chat_template_kwargs: {enable_thinking: true}};
  const whole = await client.chat.completions.create(request);
  const message = whole.choices[0].message;
  assert.ok('reasoning_content' in message, 'reasoning_content is reported with thinking on');
  let streamedReasoning = '', streamedContent = '';
  for await (const chunk of await client.chat.completions.create({...request, stream: true})) {
    for (const choice of chunk.choices) {
      streamedReasoning += choice.delta.reasoning_content ?? '';
      streamedContent += choice.delta.content ?? '';
    }
  }
  assert.equal(streamedReasoning, message.reasoning_content ?? '');
  assert.equal(streamedContent, message.content);
  const inline = await client.chat.completions.create({...request, separate_reasoning: false});
  assert.ok(!('reasoning_content' in inline.choices[0].message));
  const reasoningText = message.reasoning_content ?? '';
  assert.ok(inline.choices[0].message.content.includes(reasoningText));
  assert.ok(inline.choices[0].message.content.endsWith(message.content));
  // An output made to open the block (a bias of 100 on "<think>", token 510) and cut off inside
  // it is all reasoning.
  const opened = await client.chat.completions.create(
      {...request, max_tokens: 3, logit_bias: {'510': 100}});
  assert.equal(opened.choices[0].message.reasoning_content, '<think><think>');
  assert.equal(opened.choices[0].message.content, '');
  assert.equal(opened.choices[0].finish_reason, 'length');
  assert.equal(opened.usage.completion_tokens_details.reasoning_tokens, 3);
  // vLLM's thinking_token_budget: after 2 tokens the block must close ("</think>" alone is
  // allowed), and the answer follows.
  const budgeted = await client.chat.completions.create(
      {...request, max_tokens: 6, logit_bias: {'510': 100}, thinking_token_budget: 2});
  assert.equal(budgeted.choices[0].message.reasoning_content, '<think>');
  assert.equal(budgeted.choices[0].message.content, '<think><think><think>');
  assert.equal(budgeted.usage.completion_tokens_details.reasoning_tokens, 3);
}

// JSON mode: the content is a JSON object's text, whole where the output stopped by itself;
// with a schema, its properties in order and of their types; what a schema cannot hold an output
// to is refused naming the keyword.
async function jsonMode(model, prompt) {
  const request = {model, messages: [{role: 'user', content: prompt}], max_tokens: 64,
                   temperature: 0, response_format: {type: 'json_object'}};
  const whole = await client.chat.completions.create(request);
  const content = whole.choices[0].message.content;
  assert.ok(content.startsWith('{'), content);
  if (whole.choices[0].finish_reason === 'stop') {
    assert.equal(typeof JSON.parse(content), 'object');
  }
  const streamed = await collectChat(await client.chat.completions.create({...request, stream: true}));
  assert.equal(streamed.text, content);
  const schema = {type: 'object', properties: {answer: {type: 'string'}, steps: {type: 'integer'}},
                  required: ['answer', 'steps'], additionalProperties: false};
  const held = await client.chat.completions.create({...request, response_format:
      {type: 'json_schema', json_schema: {name: 'solution', strict: true, schema}}});
  const text = held.choices[0].message.content;
  assert.ok(/^\{\s*("a|$)/.test(text), text);
  if (held.choices[0].finish_reason === 'stop') {
    const value = JSON.parse(text);
    assert.deepEqual(Object.keys(value), ['answer', 'steps']);
    assert.equal(typeof value.answer, 'string');
    assert.ok(Number.isInteger(value.steps), text);
  }
  // A string's pattern and length, a number's bounds.
  const shaped = {type: 'object', properties: {
    code: {type: 'string', pattern: '^[A-Z]{3}-\\d{2}$'},
    score: {type: 'number', minimum: 0, maximum: 1},
    note: {type: 'string', minLength: 2, maxLength: 8}, when: {type: 'string', format: 'date'}},
    required: ['code', 'score', 'note', 'when']};
  const bounded = await client.chat.completions.create({...request, response_format:
      {type: 'json_schema', json_schema: {name: 'shaped', schema: shaped}}});
  const boundedText = bounded.choices[0].message.content;
  assert.ok(boundedText.startsWith('{'), boundedText);
  if (bounded.choices[0].finish_reason === 'stop') {
    const value = JSON.parse(boundedText);
    assert.match(value.code, /^[A-Z]{3}-\d{2}$/);
    assert.ok(value.score >= 0 && value.score <= 1, boundedText);
    assert.ok([...value.note].length >= 2 && [...value.note].length <= 8, boundedText);
    assert.match(value.when, /^\d{4}-\d{2}-\d{2}$/);
  }
  // vLLM's structured_outputs: one of the choices, or a text a regex matches whole.
  const plain = {model, messages: [{role: 'user', content: prompt}], max_tokens: 16, temperature: 0};
  const choices = ['positive', 'negative', 'neutral'];
  const chosen = await client.chat.completions.create(
      {...plain, structured_outputs: {choice: choices}});
  const choice = chosen.choices[0].message.content;
  assert.ok(choices.some((c) => c.startsWith(choice)), choice);
  if (chosen.choices[0].finish_reason === 'stop') assert.ok(choices.includes(choice), choice);
  const matched = await client.completions.create(
      {model, prompt, max_tokens: 16, temperature: 0, structured_outputs: {regex: '[a-z]{2,6}-\\d{1,3}'}});
  const code = matched.choices[0].text;
  assert.match(code, matched.choices[0].finish_reason === 'stop' ? /^[a-z]{2,6}-\d{1,3}$/ :
                                                                   /^[a-z]{0,6}(-\d{0,3})?$/);
  // Completions take it too (vLLM's extension of OpenAI's completions).
  const completion = await client.completions.create(
      {model, prompt, max_tokens: 16, temperature: 0, response_format: {type: 'json_object'}});
  assert.ok(completion.choices[0].text.startsWith('{'), completion.choices[0].text);
  await assert.rejects(client.chat.completions.create(
      {...request, response_format: {type: 'json_schema', json_schema: {name: 'x', schema:
          {type: 'object', properties: {a: {type: 'string', pattern: '(?=x)'}}}}}}),
      (e) => {
        assert.equal(e.status, 400);
        assert.equal(e.param, 'response_format.json_schema.schema.properties.a.pattern');
        return true;
      });
}

// OpenAI's Responses API: the conversation chat would send gives chat's tokens (greedy), and
// usage counts them; a stream's events build the same response; calls and their outputs go
// back as items; stored responses are retrieved, continued and deleted; a forced call is a
// function_call item; reasoning comes back as a reasoning item; refusals name the Responses
// fields.
async function responses(model, prompt) {
  const chat = await client.chat.completions.create({
    model, max_tokens: 12, temperature: 0,
    messages: [{role: 'system', content: 'Be brief.'}, {role: 'user', content: prompt}]});
  const request = {model, instructions: 'Be brief.', input: prompt, max_output_tokens: 12,
                   temperature: 0};
  const whole = await client.responses.create(request);
  assert.equal(whole.object, 'response');
  assert.match(whole.id, /^resp_[0-9a-f]{24}$/);
  assert.equal(whole.model, model);
  assert.equal(whole.output_text, chat.choices[0].message.content);
  assert.equal(whole.status, chat.choices[0].finish_reason === 'length' ? 'incomplete' : 'completed');
  assert.equal(whole.usage.input_tokens, chat.usage.prompt_tokens);
  assert.equal(whole.usage.output_tokens, chat.usage.completion_tokens);
  assert.equal(whole.usage.total_tokens, chat.usage.total_tokens);
  assert.equal(whole.output[0].type, 'message');
  assert.equal(whole.output[0].role, 'assistant');

  const stream = client.responses.stream(request);
  const events = [];
  stream.on('event', (event) => events.push(event));
  const streamed = await stream.finalResponse();  // the SDK adds no output_text here
  const text = (response) => response.output.filter((item) => item.type === 'message')
      .flatMap((item) => item.content.map((part) => part.text)).join('');
  assert.equal(text(streamed), whole.output_text);
  assert.equal(events[0].type, 'response.created');
  assert.equal(events.at(-1).type, whole.status === 'completed' ? 'response.completed'
                                                                : 'response.incomplete');
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((e, i) => i));
  assert.deepEqual(events.at(-1).response.output, whole.output.map((item, i) =>
      ({...item, id: events.at(-1).response.output[i].id})));

  // A call and its output sent back as items make chat's prompt for the same turns.
  const weather = {name: 'get_weather', description: 'The weather in a city', strict: true,
                   parameters: {type: 'object', properties: {city: {type: 'string'}},
                                required: ['city'], additionalProperties: false}};
  const turns = await client.responses.create({
    model, max_output_tokens: 8, temperature: 0, tools: [{type: 'function', ...weather}],
    input: [{role: 'user', content: prompt},
            {type: 'function_call', call_id: 'call_1', name: 'get_weather',
             arguments: '{"city": "Paris"}'},
            {type: 'function_call_output', call_id: 'call_1', output: '18 degrees'}]});
  const chatTurns = await client.chat.completions.create({
    model, max_tokens: 8, temperature: 0, tools: [{type: 'function', function: weather}],
    messages: [{role: 'user', content: prompt},
               {role: 'assistant', content: null, tool_calls: [{id: 'call_1', type: 'function',
                 function: {name: 'get_weather', arguments: '{"city": "Paris"}'}}]},
               {role: 'tool', tool_call_id: 'call_1', content: '18 degrees'}]});
  assert.equal(turns.usage.input_tokens, chatTurns.usage.prompt_tokens);
  assert.equal(turns.output_text, chatTurns.choices[0].message.content ?? '');

  const forced = await client.responses.create({
    model, max_output_tokens: 24, temperature: 0, input: prompt,
    tools: [{type: 'function', ...weather}], tool_choice: {type: 'function', name: 'get_weather'}});
  const call = forced.output.find((item) => item.type === 'function_call');
  assert.equal(call.name, 'get_weather');
  assert.match(call.call_id, /^call_[0-9a-f]{24}$/);
  assert.ok(/^\{\s*("c|$)/.test(call.arguments), call.arguments);
  if (forced.status === 'completed') assert.equal(typeof JSON.parse(call.arguments).city, 'string');

  // Thinking on (any effort but "none"): an output made to open the block (a bias of 100 on
  // "<think>", token 510) and cut off inside it is all reasoning.
  const thought = await client.responses.create({
    model, input: prompt, max_output_tokens: 3, temperature: 0, reasoning: {effort: 'low'},
    logit_bias: {'510': 100}});
  assert.equal(thought.status, 'incomplete');
  assert.equal(thought.incomplete_details.reason, 'max_output_tokens');
  assert.equal(thought.output[0].type, 'reasoning');
  assert.equal(thought.output[0].content[0].text, '<think><think>');
  assert.equal(thought.usage.output_tokens_details.reasoning_tokens, 3);
  assert.equal(thought.output_text, '');

  if (oneServer) await storedResponses(model, prompt, request, whole, streamed);

  for (const [change, param] of [
      [{input: [{role: 'user', content: [{type: 'input_image', image_url: 'x'}]}]},
       'input[0].content[0].type'],
      [{max_output_tokens: 0}, 'max_output_tokens'],
      [{tools: [{type: 'function', name: 'a b'}]}, 'tools[0].name'],
      [{conversation: 'conv_1'}, 'conversation']]) {
    await assert.rejects(client.responses.create({...request, ...change}), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, param);
      return true;
    });
  }
}

// Stored responses (the default): retrieved as returned, continued by previous_response_id with
// chat's prompt for the whole conversation, deleted; one made with store false is not kept.
async function storedResponses(model, prompt, request, whole, streamed) {
  const retrieved = await client.responses.retrieve(whole.id);
  assert.deepEqual(retrieved.output, whole.output);
  assert.equal(retrieved.store, true);
  const next = await client.responses.create({model, previous_response_id: whole.id,
                                              input: 'And then?', max_output_tokens: 8,
                                              temperature: 0});
  assert.equal(next.previous_response_id, whole.id);
  const chatNext = await client.chat.completions.create({
    model, max_tokens: 8, temperature: 0,
    messages: [{role: 'user', content: prompt}, {role: 'assistant', content: whole.output_text},
               {role: 'user', content: 'And then?'}]});
  assert.equal(next.usage.input_tokens, chatNext.usage.prompt_tokens,
               'the instructions are not carried over, the conversation is');
  assert.equal(next.output_text, chatNext.choices[0].message.content);
  assert.equal((await client.responses.retrieve(streamed.id)).id, streamed.id, 'streams are kept');
  await client.responses.delete(whole.id);
  await assert.rejects(client.responses.retrieve(whole.id), (e) => e.status === 404);
  await assert.rejects(client.responses.create({...request, previous_response_id: whole.id}),
                       (e) => e.status === 404 && e.param === 'previous_response_id');
  const unstored = await client.responses.create({...request, store: false});
  assert.equal(unstored.store, false);
  await assert.rejects(client.responses.retrieve(unstored.id), (e) => e.status === 404);
}

// vLLM's /tokenize and /detokenize beside the SDK's routes: a chat body's count is the prompt
// tokens chat reports, and ids come back as their text.
async function tokenize(model, prompt) {
  const post = async (path, body) => {
    const res = await fetch(baseURL.replace(/\/v1$/, '') + path, {
      method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)});
    assert.equal(res.status, 200, path);
    return res.json();
  };
  const messages = [{role: 'user', content: prompt}];
  const counted = await post('/tokenize', {model, messages});
  const chat = await client.chat.completions.create({model, messages, max_tokens: 1});
  assert.equal(counted.count, chat.usage.prompt_tokens);
  const ids = (await post('/tokenize', {model, prompt})).tokens;
  assert.equal((await post('/detokenize', {model, tokens: ids})).prompt, prompt);
}

async function errors(model) {
  await assert.rejects(client.completions.create({model, prompt: 'x', n: 17}), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError);
    assert.equal(e.status, 400);
    assert.equal(e.param, 'n');
    assert.equal(e.type, 'invalid_request_error');
    return true;
  });
  await assert.rejects(client.chat.completions.create(
      {model: 'no-such-model', messages: [{role: 'user', content: 'x'}]}), (e) => {
    assert.ok(e instanceof OpenAI.NotFoundError);
    assert.equal(e.code, 'model_not_found');
    return true;
  });
  await assert.rejects(client.completions.create({model, prompt: 'x', max_tokens: 0}), (e) => {
    assert.equal(e.status, 400);
    assert.equal(e.param, 'max_tokens');
    return true;
  });
}

async function main() {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  const model = models.data[0].id;
  assert.equal((await client.models.retrieve(model)).id, model);
  for (let round = 0; round < rounds; ++round) {
    const answer = await chat(model, `Hello, how are you? (${round})`);
    const prompt = `The server answers requests ${round}`;
    const text = await completions(model, prompt);
    await stopStrings(model, prompt, text);
    if (round === 0) await logprobs(model, prompt);
    if (round === 0) await choices(model, prompt);
    if (round === 0) await logitRules(model, prompt);
    if (round === 0) await tools(model, prompt);
    if (round === 0) await forcedToolCalls(model, prompt);
    if (round === 0) await reasoning(model, prompt);
    if (round === 0) await jsonMode(model, prompt);
    if (round === 0) await responses(model, prompt);
    if (round === 0) await tokenize(model, prompt);
    if (round === 0) console.log(`chat: ${JSON.stringify(answer)}\ncompletion: ${JSON.stringify(text)}`);
  }
  await errors(model);
  console.log(`OpenAI SDK test passed against ${baseURL} (${rounds} round(s), model ${model})`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
