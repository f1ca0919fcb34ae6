"""Build the SDK's intermediate form from a manifest: walk the schemas, name the types."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import unquote

from sdkgen._docs import field_doc
from sdkgen._manifest import Manifest, Schema, Tool, clean_text, read_manifest
from sdkgen._names import TypeNames, camel, is_py_name, python_tool_names, singular
from sdkgen._nodes import (
    JSON,
    NONE,
    AliasDef,
    Field,
    ListOf,
    Lit,
    MapOf,
    Named,
    ObjectDef,
    Params,
    Prim,
    PrimKind,
    Sdk,
    ToolDef,
    TupleOf,
    TypeDef,
    TypeNode,
    UnionOf,
)
from sdkgen._tidy import tidy


def build_sdk(manifest: Manifest) -> Sdk:
    """Read a manifest and build its intermediate form (same shapes merged, docs shared)."""
    return tidy(_Builder(read_manifest(manifest)).build())


def canonical(value: object) -> str:
    """Return canonical JSON text for value, used to compare schemas: keys sorted, but the
    order of an object's `properties` kept (it is the order its fields are shown in)."""
    return json.dumps(_ordered(value), sort_keys=True, separators=(",", ":"), default=str)


def _ordered(value: object) -> object:
    """value with every `properties` mapping as a list of [key, schema] pairs, in order."""
    if isinstance(value, Mapping):
        out = {str(k): _ordered(v) for k, v in value.items()}
        props = value.get("properties")
        if isinstance(props, Mapping):
            out["properties"] = [[str(k), _ordered(v)] for k, v in props.items()]
        return out
    if isinstance(value, list | tuple):
        return [_ordered(item) for item in value]
    return value


class Hint(NamedTuple):
    """Names a type may get, in order: a short one (the property) and a qualified one."""

    short: str | None
    full: str

    def child(self, key: str) -> Hint:
        return Hint(camel(key), self.full + camel(key))

    def item(self) -> Hint:
        short = singular(self.short) if self.short else None
        return Hint(short, singular(self.full))

    def variant(self, index: int) -> Hint:
        return Hint(f"{self.short}{index}" if self.short else None, f"{self.full}{index}")

    def value(self) -> Hint:
        return Hint(f"{self.short}Value" if self.short else None, self.full + "Value")


def _hint(name: str) -> Hint:
    return Hint(None, name)


@dataclass(slots=True)
class _Side:
    """One side of a tool, its parameters or its output: a schema document with its `$defs`."""

    tool: Tool
    root: Schema
    kind: str  # "Args" or "Result"
    defs_keys: dict[str, str] = field(default_factory=dict)  # def pointer -> content key


def _defs(root: Schema) -> dict[str, Any]:
    """Return pointer -> schema for every entry of `$defs` and `definitions` at the root."""
    found: dict[str, Any] = {}
    if isinstance(root, Mapping):
        for section in ("$defs", "definitions"):
            defs = root.get(section)
            if isinstance(defs, Mapping):
                for key in sorted(defs):
                    found[f"#/{section}/{_escape_pointer(str(key))}"] = defs[key]
    return found


def _escape_pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _refs(node: object, into: set[str]) -> None:
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str):
            into.add(ref)
        for value in node.values():
            _refs(value, into)
    elif isinstance(node, list | tuple):
        for value in node:
            _refs(value, into)


class _Builder:
    """Walks every tool's schemas once, giving out type names in a fixed order."""

    def __init__(self, tools: tuple[Tool, ...]) -> None:
        self._tools = tools
        # A type must not share a name with a method of `class tools` (it would shadow it).
        self._py_names = python_tool_names(tool.name for tool in tools)
        self._names = TypeNames(self._py_names.values())
        # A root type keeps its tool's whole name: `filesystem__read_file` -> `FilesystemReadFileResult`.
        self._bases = {tool.name: camel(tool.name) for tool in tools}
        self._slots: list[TypeDef | None] = []
        self._slot_of: dict[str, int] = {}
        self._ref_names: dict[tuple[str, str], str] = {}  # (side id or content key, ptr)
        self._shapes: dict[str, str] = {}  # shared inline shape key -> base name
        self._shape_names: dict[str, str] = {}  # shared inline shape key -> given name
        self._def_name_keys: dict[str, set[str]] = {}  # def base name -> content keys

    # -- the whole SDK ------------------------------------------------------------------

    def build(self) -> Sdk:
        py_names = self._py_names
        sides = [
            _Side(tool, root, kind)
            for tool in self._tools
            for root, kind in ((tool.parameters, "Args"), (tool.output, "Result"))
            if root is not None
        ]
        for side in sides:
            self._index_defs(side)
        self._shapes = _shared_shapes(sides)
        tools: list[ToolDef] = []
        by_tool = {(s.tool.name, s.kind): s for s in sides}
        for tool in self._tools:
            base = self._bases[tool.name]
            args = by_tool.get((tool.name, "Args"))
            params = self._params(args, base) if args else Params((), None, JSON)
            out = by_tool.get((tool.name, "Result"))
            returns, returns_doc = self._returns(out, base) if out else (JSON, "")
            tools.append(
                ToolDef(
                    tool.name, py_names[tool.name], tool.description, params, returns, returns_doc
                )
            )
        types = tuple(slot for slot in self._slots if slot is not None)
        return Sdk(tuple(tools), types)

    def _index_defs(self, side: _Side) -> None:
        """Key each `$defs` entry by its content and what it refers to, for sharing."""
        defs = _defs(side.root)
        for pointer in defs:
            closure: dict[str, Any] = {}
            todo = [pointer]
            while todo:
                current = todo.pop()
                if current in closure or current not in defs:
                    continue
                closure[current] = defs[current]
                found: set[str] = set()
                _refs(defs[current], found)
                todo.extend(sorted(found))
            key = canonical([pointer, closure])
            side.defs_keys[pointer] = key
            base = camel(_last_segment(pointer))
            self._def_name_keys.setdefault(base, set()).add(key)

    # -- parameters and results ---------------------------------------------------------

    def _params(self, side: _Side, base: str) -> Params:
        root = self._merge_all_of(side, self._follow(side, side.root))
        if root is False:
            return Params((), None, None)
        if not isinstance(root, Mapping) or not _is_object(root):
            return Params((), None, JSON)
        props = root.get("properties")
        extra = self._extra(side, root, base)
        if not isinstance(props, Mapping) or not props:
            return Params((), None, extra)
        plain = all(is_py_name(str(key)) for key in props)
        name = None
        if not plain or "#" in _ref_set(side.root):
            name = self._reserve(_hint(base + "Args"))
            self._ref_names[(id_of(side), "#")] = name
        fields = self._fields(side, root, base)
        if name is not None:
            self._fill(name, ObjectDef(name, _doc(root), fields))
        return Params(fields, None, extra) if plain else Params((), name, None)

    def _extra(self, side: _Side, root: Mapping[str, Any], base: str) -> TypeNode | None:
        """Type of extra keyword arguments: only when `additionalProperties` allows them."""
        extra = root.get("additionalProperties")
        if extra is True or (isinstance(extra, Mapping) and not extra):
            return JSON
        if isinstance(extra, Mapping):
            return self._convert(side, extra, _hint(base + "Extra"))
        return None

    def _returns(self, side: _Side, base: str) -> tuple[TypeNode, str]:
        root = side.root
        doc = clean_text(_str(root.get("description"))) if isinstance(root, Mapping) else ""
        node = self._convert(side, root, _hint(base + "Result"), pointer="#")
        if isinstance(node, Named) and isinstance(self._def(node.name), ObjectDef):
            doc = ""  # the object's own docstring carries it
        return node, doc

    # -- schemas ------------------------------------------------------------------------

    def _convert(self, side: _Side, schema: object, hint: Hint, pointer: str = "") -> TypeNode:
        if pointer == "#":
            key = (id_of(side), "#")
            if key in self._ref_names:
                return Named(self._ref_names[key])
            if "#" in _ref_set(side.root):
                name = self._reserve(hint)
                self._ref_names[key] = name
                self._define(side, schema, name)
                return Named(name)
        if not isinstance(schema, Mapping):
            return JSON
        node = self._convert_mapping(side, schema, hint)
        if schema.get("nullable") is True:
            node = union([node, NONE])
        return node

    def _convert_mapping(self, side: _Side, schema: Mapping[str, Any], hint: Hint) -> TypeNode:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            return self._ref(side, ref)
        if "const" in schema:
            return _literal(schema["const"])
        enum = schema.get("enum")
        if isinstance(enum, list | tuple) and enum:
            return union([_literal(value) for value in enum])
        for key in ("anyOf", "oneOf"):
            members = schema.get(key)
            if isinstance(members, list | tuple) and members and not _constraints_only(members):
                variants = [
                    self._variant(side, schema, member, hint.variant(i))
                    for i, member in enumerate(members, 1)
                ]
                return union(variants)
        all_of = schema.get("allOf")
        if isinstance(all_of, list | tuple) and all_of:
            if len(all_of) == 1 and set(schema) <= _ANNOTATIONS | {"allOf"}:
                return self._convert(side, all_of[0], hint)
            merged = self._merge_all_of(side, schema)
            return JSON if merged is schema else self._convert(side, merged, hint)
        kinds = schema.get("type")
        if isinstance(kinds, str):
            return self._typed(side, schema, kinds, hint)
        if isinstance(kinds, list | tuple) and kinds:
            return union([self._typed(side, schema, str(k), hint) for k in kinds])
        if _is_object(schema):
            return self._typed(side, schema, "object", hint)
        if "items" in schema or "prefixItems" in schema:
            return self._typed(side, schema, "array", hint)
        return JSON

    def _variant(
        self, side: _Side, parent: Mapping[str, Any], member: object, hint: Hint
    ) -> TypeNode:
        """A member of anyOf/oneOf; a bare member inherits the parent's `type`."""
        typed = ("type", "$ref", "const", "enum", "anyOf", "oneOf", "allOf")
        if isinstance(member, Mapping) and "type" in parent and not any(k in member for k in typed):
            member = {"type": parent["type"], **member}
        return self._convert(side, member, hint)

    def _typed(self, side: _Side, schema: Mapping[str, Any], kind: str, hint: Hint) -> TypeNode:
        if kind == "object":
            props = schema.get("properties")
            if isinstance(props, Mapping) and props:
                key = canonical(schema)
                if key in self._shape_names:
                    return Named(self._shape_names[key])
                shared = self._shapes.get(key)
                name = self._reserve(_hint(shared) if shared else hint)
                if shared:
                    self._shape_names[key] = name
                self._fill(name, self._object(side, schema, name))
                return Named(name)
            extra = schema.get("additionalProperties")
            if isinstance(extra, Mapping) and extra:
                return MapOf(self._convert(side, extra, hint.value()))
            patterns = schema.get("patternProperties")
            if isinstance(patterns, Mapping) and patterns:
                values = [self._convert(side, patterns[k], hint.value()) for k in sorted(patterns)]
                return MapOf(union(values))
            return MapOf(JSON)
        if kind == "array":
            prefix = schema.get("prefixItems", schema.get("items"))
            if isinstance(prefix, list | tuple) and prefix:
                rest = schema.get("items") if "prefixItems" in schema else None
                rest = schema.get("additionalItems") if "prefixItems" not in schema else rest
                members = tuple(
                    self._convert(side, i, hint.item().variant(n)) for n, i in enumerate(prefix, 1)
                )
                # A tail the schema leaves open (no `items`) is not typed: the prefix is.
                more = (
                    self._convert(side, rest, hint.item())
                    if isinstance(rest, Mapping) and rest
                    else None
                )
                return TupleOf(members, more)
            items = schema.get("items")
            return ListOf(self._convert(side, items, hint.item()) if items is not None else JSON)
        simple: dict[str, PrimKind] = {
            "string": "str",
            "integer": "int",
            "number": "float",
            "boolean": "bool",
            "null": "none",
        }
        return Prim(simple.get(kind, "json"))

    def _object(self, side: _Side, schema: Mapping[str, Any], name: str) -> ObjectDef:
        return ObjectDef(
            name, clean_text(_str(schema.get("description"))), self._fields(side, schema, name)
        )

    def _fields(self, side: _Side, schema: Mapping[str, Any], parent: str) -> tuple[Field, ...]:
        props = schema.get("properties")
        if not isinstance(props, Mapping):
            return ()
        required = schema.get("required")
        needed = {str(k) for k in required} if isinstance(required, list | tuple) else set()
        fields = []
        for raw, sub in props.items():  # in the order declared
            key = str(raw)
            node = self._convert(side, sub, _hint(parent).child(key))
            fields.append(Field(key, node, key in needed, field_doc(sub), _default(sub)))
        return tuple(fields)

    def _merge_all_of(self, side: _Side, schema: object, depth: int = 0) -> object:
        """Merge an `allOf` of object schemas (refs followed) into one object schema."""
        if not isinstance(schema, Mapping) or not isinstance(schema.get("allOf"), list | tuple):
            return schema
        merged = {key: value for key, value in schema.items() if key != "allOf"}
        props: dict[str, Any] = {}
        required: list[Any] = []
        for member in [merged, *schema["allOf"]]:
            part = self._follow(side, member)
            if part is not merged:
                if depth > 16 or not isinstance(part, Mapping):
                    return schema
                part = self._merge_all_of(side, part, depth + 1)
                if not isinstance(part, Mapping) or not _is_object(part):
                    return schema
            props.update(part.get("properties") or {})
            required.extend(part.get("required") or [])
        merged.update({"type": "object", "properties": props, "required": required})
        return merged

    def _follow(self, side: _Side, schema: object) -> object:
        """Follow a chain of `$ref` to the schema it ends at (None when it cannot be found)."""
        for _ in range(32):
            if not isinstance(schema, Mapping) or not isinstance(schema.get("$ref"), str):
                return schema
            schema = self._resolve(side, schema["$ref"])
        return None

    # -- references ---------------------------------------------------------------------

    def _ref(self, side: _Side, ref: str) -> TypeNode:
        if ref == "#":
            return self._convert(
                side,
                side.root,
                _hint(self._bases[side.tool.name] + side.kind),
                pointer="#",
            )
        if not ref.startswith("#/"):
            return JSON  # a remote reference: not resolvable from the manifest
        content_key = side.defs_keys.get(ref)
        key = ("def", content_key) if content_key else (id_of(side), ref)
        if key in self._ref_names:
            return Named(self._ref_names[key])
        target = self._resolve(side, ref)
        if target is None:
            return JSON
        base = camel(_last_segment(ref))
        if content_key is not None and len(self._def_name_keys.get(base, ())) > 1:
            base = self._bases[side.tool.name] + base
        name = self._reserve(_hint(base))
        self._ref_names[key] = name
        self._define(side, target, name)
        return Named(name)

    def _define(self, side: _Side, schema: object, name: str) -> None:
        schema = self._merge_all_of(side, schema) if isinstance(schema, Mapping | bool) else schema
        doc = clean_text(_str(schema.get("description"))) if isinstance(schema, Mapping) else ""
        if isinstance(schema, Mapping) and isinstance(schema.get("properties"), Mapping):
            kinds = schema.get("type", "object")
            if kinds == "object" and schema.get("nullable") is not True and schema["properties"]:
                self._fill(name, self._object(side, schema, name))
                return
        self._fill(name, AliasDef(name, doc, self._convert(side, schema, _hint(name))))

    def _resolve(self, side: _Side, ref: str) -> Any:
        node: Any = side.root
        for raw in ref[2:].split("/") if ref != "#" else ():
            part = unquote(raw).replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list | tuple) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    # -- the type table -----------------------------------------------------------------

    def _reserve(self, hint: Hint) -> str:
        preferred = (hint.short, hint.full) if hint.short else (hint.full,)
        name = self._names.allocate(hint.full, *preferred)
        self._slot_of[name] = len(self._slots)
        self._slots.append(None)
        return name

    def _fill(self, name: str, definition: TypeDef) -> None:
        self._slots[self._slot_of[name]] = definition

    def _def(self, name: str) -> TypeDef | None:
        return self._slots[self._slot_of[name]]


def _default(schema: object) -> str | None:
    """A property's default as canonical JSON text, or None when it has none."""
    if isinstance(schema, Mapping) and "default" in schema:
        return canonical(schema["default"])
    return None


def _shared_shapes(sides: list[_Side]) -> dict[str, str]:
    """Find inline object shapes (no `$ref` inside) used twice or more; name each.

    The name is the shape's `title` if any, else its property path where first met
    (`options` -> `Options`, its `notify` -> `OptionsNotify`). Roots are not shared.
    """
    counts: dict[str, int] = {}
    names: dict[str, str] = {}

    def walk(node: object, path: str, root: bool) -> None:
        if not isinstance(node, Mapping):
            return
        props = node.get("properties")
        shape = isinstance(props, Mapping) and props and _is_object(node)
        if shape and not root and not _ref_set(node):
            key = canonical(node)
            counts[key] = counts.get(key, 0) + 1
            title = node.get("title")
            names.setdefault(key, camel(title) if isinstance(title, str) else path)
        if isinstance(props, Mapping):
            for prop in sorted(props, key=str):
                walk(props[prop], path + camel(str(prop)), False)
        walk(node.get("items"), singular(path) if path else "Item", False)
        walk(node.get("additionalProperties"), path + "Value", False)
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            members = node.get(key)
            if isinstance(members, list | tuple):
                for i, member in enumerate(members, 1):
                    walk(member, f"{path}{i}", False)

    for side in sides:
        walk(side.root, "", True)
    return {key: names[key] for key, count in counts.items() if count > 1}


def id_of(side: _Side) -> str:
    """Return a stable identity for a side: tool name and kind."""
    return f"{side.tool.name}\x00{side.kind}"


def union(nodes: list[TypeNode]) -> TypeNode:
    """Flatten, deduplicate and order a union; any JSON member makes it JSON."""
    flat: list[TypeNode] = []
    seen: set[object] = set()
    for node in nodes:
        for member in node.members if isinstance(node, UnionOf) else (node,):
            key = (type(member.value), member) if isinstance(member, Lit) else member
            if key not in seen:
                seen.add(key)
                flat.append(member)
    if JSON in flat:
        return JSON
    if Prim("float") in flat:  # a number accepts integer literals already
        flat = [m for m in flat if not (isinstance(m, Lit) and type(m.value) is int)]
    if NONE in flat:
        flat = [m for m in flat if m != NONE] + [NONE]
    return flat[0] if len(flat) == 1 else UnionOf(tuple(flat))


def _literal(value: object) -> TypeNode:
    if value is None:
        return NONE
    if isinstance(value, bool | int | str):
        return Lit(value)
    if isinstance(value, float):
        return Prim("float")
    if isinstance(value, list | tuple):
        return ListOf(JSON)
    if isinstance(value, Mapping):
        return MapOf(JSON)
    return JSON


_ANNOTATIONS = frozenset({"description", "title", "default", "examples", "deprecated"})


def _constraints_only(members: list[Any] | tuple[Any, ...]) -> bool:
    """Tell whether anyOf/oneOf members only say which keys are required (no types)."""
    allowed = _ANNOTATIONS | {"required", "not"}
    return all(isinstance(m, Mapping) and set(m) <= allowed for m in members)


def _doc(schema: object) -> str:
    return clean_text(_str(schema.get("description"))) if isinstance(schema, Mapping) else ""


def _is_object(schema: Mapping[str, Any]) -> bool:
    kinds = schema.get("type")
    if kinds is None:
        return any(k in schema for k in ("properties", "additionalProperties", "patternProperties"))
    return kinds == "object" or (isinstance(kinds, list | tuple) and "object" in kinds)


def _ref_set(schema: object) -> set[str]:
    found: set[str] = set()
    _refs(schema, found)
    return found


def _last_segment(pointer: str) -> str:
    return unquote(pointer.rsplit("/", 1)[-1]).replace("~1", "/").replace("~0", "~")


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""
