// Drives a running `dscale serve` with the official Anthropic Node SDK, as Claude Code and
// Anthropic applications do: the Messages API, whole and streamed, with a system prompt, tool
// calls and their results, a forced tool, thinking, stop sequences, usage, count_tokens, and
// errors in Anthropic's shape. Greedy decoding makes streamed and whole replies equal, and a conversation
// sent here equal to the same turns sent as chat (the same prompt, the same tokens).
//
// Usage: DSCALE_URL=http://127.0.0.1:PORT/v1 node messages_sdk_test.mjs

import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const url = process.env.DSCALE_URL;
if (!url) throw new Error('set DSCALE_URL, e.g. http://127.0.0.1:8000/v1');
const anthropic = new Anthropic({baseURL: url.replace(/\/v1$/, ''), apiKey: 'not-needed',
                                 maxRetries: 0, timeout: 120_000});
const openai = new OpenAI({baseURL: url, apiKey: 'not-needed', maxRetries: 0, timeout: 120_000});

const text = (message) => message.content.filter((b) => b.type === 'text').map((b) => b.text)
    .join('');

async function main() {
  const model = (await openai.models.list()).data[0].id;
  const prompt = 'The server answers requests';
  const request = {model, max_tokens: 12, temperature: 0, system: 'Be brief.',
                   messages: [{role: 'user', content: prompt}]};
  const whole = await anthropic.messages.create(request);
  assert.equal(whole.type, 'message');
  assert.equal(whole.role, 'assistant');
  assert.match(whole.id, /^msg_[0-9a-f]{24}$/);
  const chat = await openai.chat.completions.create({
    model, max_tokens: 12, temperature: 0,
    messages: [{role: 'system', content: 'Be brief.'}, {role: 'user', content: prompt}]});
  assert.equal(text(whole), chat.choices[0].message.content, 'the same tokens as chat');
  assert.equal(whole.stop_reason, chat.choices[0].finish_reason === 'length' ? 'max_tokens'
                                                                            : 'end_turn');
  assert.equal(whole.usage.input_tokens + whole.usage.cache_read_input_tokens,
               chat.usage.prompt_tokens);
  assert.equal(whole.usage.output_tokens, chat.usage.completion_tokens);
  const counted = await anthropic.messages.countTokens(
      {model, system: request.system, messages: request.messages});
  assert.equal(counted.input_tokens, chat.usage.prompt_tokens);

  // Streamed: the SDK's MessageStream builds the same message.
  const stream = anthropic.messages.stream(request);
  const types = [];
  stream.on('streamEvent', (event) => types.push(event.type));
  const streamed = await stream.finalMessage();
  assert.equal(text(streamed), text(whole));
  assert.equal(streamed.stop_reason, whole.stop_reason);
  assert.equal(types[0], 'message_start');
  assert.equal(types.at(-1), 'message_stop');

  // A stop sequence ends the text before it and is named.
  assert.ok(text(whole).length > 4, text(whole));
  const stop = text(whole).slice(2, 4);
  const stopped = await anthropic.messages.create({...request, stop_sequences: [stop]});
  assert.equal(stopped.stop_reason, 'stop_sequence');
  assert.equal(stopped.stop_sequence, stop);
  assert.equal(text(stopped), text(whole).slice(0, text(whole).indexOf(stop)));

  // A call and its result make chat's prompt for the same turns.
  const weather = {name: 'get_weather', description: 'The weather in a city',
                   input_schema: {type: 'object', properties: {city: {type: 'string'}},
                                  required: ['city']}};
  const turns = await anthropic.messages.create({
    model, max_tokens: 8, temperature: 0, tools: [weather],
    messages: [{role: 'user', content: prompt},
               {role: 'assistant', content: [{type: 'tool_use', id: 'toolu_1', name: 'get_weather',
                                              input: {city: 'Paris'}}]},
               {role: 'user', content: [{type: 'tool_result', tool_use_id: 'toolu_1',
                                         content: '18 degrees'}]}]});
  const chatTurns = await openai.chat.completions.create({
    model, max_tokens: 8, temperature: 0,
    tools: [{type: 'function', function: {name: weather.name, description: weather.description,
                                          parameters: weather.input_schema}}],
    messages: [{role: 'user', content: prompt},
               {role: 'assistant', content: '', tool_calls: [{id: 'toolu_1', type: 'function',
                 function: {name: 'get_weather', arguments: {city: 'Paris'}}}]},
               {role: 'tool', tool_call_id: 'toolu_1', content: '18 degrees'}]});
  assert.equal(turns.usage.input_tokens + turns.usage.cache_read_input_tokens,
               chatTurns.usage.prompt_tokens);
  assert.equal(text(turns), chatTurns.choices[0].message.content ?? '');

  // A forced tool: a tool_use block whose input holds to its schema.
  const forced = await anthropic.messages.create({
    model, max_tokens: 24, temperature: 0, tools: [weather],
    tool_choice: {type: 'tool', name: 'get_weather'}, messages: [{role: 'user', content: prompt}]});
  const use = forced.content.find((b) => b.type === 'tool_use');
  assert.equal(use.name, 'get_weather');
  assert.match(use.id, /^toolu_[0-9a-f]{24}$/);
  if (forced.stop_reason === 'tool_use') assert.equal(typeof use.input.city, 'string');
  const forcedStream = anthropic.messages.stream({
    model, max_tokens: 24, temperature: 0, tools: [weather],
    tool_choice: {type: 'tool', name: 'get_weather'}, messages: [{role: 'user', content: prompt}]});
  const forcedStreamed = await forcedStream.finalMessage();
  assert.deepEqual(forcedStreamed.content.map((b) => b.input),
                   forced.content.map((b) => b.input));

  // Thinking on: chat's prompt and split with enable_thinking, the reasoning as a thinking block.
  const thought = await anthropic.messages.create({
    ...request, thinking: {type: 'enabled', budget_tokens: 1024}});
  const chatThought = await openai.chat.completions.create({
    model, max_tokens: 12, temperature: 0, chat_template_kwargs: {enable_thinking: true},
    messages: [{role: 'system', content: 'Be brief.'}, {role: 'user', content: prompt}]});
  assert.equal(thought.usage.input_tokens + thought.usage.cache_read_input_tokens,
               chatThought.usage.prompt_tokens);
  assert.notEqual(chatThought.usage.prompt_tokens, chat.usage.prompt_tokens, 'thinking changes the prompt');
  assert.equal(thought.content.filter((b) => b.type === 'thinking').map((b) => b.thinking).join(''),
               chatThought.choices[0].message.reasoning_content ?? '');
  assert.equal(text(thought), chatThought.choices[0].message.content);

  // Errors in Anthropic's shape, naming the field.
  await assert.rejects(anthropic.messages.create({...request, max_tokens: 0}), (e) => {
    assert.ok(e instanceof Anthropic.BadRequestError);
    assert.equal(e.error.type, 'error');
    assert.equal(e.error.error.type, 'invalid_request_error');
    assert.match(e.error.error.message, /^max_tokens: /);
    return true;
  });
  await assert.rejects(anthropic.messages.create({...request, model: 'no-such-model'}), (e) => {
    assert.ok(e instanceof Anthropic.NotFoundError);
    assert.equal(e.error.error.type, 'not_found_error');
    return true;
  });
  console.log(`Anthropic SDK test passed against ${url} (model ${model})`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
