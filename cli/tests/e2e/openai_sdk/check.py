"""The official OpenAI Python SDK against Einsora's inference gateway: each case is a function
marked @case, run in the order written (or only those named on the command line), each with a
fresh look at the gateway. Standard library and `openai` only.

Environment (cli/tests/e2e/openai_sdk.rs sets it):
  OPENAI_BASE_URL   the endpoint's base URL, `<EINSORA_ACCESS_URL>/e/<id>/v1`
  OPENAI_API_KEY    a credential it serves (the SDK reads both itself)
  EINSORA_BAD_KEY   a well-formed credential it refuses

Prints `ok <case>` for each that passes, and for one that fails what it expected and what it
got; exits 1 if any failed. To add a case (embeddings, tools, key scopes), write a function
taking a `Gateway` and raising AssertionError when the gateway is wrong, and mark it @case.
"""
import os
import sys
import threading
import time
import traceback

import openai

CASES = []


def case(fn):
    CASES.append(fn)
    return fn


class Gateway:
    """What every case needs: the settings and a client (the SDK's defaults: max_retries 2)."""

    def __init__(self):
        self.base_url = os.environ["OPENAI_BASE_URL"]
        self.api_key = os.environ["OPENAI_API_KEY"]
        self.bad_key = os.environ["EINSORA_BAD_KEY"]
        self.client = openai.OpenAI(timeout=120)
        self._model = None

    def model(self):
        """The model the endpoint serves, as it lists it."""
        if self._model is None:
            self._model = self.client.models.list().data[0].id
        return self._model

    def client_with(self, **options):
        return openai.OpenAI(api_key=options.pop("api_key", self.api_key),
                             base_url=options.pop("base_url", self.base_url),
                             timeout=120, **options)


def hello():
    return [{"role": "user", "content": "Say hello."}]


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


@case
def models_are_listed(gw):
    models = gw.client.models.list()
    ids = [m.id for m in models.data]
    expect(ids and all(isinstance(i, str) and i for i in ids), f"model ids: {ids}")


@case
def a_chat_completion_whole(gw):
    answer = gw.client.chat.completions.create(model=gw.model(), messages=hello(), max_tokens=8)
    expect(answer.object == "chat.completion", f"object: {answer.object}")
    expect(answer.choices and answer.choices[0].message.role == "assistant", f"{answer}")
    expect(answer.usage.prompt_tokens > 0 and 0 < answer.usage.completion_tokens <= 8,
           f"usage: {answer.usage}")


@case
def a_chat_completion_streamed_with_usage(gw):
    stream = gw.client.chat.completions.create(
        model=gw.model(), messages=hello(), max_tokens=8, stream=True,
        stream_options={"include_usage": True})
    chunks = list(stream)
    expect(len(chunks) >= 2, f"streamed in pieces: {chunks}")
    deltas = [c for c in chunks if c.choices]
    expect(deltas and all(c.object == "chat.completion.chunk" for c in chunks), f"{chunks}")
    last = chunks[-1]
    # Asked for, usage comes in a last chunk of its own, with no choices.
    expect(last.usage is not None and not last.choices, f"last chunk: {last}")
    expect(0 < last.usage.completion_tokens <= 8, f"usage: {last.usage}")


@case
def a_completion(gw):
    answer = gw.client.completions.create(model=gw.model(), prompt="Once upon a time",
                                          max_tokens=8)
    expect(answer.choices and isinstance(answer.choices[0].text, str), f"{answer}")
    expect(0 < answer.usage.completion_tokens <= 8, f"usage: {answer.usage}")


@case
def embeddings(gw):
    # The SDK asks for base64 and decodes it: llama.cpp serves both encodings.
    answer = gw.client.embeddings.create(model=gw.model(), input=["hello", "world"])
    vectors = [d.embedding for d in answer.data]
    expect(len(vectors) == 2 and all(len(v) > 0 for v in vectors), f"{answer}")
    expect(len(vectors[0]) == len(vectors[1]), "one width")
    expect(all(isinstance(x, float) for x in vectors[0]), "floats")
    expect(vectors[0] != vectors[1], "each input its own vector")
    expect(answer.usage.prompt_tokens > 0, f"usage: {answer.usage}")
    floats = gw.client.embeddings.create(model=gw.model(), input="hello", encoding_format="float")
    expect(len(floats.data[0].embedding) == len(vectors[0]), f"{floats}")


WEATHER = [{"type": "function", "function": {
    "name": "weather", "description": "The weather in a city now",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


@case
def tools_reach_the_engine_whole_and_streamed(gw):
    """The tiny model answers gibberish, never a call, and its template shows no tools: what is
    checked is that tools, tool_choice and a conversation with a call and its result reach the
    engine (it parses them, and says so when they're wrong), streamed too."""
    plain = gw.client.chat.completions.create(model=gw.model(), messages=hello(), max_tokens=4)
    history = hello() + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny and warm " * 8}]
    answer = gw.client.chat.completions.create(
        model=gw.model(), messages=history, max_tokens=4, tools=WEATHER,
        tool_choice={"type": "function", "function": {"name": "weather"}})
    expect(answer.choices, f"{answer}")
    expect(answer.usage.prompt_tokens > plain.usage.prompt_tokens + 8,
           f"the tool's result is in the prompt: {answer.usage} vs {plain.usage}")
    try:
        gw.client_with(max_retries=0).chat.completions.create(
            model=gw.model(), messages=hello(), max_tokens=4, tools=[{"type": "bogus"}])
    except openai.APIStatusError as e:
        expect("Unsupported tool type" in str(e.body), f"the engine parsed the tools: {e.body}")
    else:
        raise AssertionError("an unknown tool type was served")
    chunks = list(gw.client.chat.completions.create(
        model=gw.model(), messages=history, max_tokens=4, tools=WEATHER, stream=True))
    expect(any(c.choices and c.choices[0].finish_reason for c in chunks), f"{chunks}")
    # The engine's own refusal of a tool_choice it can't honour comes back as it said it.
    try:
        gw.client.chat.completions.create(model=gw.model(), messages=hello(), max_tokens=4,
                                          tools=WEATHER, tool_choice="sometimes")
    except openai.BadRequestError as e:
        expect("tool_choice" in str(e.body), f"body: {e.body}")
    else:
        raise AssertionError("an unknown tool_choice was served")


@case
def a_response_whole_and_streamed(gw):
    """OpenAI's Responses API, translated onto chat completions by the gateway."""
    answer = gw.client.responses.create(model=gw.model(), instructions="Be brief.",
                                        input="Say hello.", max_output_tokens=8)
    expect(answer.object == "response" and answer.id.startswith("resp_"), f"{answer}")
    expect(answer.status in ("completed", "incomplete"), f"status {answer.status}")
    expect(answer.output and answer.output[0].type == "message", f"{answer.output}")
    expect(isinstance(answer.output_text, str), f"{answer}")
    expect(answer.usage.input_tokens > 0 and 0 < answer.usage.output_tokens <= 8,
           f"usage: {answer.usage}")
    events = list(gw.client.responses.create(model=gw.model(), input="Say hello.",
                                             max_output_tokens=8, stream=True))
    kinds = [e.type for e in events]
    expect(kinds[0] == "response.created", f"{kinds}")
    expect(kinds[-1] in ("response.completed", "response.incomplete"), f"{kinds}")
    expect("response.output_text.delta" in kinds, f"{kinds}")
    expect([e.sequence_number for e in events] == list(range(len(events))), "in sequence")
    done = events[-1].response
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    expect(done.output[0].content[0].text == text, f"{done}")
    expect(0 < done.usage.output_tokens <= 8, f"usage: {done.usage}")


@case
def a_bad_key_raises_the_authentication_error(gw):
    client = gw.client_with(api_key=gw.bad_key)
    try:
        client.models.list()
    except openai.AuthenticationError as e:
        expect(e.status_code == 401, f"status {e.status_code}")
        # The body parsed: OpenAI's shape, its message the gateway's.
        expect(isinstance(e.body, dict) and "API token" in e.body.get("message", ""),
               f"body: {e.body}")
        expect(e.type == "authentication_error" and e.code == "invalid_api_key",
               f"type {e.type}, code {e.code}")
        expect(e.request_id, "the request ID is in the headers")
    else:
        raise AssertionError("a bad key was served")


@case
def the_gateways_errors_parse(gw):
    # Over the endpoint's token bound: refused by the gateway, naming the limit.
    try:
        gw.client.chat.completions.create(model=gw.model(), messages=hello(),
                                          max_tokens=10_000_000)
    except openai.BadRequestError as e:
        expect(e.type == "invalid_request_error", f"type {e.type}: {e.body}")
        expect("EINSORA_ENDPOINT_MAX_TOKENS" in e.body["message"], f"body: {e.body}")
    else:
        raise AssertionError("an unbounded request was served")
    # No such endpoint.
    nowhere = gw.base_url.rsplit("/e/", 1)[0] + "/e/00000000-0000-7000-8000-000000000000/v1"
    try:
        gw.client_with(base_url=nowhere).models.list()
    except openai.NotFoundError as e:
        expect(e.type == "not_found_error" and e.body["message"], f"body: {e.body}")
    else:
        raise AssertionError("an unknown endpoint answered")
    # The one base URL, a model nothing of the tenant's serves: OpenAI's own code for it.
    one_base = gw.base_url.rsplit("/e/", 1)[0] + "/v1"
    try:
        gw.client_with(base_url=one_base).chat.completions.create(
            model="no-such-model", messages=hello(), max_tokens=1)
    except openai.NotFoundError as e:
        expect(e.code == "model_not_found", f"code {e.code}: {e.body}")
    else:
        raise AssertionError("an unknown model answered")


@case
def a_429_is_retried_after_the_hinted_delay_then_served(gw):
    """With one slot and no queue (the test's settings), a request while another streams is
    refused 429 with a hint; the SDK waits as hinted and retries (its default two retries).
    The stream in flight is closed as soon as the 429 is seen, so the retry finds the slot
    free whatever the model's speed. A small model may finish that stream before the request
    comes: then it is tried again."""
    for _ in range(5):
        seen, answer = refused_then_served(gw)
        if seen[0][1] == 429:
            break
    else:
        raise AssertionError(f"never refused: the stream in flight always ended first: {seen}")
    statuses = [s for _, s, _, _ in seen]
    expect(statuses[-1] == 200 and answer.choices, f"answers: {seen}, {answer}")
    (at, _, ms, secs) = seen[0]
    expect(ms is not None and secs is not None, f"hinted: {seen[0]}")
    hint = float(ms) / 1000
    expect(0 < hint <= 60 and int(secs) == -(-int(ms) // 1000), f"hint: {ms} ms, {secs} s")
    # The retry waited the hint (the next answer came after it).
    expect(seen[1][0] - at >= hint * 0.9, f"retried after {seen[1][0] - at:.3f}s, hint {hint}s")
    print(f"  429 with a hint of {hint:.3f}s; answered {statuses} over {seen[-1][0] - at:.3f}s")


def refused_then_served(gw):
    """A request made while a long stream holds the endpoint's one slot, the stream closed
    once the request is refused; the answers it got ((time, status, retry-after-ms,
    retry-after) each), and what the SDK returned."""
    seen = []
    refused = threading.Event()

    def answered(response):
        seen.append((time.monotonic(), response.status_code,
                     response.headers.get("retry-after-ms"),
                     response.headers.get("retry-after")))
        if response.status_code == 429:
            refused.set()

    blocker = gw.client_with(max_retries=0).chat.completions.create(
        model=gw.model(), messages=hello(), max_tokens=800, stream=True,
        extra_body={"ignore_eos": True})
    next(iter(blocker))  # in flight: the endpoint's one slot is taken

    def close_when_refused():
        refused.wait(60)
        blocker.close()

    closer = threading.Thread(target=close_when_refused)
    closer.start()
    try:
        hooked = openai.DefaultHttpxClient(event_hooks={"response": [answered]})
        client = gw.client_with(http_client=hooked)
        answer = client.chat.completions.create(model=gw.model(), messages=hello(),
                                                max_tokens=4)
    finally:
        refused.set()
        closer.join()
    return seen, answer


def main(names):
    gw = Gateway()
    chosen = [c for c in CASES if not names or c.__name__ in names]
    unknown = set(names) - {c.__name__ for c in CASES}
    if unknown:
        print(f"no such case: {sorted(unknown)}")
        return 1
    failed = 0
    for fn in chosen:
        try:
            fn(gw)
            print(f"ok {fn.__name__}", flush=True)
        except Exception:  # one case's failure, reported; the others still run
            failed += 1
            print(f"FAILED {fn.__name__}:\n{traceback.format_exc()}", flush=True)
    print(f"the OpenAI SDK's cases: {len(chosen) - failed} of {len(chosen)} as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
