#!/usr/bin/env python3
"""Times the chat template on long agent conversations through a running server's /tokenize.

Each conversation is a system and a user turn, then N rounds of one assistant tool call
(`read`, arguments {"path": "src/fileI.cpp"}) and its tool result; /tokenize renders the
template and tokenizes the prompt, so the time is both.

    python3 scripts/template_render_bench.py --url http://127.0.0.1:8000 --rounds 700,2500
"""
import argparse
import json
import time
import urllib.request


def conversation(rounds):
    messages = [{"role": "system", "content": "You are a coding agent."},
                {"role": "user", "content": "fix the bug"}]
    for i in range(rounds):
        call = {"id": f"call_{i}", "type": "function",
                "function": {"name": "read", "arguments": json.dumps({"path": f"src/file{i}.cpp"})}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}",
                         "content": f"int main() {{ return {i}; }}\n" * 5})
    return messages


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--rounds", default="700,2500")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    tools = [{"type": "function", "function": {
        "name": "read", "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
    print("rounds  prompt_tokens  seconds")
    for rounds in (int(r) for r in args.rounds.split(",")):
        body = json.dumps({"messages": conversation(rounds), "tools": tools}).encode()
        for _ in range(args.repeats):
            start = time.time()
            request = urllib.request.Request(args.url + "/tokenize", data=body,
                                             headers={"Content-Type": "application/json"})
            answer = json.load(urllib.request.urlopen(request))
            print(f"{rounds:6d}  {answer.get('count', len(answer.get('tokens', []))):13d}  "
                  f"{time.time() - start:7.3f}")


if __name__ == "__main__":
    main()
