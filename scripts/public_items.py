#!/usr/bin/env python3
"""Counts the public items of a crate reachable from its root, from rustdoc's JSON output.

Counted: every item reachable from the crate root through public modules and re-exports,
except impl blocks and the members of trait impls; struct fields, enum variants (and their
fields), the members of inherent impls (methods, constants, types), trait members and
re-exports (`use`) are counted. Each item once, by its rustdoc id.

Usage: public_items.py JSON [--limit N] [--label TEXT]
Prints the total and the count per top-level module; exits 1 when the total is above the limit.
"""

import argparse
import json
import sys
from collections import Counter, deque


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    with open(args.json, encoding="utf-8") as f:
        doc = json.load(f)
    index = doc["index"]
    root = str(doc["root"])

    seen = set()
    per_module = Counter()
    # Breadth first from the root, so that an item counts for the first place it is reached
    # from: the root itself ("(root)": its own items and re-exports), or one of the root's
    # public modules (its name).
    todo = deque([(root, None)])

    def push(i, top):
        if i is not None and str(i) in index and str(i) not in seen:
            todo.append((str(i), top))

    while todo:
        i, top = todo.popleft()
        if i in seen:
            continue
        seen.add(i)
        item = index[i]
        if item.get("crate_id", 0) != 0:
            continue
        inner = item["inner"]
        kind = next(iter(inner))
        body = inner[kind]
        if kind == "impl":
            # The block itself is not counted; an inherent impl's members are.
            if body.get("trait") is None:
                for m in body.get("items", []):
                    push(m, top)
            continue
        per_module[top or "(root)"] += 1
        if kind == "module":
            for m in body.get("items", []):
                if i == root:
                    child = index.get(str(m), {})
                    push(m, child.get("name") if "module" in child.get("inner", {}) else None)
                else:
                    push(m, top)
        elif kind == "use":
            push(body.get("id"), top)
        elif kind == "struct":
            k = body.get("kind", {})
            if isinstance(k, dict):
                if "plain" in k:
                    for fld in k["plain"].get("fields", []):
                        push(fld, top)
                elif "tuple" in k:
                    for fld in k["tuple"]:
                        push(fld, top)
            for m in body.get("impls", []):
                push(m, top)
        elif kind == "union":
            for fld in body.get("fields", []):
                push(fld, top)
            for m in body.get("impls", []):
                push(m, top)
        elif kind == "enum":
            for v in body.get("variants", []):
                push(v, top)
            for m in body.get("impls", []):
                push(m, top)
        elif kind == "variant":
            k = body.get("kind", {})
            if isinstance(k, dict):
                if "struct" in k:
                    for fld in k["struct"].get("fields", []):
                        push(fld, top)
                elif "tuple" in k:
                    for fld in k["tuple"]:
                        push(fld, top)
        elif kind == "trait":
            for m in body.get("items", []):
                push(m, top)
            for m in body.get("implementations", []) or []:
                push(m, top)
        elif kind in ("type_alias", "primitive"):
            for m in body.get("impls", []) or []:
                push(m, top)

    total = sum(per_module.values())
    label = f" ({args.label})" if args.label else ""
    print(f"public items reachable from the root{label}: {total}")
    for name, n in sorted(per_module.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:5}  {name}")
    if args.limit is not None and total > args.limit:
        print(f"above the limit of {args.limit}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
