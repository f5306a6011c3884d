#!/usr/bin/env python3
"""Where the megakernel spends its registers, from its SASS with line information
(scripts/megakernel_sass.sh makes it: `nvdisasm -g -c` of the megakernel's cubin).

Usage: megakernel_sass.py KERNEL.sass [lines]

Prints the highest register the code names (ptxas reports the launch count; with setmaxnreg a
part of the kernel may use more), the instructions by source file with their spill
instructions (STL / LDL: local memory), and the source lines with the most spill instructions
(default 30).
"""
import collections
import re
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    source = ("?", 0)
    highest = 0
    instructions = collections.Counter()
    spills_by_file = collections.Counter()
    spills_by_line = collections.Counter()
    for line in open(sys.argv[1], errors="replace"):
        where = re.search(r'//## File "([^"]+)", line (\d+)', line)
        if where:
            source = (where.group(1).split("/src/")[-1], int(where.group(2)))
            continue
        if not re.match(r"\s+/\*[0-9a-f]{4,}\*/", line):
            continue
        instructions[source[0]] += 1
        for register in re.finditer(r"\bR(\d+)\b", line):
            highest = max(highest, int(register.group(1)))
        if re.search(r"\b(STL|LDL)\b", line):
            spills_by_file[source[0]] += 1
            spills_by_line[source] += 1
    print(f"highest register named: R{highest}")
    print(f"instructions: {sum(instructions.values())}, spill instructions: "
          f"{sum(spills_by_file.values())}")
    print("| source file | instructions | spill instructions |\n|---|---|---|")
    for name, count in instructions.most_common(15):
        print(f"| {name} | {count} | {spills_by_file[name]} |")
    print("| source line | spill instructions |\n|---|---|")
    for (name, number), count in spills_by_line.most_common(top):
        print(f"| {name}:{number} | {count} |")


if __name__ == "__main__":
    main()
