"""Drives a running `baro-engine serve` with the real `openai` and `ollama` Python clients.

Usage: clients.py BASE_URL API_KEY. The server must serve the built-in random-weight model
(or any model) with --api-key API_KEY, --max-tokens >= 96 and --max-context >= 1024. Checks
streaming, usage, structured output (validated with `jsonschema`), tool calls, embeddings'
501 and the error cases; prints one line per check and exits non-zero if any failed.
"""

import json
import sys

import jsonschema
import ollama
import openai

BASE, KEY = sys.argv[1], sys.argv[2]
failures = []


def check(name, fn):
    try:
        fn()
        print(f"ok    {name}")
    except Exception as e:  # noqa: BLE001 - report every failure, keep going
        failures.append(name)
        print(f"FAIL  {name}: {type(e).__name__}: {e}")


SCHEMA = {
    "type": "object",
    "properties": {
        "ok": {"type": "boolean"},
        "color": {"enum": ["red", "green", "blue"]},
        "n": {"type": "integer", "minimum": 0, "maximum": 99},
    },
    "required": ["ok", "color", "n"],
    "additionalProperties": False,
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"enum": ["Paris", "Oslo"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
            "required": ["city", "days"],
            "additionalProperties": False,
        },
    },
}
MSGS = [{"role": "user", "content": "weather in Paris?"}]

oa = openai.OpenAI(base_url=f"{BASE}/v1", api_key=KEY, max_retries=0, timeout=120)
model = None


def models():
    global model
    listed = oa.models.list().data
    assert len(listed) == 1, listed
    model = listed[0].id
    assert oa.models.retrieve(model).id == model


def chat():
    r = oa.chat.completions.create(model=model, messages=MSGS, max_tokens=5, seed=1)
    assert r.usage.completion_tokens <= 5 and r.choices[0].message.role == "assistant", r


def chat_stream():
    chunks = list(oa.chat.completions.create(model=model, messages=MSGS, max_tokens=5, seed=1, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    whole = oa.chat.completions.create(model=model, messages=MSGS, max_tokens=5, seed=1).choices[0].message.content
    assert text == whole, (text, whole)
    assert chunks[-1].usage is not None


def completions():
    r = oa.completions.create(model=model, prompt="the sky is", max_tokens=4, seed=-1, top_p=0)
    assert r.choices[0].finish_reason in ("stop", "length"), r


def json_schema():
    for seed in (1, 2, 3):
        r = oa.chat.completions.create(model=model, messages=MSGS, max_tokens=96, seed=seed,
                                       response_format={"type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": SCHEMA}})
        jsonschema.validate(json.loads(r.choices[0].message.content), SCHEMA)


def json_schema_parse():
    # The client's own structured-output helper (it sends a strict json_schema).
    from pydantic import BaseModel, Field
    from typing import Literal

    class Sky(BaseModel):
        ok: bool
        color: Literal["red", "green", "blue"]
        n: int = Field(ge=0, le=99)

    r = oa.chat.completions.parse(model=model, messages=MSGS, max_tokens=96, seed=4, response_format=Sky)
    assert isinstance(r.choices[0].message.parsed, Sky), r


def tools_required():
    r = oa.chat.completions.create(model=model, messages=MSGS, max_tokens=96, seed=5, tools=[WEATHER], tool_choice="required")
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather", r
    args = json.loads(call.function.arguments)
    jsonschema.validate(args, WEATHER["function"]["parameters"])
    back = MSGS + [r.choices[0].message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": "18C"}]
    r2 = oa.chat.completions.create(model=model, messages=back, max_tokens=4, seed=6, tools=[WEATHER])
    assert r2.choices[0].message is not None


def tools_streamed():
    stream = oa.chat.completions.create(model=model, messages=MSGS, max_tokens=96, seed=7, tools=[WEATHER],
                                        tool_choice={"type": "function", "function": {"name": "get_weather"}}, stream=True)
    calls, finish = [], None
    for c in stream:
        d = c.choices[0].delta
        calls += d.tool_calls or []
        finish = c.choices[0].finish_reason or finish
    assert finish == "tool_calls" and len(calls) == 1 and calls[0].function.name == "get_weather", (calls, finish)
    jsonschema.validate(json.loads(calls[0].function.arguments), WEATHER["function"]["parameters"])


def errors():
    for kwargs, status in [(dict(temperature=3), 400), (dict(n=2), 400), (dict(model="gpt-9"), 404)]:
        try:
            oa.chat.completions.create(**{"model": model, "messages": MSGS, "max_tokens": 2, **kwargs})
        except openai.APIStatusError as e:
            assert e.status_code == status and "expected" in e.message, (kwargs, e.status_code, e.message)
        else:
            raise AssertionError(f"{kwargs} was accepted")
    try:
        openai.OpenAI(base_url=f"{BASE}/v1", api_key="wrong", max_retries=0).models.list()
    except openai.AuthenticationError as e:
        assert e.status_code == 401
    else:
        raise AssertionError("a wrong key was accepted")
    try:
        oa.embeddings.create(model=model, input="hi")
    except openai.APIStatusError as e:
        assert e.status_code == 501
    else:
        raise AssertionError("embeddings answered")


ol = ollama.Client(host=BASE, headers={"Authorization": f"Bearer {KEY}"}, timeout=120)


def ollama_basics():
    assert [m.model for m in ol.list().models] == [model]
    assert ol.show(model).details.family == "qwen35moe"
    assert [m.model for m in ol.ps().models] == [model]
    r = ol.generate(model=model, prompt="hi", options={"num_predict": 4, "seed": -1})
    assert r.done and r.eval_count <= 4, r


def ollama_stream_and_format():
    parts = list(ol.chat(model=model, messages=MSGS, stream=True, options={"num_predict": 5, "seed": 8}))
    assert parts[-1].done, parts[-1]
    r = ol.chat(model=model, messages=MSGS, format=SCHEMA, options={"num_predict": 96, "seed": 9})
    jsonschema.validate(json.loads(r.message.content), SCHEMA)
    r = ol.generate(model=model, prompt="json please", format="json", options={"num_predict": 96, "temperature": 0})
    assert r.response.lstrip().startswith("{"), r.response
    r = ol.chat(model=model, messages=MSGS, tools=[WEATHER], options={"num_predict": 4, "seed": 10})
    assert r.done, r


def ollama_errors():
    try:
        ol.embed(model=model, input="hi")
    except ollama.ResponseError as e:
        assert e.status_code == 501 and "embeddings" in e.error, e
    else:
        raise AssertionError("embed answered")
    try:
        ollama.Client(host=BASE).list()
    except ollama.ResponseError as e:
        assert e.status_code == 401, e
    else:
        raise AssertionError("no key was accepted")


for name, fn in [("openai: models", models), ("openai: chat", chat), ("openai: chat streaming", chat_stream),
                 ("openai: completions, seed -1, top_p 0", completions), ("openai: json_schema", json_schema),
                 ("openai: chat.completions.parse (pydantic)", json_schema_parse), ("openai: tools required", tools_required),
                 ("openai: tools streamed", tools_streamed), ("openai: errors", errors), ("ollama: list/show/ps/generate", ollama_basics),
                 ("ollama: stream, format, tools", ollama_stream_and_format), ("ollama: errors", ollama_errors)]:
    check(name, fn)
print(f"{len(failures)} failed" if failures else "all passed")
sys.exit(1 if failures else 0)
