"""Kubernetes' `$(VAR)` expansion, in command, args, env values and `subPathExpr` alike.

One implementation of `third_party/forked/golang/expansion` for every place the kubelet expands.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


def expand(text: str, mapping: Mapping[str, str] | Callable[[str], str | None]) -> str:
    """third_party/forked/golang/expansion.Expand with MappingFuncFor(mapping).

    `$(NAME)` is replaced when NAME is in `mapping` (a mapping, or a function answering None for a
    name it does not know) and kept as is otherwise; `$$` is always `$` (so `$$(NAME)` gives a
    literal `$(NAME)`); any other `$x`, a `$(` without `)`, and a trailing `$` stay. The scan
    resumes after a replacement, so a value is never expanded twice.
    """
    if "$" not in text:
        return text
    out: list[str] = []
    i, end = 0, len(text)
    while i < end:
        ch = text[i]
        if ch != "$" or i + 1 == end:
            out.append(ch)
            i += 1
            continue
        follower = text[i + 1]
        if follower == "$":
            out.append("$")
            i += 2
        elif follower == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append("$(")
                i += 2
            else:
                name = text[i + 2 : close]
                found = mapping.get(name) if isinstance(mapping, Mapping) else mapping(name)
                out.append(f"$({name})" if found is None else found)
                i = close + 1
        else:
            out.append("$" + follower)
            i += 2
    return "".join(out)
