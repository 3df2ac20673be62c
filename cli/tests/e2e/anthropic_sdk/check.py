"""The official Anthropic Python SDK against Einsora's inference gateway, whose Messages route
(`/v1/messages`) the gateway translates onto the endpoint's chat completions: each case is a
function marked @case, run in the order written (or only those named on the command line).
Standard library and `anthropic` only.

Environment (cli/tests/e2e/gateway_routes.rs sets it):
  ANTHROPIC_BASE_URL  the endpoint's base URL without `/v1` (`<EINSORA_ACCESS_URL>/e/<id>`)
  ANTHROPIC_API_KEY   a credential it serves, sent as `x-api-key` (the SDK reads both itself)
  EINSORA_BAD_KEY     a well-formed credential it refuses

Prints `ok <case>` for each that passes, and for one that fails what it expected and what it
got; exits 1 if any failed.
"""
import os
import sys
import traceback

import anthropic

CASES = []
MODEL = "claude-on-einsora"  # the engine serves its one model whatever is named


def case(fn):
    CASES.append(fn)
    return fn


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def hello():
    return [{"role": "user", "content": [{"type": "text", "text": "Say"},
                                         {"type": "text", "text": "hello."}]}]


@case
def a_message_whole(client):
    message = client.messages.create(model=MODEL, max_tokens=8, system="Be brief.",
                                     messages=hello(), stop_sequences=["END"])
    expect(message.type == "message" and message.role == "assistant", f"{message}")
    expect(message.id.startswith("msg_") and message.model == MODEL, f"{message}")
    expect(message.stop_reason in ("end_turn", "max_tokens"), f"stop: {message.stop_reason}")
    expect(all(block.type == "text" for block in message.content), f"{message.content}")
    expect(message.usage.input_tokens > 0 and 0 < message.usage.output_tokens <= 8,
           f"usage: {message.usage}")


@case
def a_message_streamed(client):
    with client.messages.stream(model=MODEL, max_tokens=8, messages=hello()) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    expect(kinds[0] == "message_start" and kinds[-1] == "message_stop", f"{kinds}")
    expect("content_block_delta" in kinds and "message_delta" in kinds, f"{kinds}")
    expect(final.content and final.content[0].type == "text" and final.content[0].text,
           f"{final}")
    expect(final.usage.input_tokens > 0 and 0 < final.usage.output_tokens <= 8,
           f"usage: {final.usage}")


@case
def tools_are_translated(client):
    """The tiny model never calls a tool, and its template shows no tools: what is checked is
    that tools, tool_choice and a conversation with a tool_use and its tool_result are served,
    the result reaching the prompt."""
    tools = [{"name": "weather", "description": "The weather in a city now",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    history = hello() + [
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1",
             "content": [{"type": "text", "text": "sunny and warm " * 8}]}]}]
    message = client.messages.create(model=MODEL, max_tokens=4, messages=history, tools=tools,
                                     tool_choice={"type": "any"})
    expect(message.type == "message", f"{message}")
    plain = client.messages.create(model=MODEL, max_tokens=4, messages=hello())
    expect(message.usage.input_tokens > plain.usage.input_tokens + 8,
           f"the tool's result is in the prompt: {message.usage} vs {plain.usage}")


@case
def errors_are_anthropics(client):
    bad = anthropic.Anthropic(api_key=os.environ["EINSORA_BAD_KEY"], max_retries=0)
    try:
        bad.messages.create(model=MODEL, max_tokens=4, messages=hello())
    except anthropic.AuthenticationError as e:
        expect(e.status_code == 401, f"status {e.status_code}")
        expect(e.body["type"] == "error" and e.body["error"]["type"] == "authentication_error",
               f"body: {e.body}")
    else:
        raise AssertionError("a bad key was served")
    try:
        client.messages.create(model=MODEL, max_tokens=4, messages=[
            {"role": "user", "content": [{"type": "document", "source": {
                "type": "text", "media_type": "text/plain", "data": "x"}}]}])
    except anthropic.BadRequestError as e:
        expect(e.body["error"]["type"] == "invalid_request_error", f"body: {e.body}")
        expect("document" in e.body["error"]["message"], f"body: {e.body}")
    else:
        raise AssertionError("an untranslatable block was served")


def main(names):
    client = anthropic.Anthropic(timeout=120)
    chosen = [c for c in CASES if not names or c.__name__ in names]
    unknown = set(names) - {c.__name__ for c in CASES}
    if unknown:
        print(f"no such case: {sorted(unknown)}")
        return 1
    failed = 0
    for fn in chosen:
        try:
            fn(client)
            print(f"ok {fn.__name__}", flush=True)
        except Exception:  # one case's failure, reported; the others still run
            failed += 1
            print(f"FAILED {fn.__name__}:\n{traceback.format_exc()}", flush=True)
    print(f"the Anthropic SDK's cases: {len(chosen) - failed} of {len(chosen)} as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
