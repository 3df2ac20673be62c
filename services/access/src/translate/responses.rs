//! OpenAI's Responses API (`POST /v1/responses`) on the engine's chat completions: the request
//! mapped onto a chat request, the chat answer (whole or streamed) mapped back into a
//! response. Errors keep OpenAI's shape, which this API shares.
//!
//! Translated: `instructions`, `input` (a string, or message items with text and image parts,
//! `function_call` and `function_call_output` items; `reasoning` items are dropped),
//! `max_output_tokens`, `temperature`, `top_p`, `stream`, `tools` (function tools),
//! `tool_choice`, `parallel_tool_calls`, `text.format` (JSON object or schema). The gateway
//! keeps no responses: `previous_response_id`, `conversation` and `background` are refused;
//! `store`, `reasoning`, `include` and the like are ignored.

use serde_json::{Map, Value, json};

use super::sse::{self, Events};
use super::{Call, Finish, Usage, arguments_text, choice, id, kind, now};

/// The most text and arguments a streamed answer may gather (its closing events repeat it).
const MAX_OUTPUT: usize = 4 << 20;

/// The request as a chat completion request (`Err`: what can't be translated).
pub(super) fn request(mut body: Map<String, Value>) -> Result<Map<String, Value>, String> {
    for kept in ["previous_response_id", "conversation"] {
        if body.get(kept).is_some_and(|v| !v.is_null()) {
            return Err(format!(
                "{kept}: the gateway keeps no responses; send the whole conversation as input"
            ));
        }
    }
    if body.get("background") == Some(&Value::Bool(true)) {
        return Err("background: responses are answered while the request waits".to_owned());
    }
    let mut messages = Vec::new();
    match body.remove("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) => messages.push(json!({"role": "system", "content": text})),
        Some(_) => return Err("instructions: a string".to_owned()),
    }
    match body.remove("input") {
        Some(Value::String(text)) => messages.push(json!({"role": "user", "content": text})),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                item_of(item, &mut messages).map_err(|e| format!("input[{i}]{e}"))?;
            }
        }
        _ => return Err("input: a string or an array of items is required".to_owned()),
    }
    let mut chat = Map::new();
    chat.insert("messages".into(), Value::Array(messages));
    let fields = [
        ("model", "model"),
        ("max_output_tokens", "max_tokens"),
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("parallel_tool_calls", "parallel_tool_calls"),
    ];
    super::renamed(&mut body, &mut chat, &fields);
    if let Some(tools) = body.remove("tools").filter(|v| !v.is_null()) {
        chat.insert("tools".into(), tools_of(&tools)?);
    }
    if let Some(choice) = body.remove("tool_choice").filter(|v| !v.is_null()) {
        chat.insert("tool_choice".into(), tool_choice(&choice)?);
    }
    if let Some(format) = body.get("text").and_then(|t| t.get("format"))
        && let Some(format) = response_format(format)?
    {
        chat.insert("response_format".into(), format);
    }
    super::streaming(&mut chat, body.get("stream"))?;
    Ok(chat)
}

/// One input item as chat messages.
fn item_of(item: &Value, messages: &mut Vec<Value>) -> Result<(), String> {
    let kind = match kind(item) {
        "" if item.get("role").is_some() => "message",
        kind => kind,
    };
    match kind {
        "message" => messages.push(message_of(item)?),
        "function_call" => {
            let call = Call::of(&json!({"id": item["call_id"], "function": item}))
                .ok_or(": a function_call needs its name")?;
            let call = json!({
                "id": call.id.unwrap_or_else(|| id("call_")),
                "type": "function",
                "function": {"name": call.name, "arguments": arguments_text(&call.arguments)},
            });
            // Calls join the assistant turn they follow (chat answers carry them together).
            match messages.last_mut() {
                Some(last) if last["role"] == "assistant" => {
                    let calls = last
                        .as_object_mut()
                        .map(|m| m.entry("tool_calls").or_insert_with(|| json!([])));
                    match calls.and_then(Value::as_array_mut) {
                        Some(calls) => calls.push(call),
                        None => return Err(": an assistant turn's tool calls".to_owned()),
                    }
                }
                _ => messages
                    .push(json!({"role": "assistant", "content": null, "tool_calls": [call]})),
            }
        }
        "function_call_output" => {
            let output = match &item["output"] {
                Value::String(text) => text.clone(),
                Value::Array(parts) => parts_text(parts)?,
                _ => return Err(": a function_call_output needs its output".to_owned()),
            };
            messages
                .push(json!({"role": "tool", "tool_call_id": item["call_id"], "content": output}));
        }
        // Earlier reasoning is the model's own; it isn't sent back.
        "reasoning" => {}
        other => return Err(format!(": items of type {other:?} aren't translated")),
    }
    Ok(())
}

fn message_of(item: &Value) -> Result<Value, String> {
    let role = match item["role"].as_str() {
        Some("developer" | "system") => "system",
        Some(role @ ("user" | "assistant")) => role,
        _ => return Err(".role: user, assistant, system or developer".to_owned()),
    };
    let content = match &item["content"] {
        Value::String(text) => Value::String(text.clone()),
        Value::Array(parts) if role == "user" => {
            let mapped = parts.iter().enumerate().map(|(i, part)| match kind(part) {
                "input_image" => match part["image_url"].as_str() {
                    Some(url) => Ok(json!({"type": "image_url", "image_url": {"url": url}})),
                    None => Err(format!(
                        ".content[{i}]: an image is served by its image_url"
                    )),
                },
                _ => part_text(part)
                    .map(|text| json!({"type": "text", "text": text}))
                    .map_err(|e| format!(".content[{i}]{e}")),
            });
            Value::Array(mapped.collect::<Result<_, _>>()?)
        }
        Value::Array(parts) => Value::String(parts_text(parts)?),
        _ => return Err(".content: a string or an array of parts".to_owned()),
    };
    Ok(json!({"role": role, "content": content}))
}

fn part_text(part: &Value) -> Result<&str, String> {
    let field = match kind(part) {
        "input_text" | "output_text" | "text" => "text",
        "refusal" => "refusal",
        other => return Err(format!(": parts of type {other:?} aren't translated here")),
    };
    part[field]
        .as_str()
        .ok_or_else(|| format!(": a {} part needs its {field}", kind(part)))
}

fn parts_text(parts: &[Value]) -> Result<String, String> {
    let texts = parts
        .iter()
        .enumerate()
        .map(|(i, part)| part_text(part).map_err(|e| format!(".content[{i}]{e}")));
    Ok(texts.collect::<Result<Vec<_>, _>>()?.join(""))
}

fn tools_of(tools: &Value) -> Result<Value, String> {
    let tools = tools.as_array().ok_or("tools: an array of tools")?;
    let mapped = tools.iter().enumerate().map(|(i, tool)| {
        match (kind(tool), tool.get("name").and_then(Value::as_str)) {
            ("function", Some(name)) => {
                let mut function = json!({"name": name});
                for field in ["description", "parameters", "strict"] {
                    if let Some(value) = tool.get(field).filter(|v| !v.is_null()) {
                        function[field] = value.clone();
                    }
                }
                Ok(json!({"type": "function", "function": function}))
            }
            (other, _) => Err(format!(
                "tools[{i}]: only function tools are served here, not {other:?}"
            )),
        }
    });
    Ok(Value::Array(mapped.collect::<Result<_, _>>()?))
}

fn tool_choice(choice: &Value) -> Result<Value, String> {
    match choice {
        Value::String(mode) if matches!(mode.as_str(), "auto" | "none" | "required") => {
            Ok(choice.clone())
        }
        _ => match (kind(choice), choice.get("name")) {
            ("function", Some(Value::String(name))) => {
                Ok(json!({"type": "function", "function": {"name": name}}))
            }
            _ => Err("tool_choice: auto, none, required, or a function by name".to_owned()),
        },
    }
}

/// `text.format` as the chat `response_format` (`None` for plain text).
fn response_format(format: &Value) -> Result<Option<Value>, String> {
    match kind(format) {
        "text" => Ok(None),
        "json_object" => Ok(Some(json!({"type": "json_object"}))),
        "json_schema" => {
            let mut schema =
                json!({"name": format.get("name").cloned().unwrap_or(json!("answer"))});
            for field in ["schema", "strict", "description"] {
                if let Some(value) = format.get(field).filter(|v| !v.is_null()) {
                    schema[field] = value.clone();
                }
            }
            Ok(Some(json!({"type": "json_schema", "json_schema": schema})))
        }
        other => Err(format!(
            "text.format: text, json_object or json_schema, not {other:?}"
        )),
    }
}

/// What of the request a response repeats, with the defaults the API states.
pub(super) fn echo(body: &Map<String, Value>) -> Value {
    let given = |field: &str, default: Value| {
        body.get(field)
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or(default)
    };
    json!({
        "id": id("resp_"),
        "object": "response",
        "created_at": now(),
        "status": "in_progress",
        "error": null,
        "incomplete_details": null,
        "instructions": given("instructions", Value::Null),
        "max_output_tokens": given("max_output_tokens", Value::Null),
        "metadata": given("metadata", json!({})),
        "model": given("model", Value::Null),
        "output": [],
        "parallel_tool_calls": given("parallel_tool_calls", Value::Bool(true)),
        "previous_response_id": null,
        "store": false,
        "temperature": given("temperature", json!(1.0)),
        "text": given("text", json!({"format": {"type": "text"}})),
        "tool_choice": given("tool_choice", json!("auto")),
        "tools": given("tools", json!([])),
        "top_p": given("top_p", json!(1.0)),
        "truncation": "disabled",
        "usage": null,
    })
}

fn usage(usage: Usage) -> Value {
    json!({
        "input_tokens": usage.prompt,
        "input_tokens_details": {"cached_tokens": usage.cached},
        "output_tokens": usage.completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt + usage.completion,
    })
}

/// The response's closing status, and why it is incomplete.
fn status(response: &mut Value, finish: Finish) {
    let incomplete = match finish {
        Finish::Length => Some("max_output_tokens"),
        Finish::Filtered => Some("content_filter"),
        Finish::Stop | Finish::ToolCalls => None,
    };
    response["status"] = json!(if incomplete.is_some() {
        "incomplete"
    } else {
        "completed"
    });
    response["incomplete_details"] = incomplete.map_or(Value::Null, |r| json!({"reason": r}));
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    let content = if status == "completed" {
        json!([{"type": "output_text", "text": text, "annotations": [], "logprobs": []}])
    } else {
        json!([])
    };
    json!({"type": "message", "id": id, "status": status, "role": "assistant", "content": content})
}

fn call_item(id: &str, call_id: &str, name: &str, arguments: &str, status: &str) -> Value {
    json!({"type": "function_call", "id": id, "call_id": call_id, "name": name,
           "arguments": arguments, "status": status})
}

fn model_of(response: &mut Value, chat: &Value) {
    if response["model"].is_null() {
        let engine = chat.get("model").and_then(Value::as_str).unwrap_or("");
        response["model"] = json!(sse::bounded(engine, 256));
    }
}

/// A whole chat answer as a response.
pub(super) fn answer(chat: &Value, mut response: Value) -> Result<Value, &'static str> {
    let choice = choice(chat).ok_or("the engine's answer has no choice")?;
    let message = &choice["message"];
    let mut output = Vec::new();
    if let Some(text) = message.get("content").and_then(Value::as_str)
        && !text.is_empty()
    {
        output.push(message_item(&id("msg_"), text, "completed"));
    }
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        let call = Call::of(call).ok_or("the engine's answer has a tool call without a name")?;
        let call_id = call.id.unwrap_or_else(|| id("call_"));
        let arguments = arguments_text(&call.arguments);
        output.push(call_item(
            &id("fc_"),
            &call_id,
            &call.name,
            &arguments,
            "completed",
        ));
    }
    model_of(&mut response, chat);
    status(
        &mut response,
        Finish::of(&choice["finish_reason"]).unwrap_or(Finish::Stop),
    );
    response["output"] = Value::Array(output);
    response["usage"] = Usage::of(chat).map_or(Value::Null, usage);
    Ok(response)
}

/// The output item being streamed.
enum Open {
    Text {
        id: String,
        text: String,
    },
    Call {
        index: u64,
        id: String,
        call_id: String,
        name: String,
        arguments: String,
    },
}

/// A streamed chat answer as Responses events: `response.created`, `response.in_progress`,
/// for each output item `response.output_item.added`, its deltas and `…done` events, then
/// `response.completed` (or `response.incomplete`) with the whole response and its usage; or
/// one `error` event.
pub(super) struct Stream {
    response: Value,
    sequence: u64,
    started: bool,
    items: Vec<Value>,
    open: Option<Open>,
    gathered: usize,
    finish: Option<Finish>,
    usage: Option<Usage>,
}

impl Stream {
    pub(super) fn new(response: Value) -> Self {
        Stream {
            response,
            sequence: 0,
            started: false,
            items: Vec::new(),
            open: None,
            gathered: 0,
            finish: None,
            usage: None,
        }
    }

    fn emit(&mut self, kind: &str, mut data: Value, out: &mut Vec<u8>) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        sse::event(out, kind, &data);
    }

    fn gather(&mut self, more: usize) -> Result<(), String> {
        self.gathered += more;
        if self.gathered > MAX_OUTPUT {
            return Err("the answer is over 4 MiB; ask for fewer tokens".to_owned());
        }
        Ok(())
    }

    fn open(&mut self, open: Open, out: &mut Vec<u8>) {
        self.close(out);
        let index = self.items.len();
        let item = match &open {
            Open::Text { id, .. } => message_item(id, "", "in_progress"),
            Open::Call {
                id, call_id, name, ..
            } => call_item(id, call_id, name, "", "in_progress"),
        };
        self.emit(
            "response.output_item.added",
            json!({"output_index": index, "item": item}),
            out,
        );
        if let Open::Text { id, .. } = &open {
            let part = json!({"type": "output_text", "text": "", "annotations": []});
            let added =
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": part});
            self.emit("response.content_part.added", added, out);
        }
        self.open = Some(open);
    }

    fn close(&mut self, out: &mut Vec<u8>) {
        let index = self.items.len();
        let item = match self.open.take() {
            None => return,
            Some(Open::Text { id, text }) => {
                let at = json!({"item_id": id, "output_index": index, "content_index": 0});
                let mut done = at.clone();
                done["text"] = json!(text);
                done["logprobs"] = json!([]);
                self.emit("response.output_text.done", done, out);
                let mut part = at;
                part["part"] = json!({"type": "output_text", "text": text, "annotations": []});
                self.emit("response.content_part.done", part, out);
                message_item(&id, &text, "completed")
            }
            Some(Open::Call {
                id,
                call_id,
                name,
                arguments,
                ..
            }) => {
                let done = json!({"item_id": id, "output_index": index, "arguments": arguments});
                self.emit("response.function_call_arguments.done", done, out);
                call_item(&id, &call_id, &name, &arguments, "completed")
            }
        };
        let done = json!({"output_index": index, "item": item});
        self.emit("response.output_item.done", done, out);
        self.items.push(item);
    }
}

impl Events for Stream {
    fn chunk(&mut self, chunk: &Value, out: &mut Vec<u8>) -> Result<(), String> {
        if !chunk.is_object() {
            return Err("the engine sent an event that is not a chat chunk".to_owned());
        }
        if !self.started {
            self.started = true;
            model_of(&mut self.response, chunk);
            let response = json!({"response": self.response});
            self.emit("response.created", response.clone(), out);
            self.emit("response.in_progress", response, out);
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
            self.gather(text.len())?;
            if !matches!(self.open, Some(Open::Text { .. })) {
                self.open(
                    Open::Text {
                        id: id("msg_"),
                        text: String::new(),
                    },
                    out,
                );
            }
            if let Some(Open::Text { id, text: all }) = &mut self.open {
                all.push_str(text);
                let delta = json!({"item_id": id.clone(), "output_index": self.items.len(),
                                   "content_index": 0, "delta": text, "logprobs": []});
                self.emit("response.output_text.delta", delta, out);
            }
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            let function = &call["function"];
            // A call's first chunk names it; the rest carry its arguments.
            if !matches!(self.open, Some(Open::Call { index: i, .. }) if i == index) {
                let call_id = call["id"]
                    .as_str()
                    .map_or_else(|| id("call_"), str::to_owned);
                let name = sse::bounded(function["name"].as_str().unwrap_or(""), 256).to_owned();
                self.gather(call_id.len() + name.len())?;
                let open = Open::Call {
                    index,
                    id: id("fc_"),
                    call_id,
                    name,
                    arguments: String::new(),
                };
                self.open(open, out);
            }
            if let Some(part) = function.get("arguments").and_then(Value::as_str)
                && !part.is_empty()
            {
                self.gather(part.len())?;
                if let Some(Open::Call { id, arguments, .. }) = &mut self.open {
                    arguments.push_str(part);
                    let delta = json!({"item_id": id.clone(), "output_index": self.items.len(),
                                       "delta": part});
                    self.emit("response.function_call_arguments.delta", delta, out);
                }
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
        let mut response = std::mem::take(&mut self.response);
        status(&mut response, finish);
        response["output"] = Value::Array(std::mem::take(&mut self.items));
        response["usage"] = self.usage.map_or(Value::Null, usage);
        let kind = if response["status"] == "completed" {
            "response.completed"
        } else {
            "response.incomplete"
        };
        self.emit(kind, json!({"response": response}), out);
        Ok(())
    }

    fn fail(&mut self, message: &str, out: &mut Vec<u8>) {
        let error = json!({"code": "server_error", "message": message, "param": null});
        self.emit("error", error, out);
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
            "model": "gpt-x", "instructions": "Be brief.", "max_output_tokens": 50,
            "temperature": 0.5, "top_p": 0.9, "stream": true, "store": true,
            "reasoning": {"effort": "low"},
            "input": [
                {"role": "developer", "content": "Use tools."},
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "Weather in"}, {"type": "input_text", "text": "Paris?"},
                    {"type": "input_image", "image_url": "https://x/img.png"}]},
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking."}]},
                {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{\"city\":\"Paris\"}"},
                {"type": "function_call", "call_id": "call_2", "name": "time", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
                {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "noon"}]},
            ],
            "tools": [{"type": "function", "name": "weather", "description": "Weather now",
                       "parameters": {"type": "object"}, "strict": true}],
            "tool_choice": {"type": "function", "name": "weather"},
            "parallel_tool_calls": false,
            "text": {"format": {"type": "json_schema", "name": "w", "schema": {"type": "object"}}},
        }))
        .unwrap();
        assert_eq!(
            chat,
            json!({
                "model": "gpt-x", "max_tokens": 50, "temperature": 0.5, "top_p": 0.9,
                "parallel_tool_calls": false, "stream": true, "stream_options": {"include_usage": true},
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {"role": "system", "content": "Use tools."},
                    {"role": "user", "content": [
                        {"type": "text", "text": "Weather in"}, {"type": "text", "text": "Paris?"},
                        {"type": "image_url", "image_url": {"url": "https://x/img.png"}}]},
                    {"role": "assistant", "content": "Looking.", "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}},
                        {"id": "call_2", "type": "function", "function": {"name": "time", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
                    {"role": "tool", "tool_call_id": "call_2", "content": "noon"},
                ],
                "tools": [{"type": "function", "function": {"name": "weather", "description": "Weather now",
                           "parameters": {"type": "object"}, "strict": true}}],
                "tool_choice": {"type": "function", "function": {"name": "weather"}},
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": "w", "schema": {"type": "object"}}},
            })
        );
        let chat = translated(json!({"input": "Hi", "tool_choice": "required"})).unwrap();
        assert_eq!(chat["messages"], json!([{"role": "user", "content": "Hi"}]));
        assert_eq!(chat["tool_choice"], "required");
        // A call that follows no assistant text is its own assistant turn.
        let chat = translated(json!({"input": [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]}))
        .unwrap();
        assert_eq!(chat["messages"][0]["content"], Value::Null);
        assert_eq!(chat["messages"][0]["tool_calls"][0]["id"], "c");
    }

    #[test]
    fn what_isnt_translated_is_refused_by_name() {
        for (request, names) in [
            (json!({}), "input"),
            (
                json!({"input": "x", "previous_response_id": "resp_1"}),
                "previous_response_id",
            ),
            (
                json!({"input": "x", "conversation": "conv_1"}),
                "conversation",
            ),
            (json!({"input": "x", "background": true}), "background"),
            (
                json!({"input": "x", "tools": [{"type": "web_search"}]}),
                "tools[0]",
            ),
            (
                json!({"input": [{"type": "item_reference", "id": "x"}]}),
                "input[0]: items of type \"item_reference\"",
            ),
            (
                json!({"input": [{"role": "user", "content": [{"type": "input_file"}]}]}),
                "input[0].content[0]",
            ),
            (
                json!({"input": [{"role": "tool", "content": "x"}]}),
                "input[0].role",
            ),
            (
                json!({"input": "x", "tool_choice": "sometimes"}),
                "tool_choice",
            ),
            (
                json!({"input": "x", "text": {"format": {"type": "grammar"}}}),
                "text.format",
            ),
            (json!({"input": "x", "instructions": ["a"]}), "instructions"),
        ] {
            let refused = translated(request.clone()).unwrap_err();
            assert!(refused.contains(names), "{request}: {refused}");
        }
    }

    #[test]
    fn a_whole_answer_becomes_a_response() {
        let Value::Object(request) = json!({"model": "gpt-x", "input": "x", "instructions": "Be brief.",
                                            "metadata": {"k": "v"}, "max_output_tokens": 9})
        else {
            panic!()
        };
        let chat = json!({
            "model": "einsora-local",
            "choices": [{"finish_reason": "tool_calls", "message": {"content": "Looking.",
                "tool_calls": [{"id": "call_9", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}}]}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 3}},
        });
        let response = answer(&chat, echo(&request)).unwrap();
        assert!(response["id"].as_str().unwrap().starts_with("resp_"));
        assert_eq!(response["object"], "response");
        assert_eq!(response["status"], "completed");
        assert_eq!(response["model"], "gpt-x");
        assert_eq!(response["instructions"], "Be brief.");
        assert_eq!(response["metadata"], json!({"k": "v"}));
        assert_eq!(response["max_output_tokens"], 9);
        let output = response["output"].as_array().unwrap();
        assert_eq!(output[0]["type"], "message");
        assert_eq!(output[0]["content"][0]["type"], "output_text");
        assert_eq!(output[0]["content"][0]["text"], "Looking.");
        assert_eq!(output[1]["type"], "function_call");
        assert_eq!(output[1]["call_id"], "call_9");
        assert_eq!(output[1]["arguments"], "{\"city\":\"Paris\"}");
        assert_eq!(
            response["usage"],
            json!({"input_tokens": 12, "input_tokens_details": {"cached_tokens": 3}, "output_tokens": 7,
                   "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 19})
        );
        let length = json!({"model": "e", "choices": [{"finish_reason": "length", "message": {"content": "ab"}}]});
        let response = answer(&length, echo(&Map::new())).unwrap();
        assert_eq!(response["status"], "incomplete");
        assert_eq!(
            response["incomplete_details"],
            json!({"reason": "max_output_tokens"})
        );
        assert_eq!(response["model"], "e");
        assert_eq!(response["usage"], Value::Null);
        for hostile in [
            json!({"choices": "x"}),
            json!(null),
            json!({"choices": [{"message": {"tool_calls": [{}]}}]}),
        ] {
            assert!(answer(&hostile, echo(&Map::new())).is_err(), "{hostile}");
        }
    }

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
        let chunk = json!({"id": "c", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    }

    fn echoed() -> Value {
        let Value::Object(request) = json!({"model": "gpt-x", "input": "x"}) else {
            panic!()
        };
        echo(&request)
    }

    #[tokio::test]
    async fn a_streamed_answer_becomes_response_events() {
        let frames = [
            chunk(json!({"role": "assistant"}), Value::Null),
            chunk(json!({"content": "Hel"}), Value::Null),
            chunk(json!({"content": "lo"}), Value::Null),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "weather", "arguments": "{\"ci"}}]}),
                Value::Null,
            ),
            chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": "ty\":1}"}}]}),
                Value::Null,
            ),
            chunk(json!({}), json!("tool_calls")),
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4}}\n\n"
                .to_owned(),
            "data: [DONE]\n\n".to_owned(),
        ];
        let frames: Vec<&[u8]> = frames.iter().map(|f| f.as_bytes()).collect();
        let out = events(&run(Stream::new(echoed()), &frames).await);
        let kinds: Vec<&str> = out.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        for (i, (kind, data)) in out.iter().enumerate() {
            assert_eq!(data["type"], kind.as_str());
            assert_eq!(data["sequence_number"], i);
        }
        assert_eq!(out[0].1["response"]["status"], "in_progress");
        assert_eq!(out[4].1["delta"], "Hel");
        assert_eq!(out[6].1["text"], "Hello");
        assert_eq!(out[9].1["output_index"], 1);
        assert_eq!(out[9].1["item"]["call_id"], "call_1");
        assert_eq!(out[12].1["arguments"], "{\"city\":1}");
        let done = &out[14].1["response"];
        assert_eq!(done["status"], "completed");
        assert_eq!(done["model"], "gpt-x");
        assert_eq!(done["output"][0]["content"][0]["text"], "Hello");
        assert_eq!(done["output"][1]["arguments"], "{\"city\":1}");
        assert_eq!(done["usage"]["total_tokens"], 13);

        let frames = [
            chunk(json!({"content": "ab"}), json!("length")),
            "data: [DONE]\n\n".to_owned(),
        ];
        let frames: Vec<&[u8]> = frames.iter().map(|f| f.as_bytes()).collect();
        let out = events(&run(Stream::new(echoed()), &frames).await);
        let (kind, last) = out.last().unwrap();
        assert_eq!(kind, "response.incomplete");
        assert_eq!(
            last["response"]["incomplete_details"]["reason"],
            "max_output_tokens"
        );
    }

    #[tokio::test]
    async fn a_garbled_unfinished_or_endless_stream_ends_with_one_error_event() {
        let text = chunk(json!({"content": "Hi"}), Value::Null);
        let big = chunk(json!({"content": "x".repeat(200_000)}), Value::Null);
        let endless: Vec<&str> =
            std::iter::repeat_n(big.as_str(), MAX_OUTPUT / 200_000 + 1).collect();
        for (frames, says) in [
            (vec![text.as_str(), "data: {nope\n\n"], "not JSON"),
            (vec![text.as_str(), "data: \"x\"\n\n"], "not a chat chunk"),
            (vec![text.as_str()], "ended before it finished"),
            (
                vec![text.as_str(), "data: {\"error\":\"boom\"}\n\n"],
                "boom",
            ),
            (endless, "over 4 MiB"),
        ] {
            let frames: Vec<&[u8]> = frames.iter().map(|f| f.as_bytes()).collect();
            let out = events(&run(Stream::new(echoed()), &frames).await);
            let (kind, data) = out.last().unwrap();
            assert_eq!(kind, "error");
            assert!(data["message"].as_str().unwrap().contains(says), "{data}");
            assert_eq!(out.iter().filter(|(k, _)| k == "error").count(), 1);
            assert!(!out.iter().any(|(k, _)| k.starts_with("response.completed")));
        }
    }
}
