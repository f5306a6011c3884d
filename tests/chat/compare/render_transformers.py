#!/usr/bin/env python3
"""Renders the comparison cases with transformers' own chat-template environment (Python jinja2).

    python3 render_transformers.py cases.json transformers_renders.json

cases.json comes from `node compare.mjs TOOL --dump-cases cases.json`. The output maps each case
id to {"output": ...} or {"error": ...}; compare.mjs checks mkserve's renders against it. It needs
transformers, which the GPU machine has; CI only reads the stored result.
"""
import json
import sys

import jinja2
import transformers
from transformers.utils.chat_template_utils import _compile_jinja_template


def main():
    cases = json.load(open(sys.argv[1], encoding="utf-8"))
    renders = {}
    for case in cases:
        try:
            template = _compile_jinja_template(case["source"])
            renders[case["id"]] = {"output": template.render(**case["context"])}
        except Exception as error:  # the error class and message are kept for the report
            renders[case["id"]] = {"error": f"{type(error).__name__}: {error}"}
    result = {"transformers": transformers.__version__, "jinja2": jinja2.__version__, "renders": renders}
    with open(sys.argv[2], "w", encoding="utf-8") as out:
        json.dump(result, out, ensure_ascii=False, indent=1, sort_keys=True)
    print(f"rendered {len(cases)} cases with transformers {transformers.__version__}, jinja2 {jinja2.__version__}")


if __name__ == "__main__":
    main()
