#!/usr/bin/env python3
"""Encode throughput of HF `tokenizers` (Rust, through Python), one thread, to set beside
`mkserve bench-tokenizer` on the same machine and text (docs/performance.md).

usage: RAYON_NUM_THREADS=1 python3 tools/bench/tokenizers_hf.py TOKENIZER_JSON TEXT_FILE [--lines]
Prints: cold MB/s (first pass) and warm MB/s (median of 5 more passes), and the token count.
"""
import statistics
import sys
import time

from tokenizers import Tokenizer


def main():
    path, text_path = sys.argv[1], sys.argv[2]
    per_line = "--lines" in sys.argv[3:]
    tokenizer = Tokenizer.from_file(path)
    text = open(text_path, encoding="utf-8").read()
    pieces = text.splitlines(keepends=True) if per_line else [text]
    size_mb = len(text.encode("utf-8")) / 1e6
    times, count = [], 0
    for _ in range(6):
        start = time.perf_counter()
        count = sum(len(tokenizer.encode(p, add_special_tokens=False).ids) for p in pieces)
        times.append(time.perf_counter() - start)
    print(f"hf-tokenizers {path} mode={'lines' if per_line else 'whole'} tokens={count} "
          f"cold={size_mb / times[0]:.2f} MB/s warm={size_mb / statistics.median(times[1:]):.2f} MB/s")


if __name__ == "__main__":
    main()
