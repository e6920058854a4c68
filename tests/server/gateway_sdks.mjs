// Calls the gateway with the TypeScript SDKs: plain and streamed, OpenAI and Anthropic.
// Prints one JSON object: raw plain bodies, streamed events as parsed, cache states.
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";

const [url, apiKey] = process.argv.slice(2);
const openai = new OpenAI({ baseURL: `${url}/fake/v1`, apiKey, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: `${url}/fake`, apiKey, maxRetries: 0 });
const messages = [{ role: "user", content: "say hi from node" }];
const out = { cache: [] };

const plain = await openai.chat.completions.create({ model: "m", messages }).asResponse();
out.cache.push(plain.headers.get("x-intentusnet-cache"));
out.openai = await plain.text();

const streamed = await openai.chat.completions
  .create({ model: "m", messages, stream: true })
  .withResponse();
out.cache.push(streamed.response.headers.get("x-intentusnet-cache"));
out.openaiEvents = [];
for await (const chunk of streamed.data) out.openaiEvents.push(chunk);

const message = await anthropic.messages
  .create({ model: "c", max_tokens: 16, messages })
  .asResponse();
out.cache.push(message.headers.get("x-intentusnet-cache"));
out.anthropic = await message.text();

const events = await anthropic.messages
  .create({ model: "c", max_tokens: 16, messages, stream: true })
  .withResponse();
out.cache.push(events.response.headers.get("x-intentusnet-cache"));
out.anthropicEvents = [];
for await (const event of events.data) out.anthropicEvents.push(event);

console.log(JSON.stringify(out));
