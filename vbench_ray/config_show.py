"""``vbench-ray config BENCHMARK``: a benchmark's composed config (``extends`` and ``include`` merged, overrides
applied) as YAML, each key with the comment its YAML file gives it.

The composition is ``configure.load_config``'s (the values a run would get, required keys left ``???``); the
comments are read from the files the composition reads (the benchmark's YAML, the file it ``extends``, the files
its ``include`` keys name, recursively). Where two files comment the same key, the one whose value wins (the
benchmark's YAML over ``base.yaml``, a node's own lines over its ``include``) gives the comment. The output is a
valid config: ``vbench-ray run`` accepts it once the ``???`` keys are set.
"""

from __future__ import annotations

import inspect
import io
import re
import textwrap
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from vbench_ray.config import INCLUDE_KEY, find_config

_KEY_LINE = re.compile(r"^(\s*)([A-Za-z_][\w.-]*)\s*:(.*)$")


@dataclass
class Comments:
    """Comments of dotted keys: ``above`` (whole lines before the key) and ``inline`` (after its value, with the
    indented comment lines that continue it); ``header``: the file's opening comment."""

    above: dict[str, list[str]] = field(default_factory=dict)
    inline: dict[str, list[str]] = field(default_factory=dict)
    header: list[str] = field(default_factory=list)

    def update(self, other: "Comments") -> None:
        self.above.update(other.above)
        self.inline.update(other.inline)


def _split_comment(text: str) -> tuple[str, str]:
    """``value  # comment`` -> (value, comment), a ``#`` inside quotes not counted."""
    quote = None
    for i, ch in enumerate(text):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i].strip(), text[i + 1 :].strip()
    return text.strip(), ""


def read_comments(path: Path, prefix: str = "", seen: tuple[Path, ...] = ()) -> Comments:
    """The comments of ``path``'s keys (dotted, under ``prefix``), with those of the files it extends and
    includes underneath its own."""
    path = path.resolve()
    if path in seen:  # a cycle: read_yaml has refused it already
        return Comments()
    out, own, pending, stack = Comments(), Comments(), [], []
    last_key, last_indent, started = None, -1, False
    for raw in path.read_text().splitlines():
        stripped = raw.strip()
        indent = len(raw) - len(raw.lstrip())
        if stripped.startswith("#"):
            text = stripped[1:].strip()
            if not started:
                own.header.append(text)
            elif last_key is not None and indent > last_indent and not pending and last_key in own.inline:
                own.inline[last_key].append(text)  # the inline comment goes on, indented under it
            else:
                pending.append(text)
            continue
        match = _KEY_LINE.match(raw)
        if not stripped or stripped.startswith("-") or not match:
            pending = [] if not stripped else pending
            continue
        started = True
        key, rest = match.group(2), match.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parents = [k for _, k in stack]
        dotted = ".".join(([prefix] if prefix else []) + parents + [key])
        value, comment = _split_comment(rest)
        if key in (INCLUDE_KEY, "extends") and value:
            node = ".".join(([prefix] if prefix else []) + parents)
            try:
                target = find_config(yaml.safe_load(value), (path.parent,), str(path))
                out.update(read_comments(target, node, seen + (path,)))
            except Exception:  # noqa: BLE001 - a bad include is load_config's error to report, not the comments'
                pass
        else:
            if pending:
                own.above[dotted] = pending
            if comment:
                own.inline[dotted] = [comment]
        pending = []
        if not value:
            stack.append((indent, key))
        last_key, last_indent = dotted, indent
    out.update(own)
    out.header = own.header
    return out


def _scalar(value: Any) -> str:
    """``value`` as one line of YAML (flow style for lists and mappings)."""
    return yaml.safe_dump([value], default_flow_style=True, width=10**6, allow_unicode=True).strip()[1:-1]


def _field_comments(cls: Any) -> dict[str, str]:
    """``{field: comment}`` of a config dataclass, from its source: the comment lines right above a field, then
    the comments on the field's own lines (its line, and the lines of a value wrapped in brackets)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (OSError, TypeError, tokenize.TokenError, SyntaxError):
        return {}
    out: dict[str, str] = {}
    above: list[str] = []  # comment lines since the last statement
    field, comments, depth = None, [], 0
    for i, tok in enumerate(tokens):
        if field is None:
            if tok.type == tokenize.COMMENT and tok.line.strip().startswith("#"):
                above.append(tok.string.lstrip("#").strip())
            elif tok.type == tokenize.NAME and tok.start[1] == 4 and tokens[i + 1].string == ":":
                field, comments, depth = tok.string, list(above), 0
            elif tok.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
                above = []
            continue
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif tok.type == tokenize.COMMENT:
            comments.append(tok.string.lstrip("#").strip())
        elif tok.type == tokenize.NEWLINE and depth == 0:
            if any(comments):
                out[field] = " ".join(c for c in comments if c)
            field, above = None, []
    return out


def _schema_comments(cfg: Any, path: str = "") -> dict[str, str]:
    """``{dotted key: comment}`` from the config dataclasses of ``cfg``'s structured nodes (keys no YAML comments)."""
    out: dict[str, str] = {}
    if not isinstance(cfg, DictConfig):
        return out
    for key, comment in _field_comments(OmegaConf.get_type(cfg)).items():
        out[f"{path}.{key}" if path else key] = comment
    for key in cfg.keys():
        child = cfg._get_node(key)
        if isinstance(child, DictConfig) and not child._is_missing() and not child._is_none():
            out.update(_schema_comments(child, f"{path}.{key}" if path else str(key)))
    return out


def render(cfg: Any, comments: Comments) -> str:
    """``cfg`` (a DictConfig) as YAML with ``comments``' lines beside its keys (where no YAML comments a key, the
    comment on its field in the config dataclass)."""
    lines = [f"# {c}" if c else "#" for c in comments.header]
    schema = _schema_comments(cfg)

    def walk(node: dict, path: str, depth: int) -> None:
        pad = "  " * depth
        for key, value in node.items():
            dotted = f"{path}.{key}" if path else str(key)
            lines.extend(f"{pad}# {c}" for c in comments.above.get(dotted, []))
            inline = comments.inline.get(dotted) or ([schema[dotted]] if dotted in schema else [])
            if isinstance(value, dict) and value:
                lines.append(f"{pad}{key}:" + (f"  # {inline[0]}" if inline else ""))
                lines.extend(f"{pad}  # {c}" for c in inline[1:])
                walk(value, dotted, depth + 1)
            else:
                head = f"{pad}{key}: {_scalar(value)}"
                lines.append(head + (f"  # {inline[0]}" if inline else ""))
                lines.extend(" " * (len(head) + 2) + f"# {c}" for c in inline[1:])

    walk(OmegaConf.to_container(cfg, resolve=False, throw_on_missing=False), "", 0)
    return "\n".join(lines) + "\n"


def show_config(path: Path, overrides: list[str] | None = None) -> str:
    """The composed config of the YAML at ``path`` with ``overrides``, commented (module docstring)."""
    from vbench_ray.configure import load_config

    from vbench_ray.configure import _expand_group

    cfg = load_config(path, overrides or [], require_all=False)
    comments = read_comments(Path(path))
    for item in map(_expand_group, overrides or []):  # a file an override puts at a node: its comments there
        key, _, value = item.partition("=")
        if key.strip().endswith("." + INCLUDE_KEY):
            found = find_config(value.strip(), (Path.cwd(), Path(path).resolve().parent), f"override `{item}`")
            comments.update(read_comments(found, key.strip()[: -len(INCLUDE_KEY) - 1]))
    return render(cfg, comments)
