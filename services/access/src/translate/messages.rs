//! Anthropic's Messages API (`POST /v1/messages`) on the engine's chat completions: the
//! request mapped onto a chat request, the chat answer (whole or streamed) mapped back into a
//! message, and errors in Anthropic's shape (`{"type":"error","error":{"type","message"}}`).
//!
//! Translated: `system` (a string or text blocks), `messages` with string or block content
//! (`text`, `image`, `tool_use`, `tool_result`; `thinking` blocks are dropped), `max_tokens`,
//! `stop_sequences`, `temperature`, `top_p`, `top_k`, `stream`, `tools` (client tools with an
//! `input_schema`), `tool_choice` (`auto`, `any`, `tool`, `none`,
//! `disable_parallel_tool_use`). Other fields (`metadata`, `thinking`, `cache_control`, …) are
//! ignored; server tools and other block types are refused, naming them.

use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use super::sse::{self, Events};
use super::{Call, Finish, Usage, arguments_text, choice, id, kind};

/// The request as a chat completion request (`Err`: what can't be translated).
pub(super) fn request(mut body: Map<String, Value>) -> Result<Map<String, Value>, String> {
    let mut chat = Map::new();
    let mut messages = Vec::new();
    match body.remove("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => messages.push(json!({"role": "system", "content": text})),
        Some(Value::Array(blocks)) => {
            let text = texts(&blocks, "system")?.join("\n\n");
            messages.push(json!({"role": "system", "content": text}));
        }
        Some(_) => return Err("system: a string or an array of text blocks".to_owned()),
    }
    let Some(Value::Array(turns)) = body.remove("messages") else {
        return Err("messages: an array of messages is required".to_owned());
    };
    for (i, turn) in turns.iter().enumerate() {
        turn_of(turn, &mut messages).map_err(|e| format!("messages[{i}]{e}"))?;
    }
    chat.insert("messages".into(), Value::Array(messages));
    let fields = [
        ("model", "model"),
        ("max_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("top_k", "top_k"),
        ("stop_sequences", "stop"),
    ];
    super::renamed(&mut body, &mut chat, &fields);
    if let Some(tools) = body.remove("tools").filter(|v| !v.is_null()) {
        chat.insert("tools".into(), tools_of(&tools)?);
    }
    if let Some(choice) = body.remove("tool_choice").filter(|v| !v.is_null()) {
        let (choice, parallel) = tool_choice(&choice)?;
        chat.insert("tool_choice".into(), choice);
        if !parallel {
            chat.insert("parallel_tool_calls".into(), Value::Bool(false));
        }
    }
    super::streaming(&mut chat, body.get("stream"))?;
    Ok(chat)
}

/// Text blocks' texts (`system`, a tool result's content).
fn texts<'a>(blocks: &'a [Value], what: &str) -> Result<Vec<&'a str>, String> {
    blocks
        .iter()
        .enumerate()
        .map(|(i, block)| match (kind(block), block.get("text")) {
            ("text", Some(Value::String(text))) => Ok(text.as_str()),
            (other, _) => Err(format!(
                "{what}[{i}]: only text blocks are translated here, not {other:?}"
            )),
        })
        .collect()
}

/// One user or assistant turn as chat messages (a user turn's tool results come first, each
/// its own `tool` message).
fn turn_of(turn: &Value, messages: &mut Vec<Value>) -> Result<(), String> {
    let role = turn.get("role").and_then(Value::as_str);
    let role = match role {
        Some(role @ ("user" | "assistant")) => role,
        _ => return Err(".role: \"user\" or \"assistant\"".to_owned()),
    };
    let blocks = match turn.get("content") {
        Some(Value::String(text)) => {
            messages.push(json!({"role": role, "content": text}));
            return Ok(());
        }
        Some(Value::Array(blocks)) => blocks,
        _ => return Err(".content: a string or an array of content blocks".to_owned()),
    };
    let (mut parts, mut calls) = (Vec::new(), Vec::new());
    for (i, block) in blocks.iter().enumerate() {
        let at = |e: &str| format!(".content[{i}]: {e}");
        match (kind(block), role) {
            ("text", _) => {
                let text = block.get("text").and_then(Value::as_str);
                let text = text.ok_or_else(|| at("a text block needs its text"))?;
                parts.push(json!({"type": "text", "text": text}));
            }
            ("image", "user") => parts.push(image(block).map_err(&at)?),
            ("tool_use", "assistant") => {
                let name = block.get("name").and_then(Value::as_str);
                let name = name.ok_or_else(|| at("a tool_use block needs its name"))?;
                let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                calls.push(json!({
                    "id": block.get("id").cloned().unwrap_or(Value::Null),
                    "type": "function",
                    "function": {"name": name, "arguments": input.to_string()},
                }));
            }
            ("tool_result", "user") => {
                let content = match block.get("content") {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(text)) => text.clone(),
                    Some(Value::Array(blocks)) => {
                        texts(blocks, "content").map_err(|e| at(&e))?.join("\n")
                    }
                    Some(_) => {
                        return Err(at("a tool result's content is a string or text blocks"));
                    }
                };
                let errored = block.get("is_error").and_then(Value::as_bool) == Some(true);
                let content = if errored {
                    format!("Error: {content}")
                } else {
                    content
                };
                messages.push(json!({
                    "role": "tool",
                    "tool_call_id": block.get("tool_use_id").cloned().unwrap_or(Value::Null),
                    "content": content,
                }));
            }
            // Earlier reasoning is the model's own; it isn't sent back.
            ("thinking" | "redacted_thinking", "assistant") => {}
            (other, role) => {
                return Err(at(&format!(
                    "a {other:?} block isn't translated in a {role} message"
                )));
            }
        }
    }
    if role == "assistant" {
        let text: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
        let mut message = json!({"role": "assistant", "content": text.join("")});
        if !calls.is_empty() {
            message["tool_calls"] = Value::Array(calls);
            if text.is_empty() {
                message["content"] = Value::Null;
            }
        }
        messages.push(message);
    } else if !parts.is_empty() {
        messages.push(json!({"role": "user", "content": parts}));
    }
    Ok(())
}

/// An image block as an `image_url` part (base64 data or a URL).
fn image(block: &Value) -> Result<Value, &'static str> {
    let source = &block["source"];
    let url = match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let media = source["media_type"]
                .as_str()
                .ok_or("an image needs its media_type")?;
            let data = source["data"].as_str().ok_or("an image needs its data")?;
            format!("data:{media};base64,{data}")
        }
        Some("url") => source["url"]
            .as_str()
            .ok_or("an image needs its url")?
            .to_owned(),
        _ => return Err("an image's source is base64 data or a url"),
    };
    Ok(json!({"type": "image_url", "image_url": {"url": url}}))
}

fn tools_of(tools: &Value) -> Result<Value, String> {
    let tools = tools.as_array().ok_or("tools: an array of tools")?;
    let mapped = tools.iter().enumerate().map(|(i, tool)| {
        let custom = matches!(
            tool.get("type").and_then(Value::as_str),
            None | Some("custom")
        );
        match (
            tool.get("name").and_then(Value::as_str),
            tool.get("input_schema"),
        ) {
            (Some(name), Some(schema)) if custom => {
                let mut function = json!({"name": name, "parameters": schema});
                if let Some(description) = tool.get("description").filter(|d| d.is_string()) {
                    function["description"] = description.clone();
                }
                Ok(json!({"type": "function", "function": function}))
            }
            _ => Err(format!(
                "tools[{i}]: only client tools with a name and an input_schema are served here"
            )),
        }
    });
    Ok(Value::Array(mapped.collect::<Result<_, _>>()?))
}

/// The chat `tool_choice`, and whether calls may be parallel.
fn tool_choice(choice: &Value) -> Result<(Value, bool), String> {
    let parallel = choice
        .get("disable_parallel_tool_use")
        .and_then(Value::as_bool)
        != Some(true);
    let mapped = match (
        choice.get("type").and_then(Value::as_str),
        choice.get("name"),
    ) {
        (Some("auto"), _) => json!("auto"),
        (Some("any"), _) => json!("required"),
        (Some("none"), _) => json!("none"),
        (Some("tool"), Some(Value::String(name))) => {
            json!({"type": "function", "function": {"name": name}})
        }
        _ => return Err("tool_choice: auto, any, none, or a tool by name".to_owned()),
    };
    Ok((mapped, parallel))
}

/// Anthropic's `stop_reason` for a chat `finish_reason`.
fn stop_reason(finish: Finish) -> &'static str {
    match finish {
        Finish::Length => "max_tokens",
        Finish::ToolCalls => "tool_use",
        Finish::Filtered => "refusal",
        Finish::Stop => "end_turn",
    }
}

/// A whole chat answer as a message (`model`: the one the client named).
pub(super) fn answer(chat: &Value, model: Option<&str>) -> Result<Value, &'static str> {
    let choice = choice(chat).ok_or("the engine's answer has no choice")?;
    let message = &choice["message"];
    let mut content = Vec::new();
    if let Some(text) = message.get("content").and_then(Value::as_str)
        && !text.is_empty()
    {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        let Some(call) = Call::of(call) else {
            return Err("the engine's answer has a tool call without a name");
        };
        let input: Value = serde_json::from_str(&arguments_text(&call.arguments))
            .ok()
            .filter(Value::is_object)
            .ok_or("the engine's answer has tool call arguments that are not a JSON object")?;
        let id = call.id.unwrap_or_else(|| id("toolu_"));
        content.push(json!({"type": "tool_use", "id": id, "name": call.name, "input": input}));
    }
    let finish = Finish::of(&choice["finish_reason"]).unwrap_or(Finish::Stop);
    let usage = Usage::of(chat).unwrap_or_default();
    Ok(json!({
        "id": id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model_of(chat, model),
        "content": content,
        "stop_reason": stop_reason(finish),
        "stop_sequence": null,
        "usage": {"input_tokens": usage.prompt, "output_tokens": usage.completion},
    }))
}

fn model_of(chat: &Value, asked: Option<&str>) -> String {
    let engine = chat.get("model").and_then(Value::as_str).unwrap_or("");
    sse::bounded(asked.unwrap_or(engine), 256).to_owned()
}

/// An error in Anthropic's shape, its type from the status.
pub(crate) fn error(status: StatusCode, message: &str) -> Value {
    let kind = match status.as_u16() {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        504 => "timeout_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// The block being streamed.
#[derive(Debug, PartialEq)]
enum Open {
    Text,
    /// A tool call, by the engine's index of it.
    Tool(u64),
}

/// A streamed chat answer as Messages events: `message_start`, for each block
/// `content_block_start`/`_delta`/`_stop`, then `message_delta` (stop reason, usage) and
/// `message_stop`; or one `error` event.
pub(super) struct Stream {
    model: Option<String>,
    started: bool,
    open: Option<Open>,
    blocks: u64,
    finish: Option<Finish>,
    usage: Option<Usage>,
}

impl Stream {
    pub(super) fn new(model: Option<String>) -> Self {
        Stream {
            model,
            started: false,
            open: None,
            blocks: 0,
            finish: None,
            usage: None,
        }
    }

    fn start(&mut self, chunk: &Value, out: &mut Vec<u8>) {
        self.started = true;
        let model = model_of(chunk, self.model.as_deref());
        let message = json!({
            "id": id("msg_"), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        });
        sse::event(
            out,
            "message_start",
            &json!({"type": "message_start", "message": message}),
        );
    }

    fn open(&mut self, open: Open, block: Value, out: &mut Vec<u8>) {
        self.close(out);
        self.open = Some(open);
        let start =
            json!({"type": "content_block_start", "index": self.blocks, "content_block": block});
        sse::event(out, "content_block_start", &start);
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        if self.open.take().is_some() {
            let stop = json!({"type": "content_block_stop", "index": self.blocks});
            sse::event(out, "content_block_stop", &stop);
            self.blocks += 1;
        }
    }

    fn delta(&self, delta: Value, out: &mut Vec<u8>) {
        let event = json!({"type": "content_block_delta", "index": self.blocks, "delta": delta});
        sse::event(out, "content_block_delta", &event);
    }
}

impl Events for Stream {
    fn chunk(&mut self, chunk: &Value, out: &mut Vec<u8>) -> Result<(), String> {
        if !chunk.is_object() {
            return Err("the engine sent an event that is not a chat chunk".to_owned());
        }
        if !self.started {
            self.start(chunk, out);
        }
        if let Some(usage) = Usage::of(chunk) {
            self.usage = Some(usage);
        }
        let Some(choice) = choice(chunk) else {
            return Ok(());
        };
        let delta = &choice["delta"];
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            if self.open != Some(Open::Text) {
                self.open(Open::Text, json!({"type": "text", "text": ""}), out);
            }
            self.delta(json!({"type": "text_delta", "text": text}), out);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            let function = &call["function"];
            // A call's first chunk names it; the rest carry its arguments.
            if self.open != Some(Open::Tool(index)) {
                let id = call["id"]
                    .as_str()
                    .map_or_else(|| id("toolu_"), str::to_owned);
                let name = function["name"].as_str().unwrap_or("");
                let block = json!({"type": "tool_use", "id": id, "name": name, "input": {}});
                self.open(Open::Tool(index), block, out);
            }
            if let Some(part) = function.get("arguments").and_then(Value::as_str)
                && !part.is_empty()
            {
                self.delta(
                    json!({"type": "input_json_delta", "partial_json": part}),
                    out,
                );
            }
        }
        if let Some(finish) = Finish::of(&choice["finish_reason"]) {
            self.finish = Some(finish);
            self.close(out);
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), String> {
        let Some(finish) = self.finish.filter(|_| self.started) else {
            return Err("the engine's answer ended before it finished".to_owned());
        };
        self.close(out);
        let usage = self.usage.unwrap_or_default();
        let delta = json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(finish), "stop_sequence": null},
            "usage": {"input_tokens": usage.prompt, "output_tokens": usage.completion},
        });
        sse::event(out, "message_delta", &delta);
        sse::event(out, "message_stop", &json!({"type": "message_stop"}));
        Ok(())
    }

    fn fail(&mut self, message: &str, out: &mut Vec<u8>) {
        let error = error(StatusCode::BAD_GATEWAY, message);
        sse::event(out, "error", &error);
    }
}

#[cfg(test)]
mod tests {
    use super::super::sse::tests::run;
    use super::*;

    fn translated(request: Value) -> Result<Value, String> {
        let Value::Object(body) = request else {
            panic!()
        };
        super::request(body).map(Value::Object)
    }

    #[test]
    fn a_request_becomes_a_chat_request() {
        let chat = translated(json!({
            "model": "claude-x", "max_tokens": 64, "temperature": 0.2, "top_k": 5,
            "stop_sequences": ["END"], "stream": true, "metadata": {"user_id": "u"},
            "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind.",
                        "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "s"},
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "down", "is_error": true},
                    {"type": "text", "text": "And"}, {"type": "text", "text": "tomorrow?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]},
            ],
            "tools": [{"name": "weather", "description": "Weather now", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
        }))
        .unwrap();
        assert_eq!(
            chat,
            json!({
                "model": "claude-x", "max_tokens": 64, "temperature": 0.2, "top_k": 5,
                "stop": ["END"], "stream": true, "stream_options": {"include_usage": true},
                "messages": [
                    {"role": "system", "content": "Be brief.\n\nBe kind."},
                    {"role": "user", "content": "Weather?"},
                    {"role": "assistant", "content": "Let me look.", "tool_calls": [
                        {"id": "toolu_1", "type": "function",
                         "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]},
                    {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
                    {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: down"},
                    {"role": "user", "content": [
                        {"type": "text", "text": "And"}, {"type": "text", "text": "tomorrow?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
                ],
                "tools": [{"type": "function", "function": {"name": "weather",
                           "description": "Weather now", "parameters": {"type": "object"}}}],
                "tool_choice": "required", "parallel_tool_calls": false,
            })
        );
        for (choice, chat_choice) in [
            (json!({"type": "auto"}), json!("auto")),
            (json!({"type": "none"}), json!("none")),
            (
                json!({"type": "tool", "name": "w"}),
                json!({"type": "function", "function": {"name": "w"}}),
            ),
        ] {
            let chat = translated(json!({"messages": [], "tool_choice": choice})).unwrap();
            assert_eq!(chat["tool_choice"], chat_choice);
            assert!(chat.get("parallel_tool_calls").is_none());
            assert!(chat.get("stream").is_none());
        }
    }

    #[test]
    fn what_isnt_translated_is_refused_by_name() {
        for (request, names) in [
            (json!({}), "messages"),
            (
                json!({"messages": [{"role": "system", "content": "x"}]}),
                "messages[0].role",
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"type": "document"}]}]}),
                "messages[0].content[0]: a \"document\" block",
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"type": "tool_use", "name": "x"}]}]}),
                "\"tool_use\" block isn't translated in a user message",
            ),
            (
                json!({"messages": [], "tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
                "tools[0]",
            ),
            (
                json!({"messages": [], "tool_choice": {"type": "tool"}}),
                "tool_choice",
            ),
            (json!({"messages": [], "stream": "yes"}), "stream"),
            (json!({"messages": [], "system": 7}), "system"),
        ] {
            let refused = translated(request.clone()).unwrap_err();
            assert!(refused.contains(names), "{request}: {refused}");
        }
    }

    #[test]
    fn a_whole_answer_becomes_a_message() {
        let chat = json!({
            "id": "chatcmpl-1", "model": "einsora-local",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Looking.",
                "tool_calls": [{"id": "call_9", "type": "function",
                                "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
        });
        let message = answer(&chat, Some("claude-x")).unwrap();
        assert!(message["id"].as_str().unwrap().starts_with("msg_"));
        assert_eq!(message["type"], "message");
        assert_eq!(message["model"], "claude-x");
        assert_eq!(
            message["content"],
            json!([{"type": "text", "text": "Looking."},
                   {"type": "tool_use", "id": "call_9", "name": "weather", "input": {"city": "Paris"}}])
        );
        assert_eq!(message["stop_reason"], "tool_use");
        assert_eq!(
            message["usage"],
            json!({"input_tokens": 12, "output_tokens": 7})
        );

        let length =
            json!({"choices": [{"finish_reason": "length", "message": {"content": "ab"}}]});
        let message = answer(&length, None).unwrap();
        assert_eq!(message["stop_reason"], "max_tokens");
        assert_eq!(
            message["usage"],
            json!({"input_tokens": 0, "output_tokens": 0})
        );
        for hostile in [
            json!({"choices": []}),
            json!([1, 2]),
            json!({"choices": [{"message": {"tool_calls": [{"function": {"name": "w", "arguments": "{oops"}}]}}]}),
            json!({"choices": [{"message": {"tool_calls": [{"function": {"arguments": "{}"}}]}}]}),
        ] {
            assert!(answer(&hostile, None).is_err(), "{hostile}");
        }
    }

    #[test]
    fn errors_are_in_anthropics_shape() {
        assert_eq!(
            error(StatusCode::TOO_MANY_REQUESTS, "slow down"),
            json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
        );
        assert_eq!(
            error(StatusCode::UNAUTHORIZED, "x")["error"]["type"],
            "authentication_error"
        );
        assert_eq!(
            error(StatusCode::BAD_GATEWAY, "x")["error"]["type"],
            "api_error"
        );
    }

    /// The events of a translated stream, as (event, data) pairs.
    fn events(text: &str) -> Vec<(String, Value)> {
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let (kind, data) = e.split_once('\n').unwrap();
                let kind = kind.strip_prefix("event: ").unwrap().to_owned();
                (
                    kind,
                    serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap(),
                )
            })
            .collect()
    }

    fn chunk(delta: Value, finish: Value) -> String {
        let chunk = json!({"id": "c", "model": "m", "object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    }

    #[tokio::test]
    async fn a_streamed_answer_becomes_message_events() {
        let frames = [
            chunk(json!({"role": "assistant", "content": null}), Value::Null),
            chunk(json!({"content": "Hel"}), Value::Null),
            chunk(json!({"content": "lo"}), Value::Null),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                         "function": {"name": "weather", "arguments": ""}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]}),
                Value::Null,
            ),
            chunk(json!({}), json!("tool_calls")),
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4}}\n\n"
                .to_owned(),
            "data: [DONE]\n\n".to_owned(),
        ];
        let frames: Vec<&[u8]> = frames.iter().map(|f| f.as_bytes()).collect();
        let out = events(&run(Stream::new(Some("claude-x".into())), &frames).await);
        let kinds: Vec<&str> = out.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        for (kind, data) in &out {
            assert_eq!(data["type"], kind.as_str());
        }
        assert_eq!(out[0].1["message"]["model"], "claude-x");
        assert_eq!(
            out[1].1["content_block"],
            json!({"type": "text", "text": ""})
        );
        assert_eq!(
            out[2].1["delta"],
            json!({"type": "text_delta", "text": "Hel"})
        );
        assert_eq!(out[4].1["index"], 0);
        assert_eq!(out[5].1["index"], 1);
        assert_eq!(
            out[5].1["content_block"],
            json!({"type": "tool_use", "id": "call_1", "name": "weather", "input": {}})
        );
        assert_eq!(
            out[7].1["delta"],
            json!({"type": "input_json_delta", "partial_json": "\"Paris\"}"})
        );
        assert_eq!(out[9].1["delta"]["stop_reason"], "tool_use");
        assert_eq!(
            out[9].1["usage"],
            json!({"input_tokens": 9, "output_tokens": 4})
        );
    }

    #[tokio::test]
    async fn a_garbled_or_unfinished_stream_ends_with_one_error_event() {
        let text = chunk(json!({"content": "Hi"}), Value::Null);
        for (frames, says) in [
            (vec![text.as_str(), "data: {nope\n\n"], "not JSON"),
            (vec![text.as_str(), "data: [1,2]\n\n"], "not a chat chunk"),
            (vec![text.as_str()], "ended before it finished"),
            (
                vec![text.as_str(), "data: [DONE]\n\n"],
                "ended before it finished",
            ),
            (vec!["data: [DONE]\n\n"], "ended before it finished"),
            (
                vec![
                    text.as_str(),
                    "data: {\"error\":{\"message\":\"out of memory\"}}\n\n",
                ],
                "out of memory",
            ),
        ] {
            let frames: Vec<&[u8]> = frames.iter().map(|f| f.as_bytes()).collect();
            let out = events(&run(Stream::new(None), &frames).await);
            let (kind, data) = out.last().unwrap();
            assert_eq!(kind, "error", "{out:?}");
            assert_eq!(data["error"]["type"], "api_error");
            assert!(
                data["error"]["message"].as_str().unwrap().contains(says),
                "{data}"
            );
            assert_eq!(out.iter().filter(|(k, _)| k == "error").count(), 1);
            assert!(!out.iter().any(|(k, _)| k == "message_stop"), "{out:?}");
        }
    }
}
