#!/usr/bin/env python3
"""Hostile requests against a running server: valid bodies of every generating endpoint with one
to three fields replaced by values of the wrong type, out of range, huge or odd Unicode, sent
with short outputs, some streamed, some cut off mid-stream. Every answer must be a 200 or a 4xx
with an OpenAI error body; a 5xx, a dropped connection or a server that is not idle afterwards
(/metrics: no running or waiting requests, no KV block held) fails the run.

    python3 scripts/request_mutator.py --url http://127.0.0.1:8000 --count 2000 --seed 1
"""
import argparse
import http.client
import json
import random
import sys
import time
import urllib.parse

SEEDS = [
    ("/v1/chat/completions", {
        "messages": [{"role": "system", "content": "be brief"},
                     {"role": "user", "content": "hello"}],
        "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "stop": ["x"], "n": 1,
        "logprobs": True, "top_logprobs": 2, "seed": 3,
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a": {"type": "string"}}}}}],
        "tool_choice": "auto"}),
    ("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "json please"}], "max_tokens": 12,
        "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {
            "type": "object", "properties": {"k": {"type": "integer", "minimum": 0}},
            "required": ["k"]}}},
        "chat_template_kwargs": {"enable_thinking": False}}),
    ("/v1/completions", {"prompt": "once upon", "max_tokens": 8, "echo": True, "logprobs": 2,
                         "stop": "\n", "min_tokens": 1, "presence_penalty": 0.5}),
    ("/v1/completions", {"prompt": [[1, 2, 3], "text"], "max_tokens": 4, "n": 2}),
    ("/v1/responses", {"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
                       "instructions": "short", "max_output_tokens": 16,
                       "text": {"format": {"type": "json_object"}},
                       "reasoning": {"effort": "low"}, "store": True}),
    ("/tokenize", {"messages": [{"role": "user", "content": "x"}], "add_generation_prompt": True}),
    ("/detokenize", {"tokens": [1, 2, 3]}),
]

HOSTILE = [None, True, False, 0, -1, 1, 2**31, 2**63, -2**63, 1e308, -1e308, 1.5, 0.0, "",
           "x" * 5000, "\u0000", "\ud7ff\ue000", "<|END_OF_TURN_TOKEN|>", "<|START_TEXT|>",
           "\U0001F600" * 50, [], [None], [[[]]], {}, {"type": "object"}, {"a": {"b": {"c": 1}}},
           [1] * 300, ["a", 1, None], "auto", "none", "required", -0.0, 1e-300]


def mutate(body, rng):
    body = json.loads(json.dumps(body))
    for _ in range(rng.randint(1, 3)):
        # A path to a random node: the body itself, a field, or a field inside one.
        node, key = body, rng.choice(list(body.keys()) + ["extra_" + str(rng.randint(0, 9))])
        while isinstance(node.get(key) if isinstance(node, dict) else None, (dict, list)) \
                and rng.random() < 0.5:
            child = node[key]
            if isinstance(child, dict) and child:
                node, key = child, rng.choice(list(child.keys()))
            elif isinstance(child, list) and child:
                node, key = child, rng.randrange(len(child))
            else:
                break
        if rng.random() < 0.1 and isinstance(node, dict):
            node.pop(key, None)
        else:
            node[key] = json.loads(json.dumps(rng.choice(HOSTILE)))  # a fresh copy
    return body


def send(url, path, body, stream_cut, timeout):
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    data = json.dumps(body).encode()
    conn.request("POST", path, data, {"Content-Type": "application/json"})
    response = conn.getresponse()
    if stream_cut and response.status == 200:
        response.read(64)  # then hang up mid-stream
        conn.close()
        return response.status, b""
    payload = response.read()
    conn.close()
    return response.status, payload


def metric(url, name):
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    counts, failures = {}, []
    for i in range(args.count):
        path, seed = rng.choice(SEEDS)
        body = mutate(seed, rng)
        stream = rng.random() < 0.3 and path != "/tokenize" and path != "/detokenize"
        if stream:
            body["stream"] = True
        try:
            status, payload = send(args.url, path, body, stream and rng.random() < 0.3,
                                   args.timeout)
        except Exception as error:  # a dropped connection or a timeout
            failures.append((path, body, repr(error)))
            continue
        counts[status] = counts.get(status, 0) + 1
        if status >= 500 or (400 <= status < 500 and b'"error"' not in payload):
            failures.append((path, body, status, payload[:300]))
    time.sleep(1)
    running = metric(args.url, "mkserve_num_requests_running")
    waiting = metric(args.url, "mkserve_num_requests_waiting")
    kv_used = metric(args.url, "mkserve_kv_blocks_used")
    print("statuses", dict(sorted(counts.items())), "running", running, "waiting", waiting,
          "kv blocks used", kv_used)
    for failure in failures[:20]:
        print("FAIL", json.dumps(failure, default=str)[:600])
    if failures or running or waiting or kv_used:
        sys.exit(1)


if __name__ == "__main__":
    main()
