"""Tool manifests for the sdkgen tests: a representative one, a large MCP-like one."""

from __future__ import annotations

from typing import Any

Item = dict[str, Any]


def representative() -> list[Item]:
    """Return a manifest that uses every schema feature sdkgen handles, in both shapes."""
    tree_defs = {
        "Node": {
            "type": "object",
            "description": "A tree node.",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["name"],
        }
    }
    return [
        {
            "name": "read_file",
            "description": "Read a text file.\n\n    Lines are numbered from 1.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Absolute path."},
                    "offset": {"type": "integer", "minimum": 1, "default": 1},
                    "limit": {"type": ["integer", "null"], "maximum": 2000},
                    "encoding": {"enum": ["utf-8", "latin-1"], "default": "utf-8"},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            "output": {
                "type": "object",
                "description": "The lines read.",
                "properties": {
                    "lines": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"n": {"type": "integer"}, "text": {"type": "string"}},
                            "required": ["n", "text"],
                        },
                    },
                    "truncated": {"type": "boolean"},
                },
                "required": ["lines", "truncated"],
            },
        },
        {
            "name": "send-mail",
            "description": 'Send an e-mail. Quotes """ and \\ and */ must survive.',
            "inputSchema": {
                "type": "object",
                "properties": {
                    "from": {"type": "string", "format": "email"},
                    "to": {"type": "array", "items": {"type": "string", "format": "email"}},
                    "reply-to": {"type": "string", "nullable": True},
                    "priority": {"const": 1},
                },
                "required": ["from", "to"],
            },
        },
        {
            "name": "import",
            "description": "Keyword as a tool name; no parameters at all.",
            "inputSchema": {"type": "object", "properties": {}},
            "outputSchema": {"type": "string", "description": "The import id."},
        },
        {"name": "get.file", "inputSchema": {"type": "object"}},
        {"name": "get_file", "description": "Clashes with get.file.", "inputSchema": {}},
        {"name": "2fa", "description": 'Ends in a quote: "', "parameters": {"type": "object"}},
        {
            "name": "tree",
            "description": "Walk a tree ($defs, recursion).",
            "inputSchema": {
                "type": "object",
                "$defs": tree_defs,
                "properties": {
                    "root": {"$ref": "#/$defs/Node", "description": "Where to start."},
                    "depth": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
                },
                "required": ["root"],
            },
            "outputSchema": {
                "type": "object",
                "$defs": tree_defs,
                "properties": {"nodes": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                "required": ["nodes"],
            },
        },
        {
            "name": "shape",
            "description": "Unions, maps and allOf.",
            "inputSchema": {
                "type": "object",
                "definitions": {
                    "Color": {"type": "string", "enum": ["red", "green"], "description": "A hue."},
                    "Point": {
                        "type": "object",
                        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                        "required": ["x", "y"],
                    },
                },
                "properties": {
                    "shape": {
                        "oneOf": [
                            {
                                "type": "object",
                                "properties": {
                                    "kind": {"const": "circle"},
                                    "center": {"$ref": "#/definitions/Point"},
                                    "radius": {"type": "number", "exclusiveMinimum": 0},
                                },
                                "required": ["kind", "center", "radius"],
                            },
                            {
                                "type": "object",
                                "properties": {
                                    "kind": {"const": "polygon"},
                                    "points": {
                                        "type": "array",
                                        "items": {"$ref": "#/definitions/Point"},
                                        "minItems": 3,
                                    },
                                },
                                "required": ["kind", "points"],
                            },
                        ]
                    },
                    "color": {"$ref": "#/definitions/Color"},
                    "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                    "meta": {"type": "object", "additionalProperties": True},
                    "style": {
                        "allOf": [
                            {"type": "object", "properties": {"width": {"type": "number"}}},
                            {"type": "object", "properties": {"dash": {"type": "boolean"}}},
                        ]
                    },
                    "pair": {
                        "type": "array",
                        "prefixItems": [{"type": "string"}, {"type": "integer"}],
                    },
                    "scale": {"type": "number", "enum": [0.5, 1, 2]},
                },
                "required": ["shape"],
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "area": {"type": "number"},
                    "by_label": {"patternProperties": {"^[a-z]+$": {"type": "integer"}}},
                },
                "required": ["area"],
            },
        },
        {
            "name": "run",
            "description": "Free-form options pass through.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "pattern": "^[a-z]+$"}},
                "required": ["command"],
                "additionalProperties": {"type": "string"},
            },
        },
        {
            "name": "list",
            "description": "Shadows a builtin: its keys too.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "items": {"type": "array", "items": {"type": "string"}},
                    "page": {
                        "type": "object",
                        "properties": {
                            "list": {"type": "integer"},
                            "str": {"type": "array", "items": {"type": "string"}},
                        },
                    },
                },
            },
        },
        {
            "name": "filter",
            "description": "A recursive filter on the root schema.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "field": {"type": "string"},
                    "and": {"type": "array", "items": {"$ref": "#"}},
                },
                "required": ["field"],
            },
            "outputSchema": {"type": "array", "items": {"type": "integer"}},
        },
    ]


_RESOURCES = (
    ("issue", "an issue", True),
    ("pull_request", "a pull request", True),
    ("comment", "a comment", True),
    ("label", "a label", False),
    ("milestone", "a milestone", False),
    ("branch", "a branch", False),
    ("release", "a release", True),
    ("workflow_run", "a workflow run", False),
    ("webhook", "a webhook", False),
    ("discussion", "a discussion", True),
    ("gist", "a gist", True),
    ("deployment", "a deployment", False),
)
_VERBS = ("get", "list", "create", "update", "delete")


def _defs() -> dict[str, Any]:
    user = {
        "type": "object",
        "title": "User",
        "description": "A GitHub account.",
        "properties": {
            "login": {"type": "string", "title": "Login"},
            "id": {"type": "integer", "title": "Id"},
            "html_url": {"type": "string", "format": "uri", "title": "Html Url"},
            "site_admin": {"type": "boolean", "title": "Site Admin", "default": False},
        },
        "required": ["login", "id"],
    }
    reaction = {
        "type": "object",
        "title": "Reactions",
        "properties": {
            key: {"type": "integer", "title": key.title(), "default": 0}
            for key in ("total_count", "plus_one", "minus_one", "heart", "rocket")
        },
    }
    entity = {
        "type": "object",
        "title": "Entity",
        "description": "The resource as the API returns it.",
        "properties": {
            "id": {"type": "integer", "title": "Id"},
            "number": {"anyOf": [{"type": "integer"}, {"type": "null"}], "title": "Number"},
            "title": {"type": "string", "title": "Title"},
            "body": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Body"},
            "state": {"$ref": "#/$defs/State"},
            "user": {"$ref": "#/$defs/User"},
            "labels": {"type": "array", "items": {"type": "string"}, "title": "Labels"},
            "reactions": {"$ref": "#/$defs/Reactions"},
            "created_at": {"type": "string", "format": "date-time", "title": "Created At"},
            "updated_at": {"type": "string", "format": "date-time", "title": "Updated At"},
            "thread": {
                "type": "array",
                "items": {"$ref": "#/$defs/Entity"},
                "title": "Thread",
                "description": "Replies, each an entity of the same kind.",
            },
        },
        "required": ["id", "title", "state", "user", "created_at"],
    }
    state = {"type": "string", "enum": ["open", "closed", "all"], "title": "State"}
    return {"Entity": entity, "Reactions": reaction, "State": state, "User": user}


def _owner_repo() -> dict[str, Any]:
    return {
        "owner": {"type": "string", "title": "Owner", "description": "Repository owner."},
        "repo": {"type": "string", "title": "Repo", "description": "Repository name."},
    }


def _tool(verb: str, resource: str, phrase: str, has_body: bool) -> Item:
    props = _owner_repo()
    required = ["owner", "repo"]
    if verb in ("get", "update", "delete"):
        props[f"{resource}_number"] = {
            "type": "integer",
            "title": f"{resource.title()} Number",
            "description": f"The number that identifies {phrase}.",
            "minimum": 1,
        }
        required.append(f"{resource}_number")
    if verb == "list":
        props["state"] = {"$ref": "#/$defs/State", "default": "open"}
        props["sort"] = {
            "type": "string",
            "enum": ["created", "updated", "comments"],
            "default": "created",
            "title": "Sort",
        }
        props["direction"] = {"type": "string", "enum": ["asc", "desc"], "title": "Direction"}
        props["per_page"] = {
            "type": "integer",
            "minimum": 1,
            "maximum": 100,
            "default": 30,
            "title": "Per Page",
            "description": "Results per page.",
        }
        props["page"] = {"type": "integer", "minimum": 1, "default": 1, "title": "Page"}
        props["since"] = {
            "anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}],
            "default": None,
            "title": "Since",
            "description": "Only results updated at or after this time.",
        }
    if verb in ("create", "update"):
        props["title"] = {"type": "string", "title": "Title", "maxLength": 256}
        if has_body:
            props["body"] = {
                "anyOf": [{"type": "string"}, {"type": "null"}],
                "default": None,
                "title": "Body",
                "description": "Markdown text.",
            }
        props["labels"] = {
            "type": "array",
            "items": {"type": "string"},
            "title": "Labels",
            "uniqueItems": True,
        }
        props["assignees"] = {
            "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
            "default": None,
            "title": "Assignees",
        }
        props["options"] = {
            "type": "object",
            "title": "Options",
            "description": "Extra settings.",
            "properties": {
                "draft": {"type": "boolean", "default": False, "title": "Draft"},
                "notify": {
                    "type": "object",
                    "properties": {
                        "channels": {
                            "type": "array",
                            "items": {"type": "string", "enum": ["email", "web", "mobile"]},
                        },
                        "quiet_hours": {"type": ["string", "null"], "pattern": "^\\d\\d-\\d\\d$"},
                    },
                },
            },
        }
        if verb == "create":
            required.append("title")
    result: dict[str, Any]
    if verb == "list":
        result = {
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"$ref": "#/$defs/Entity"}, "title": "Items"},
                "total_count": {"type": "integer", "title": "Total Count"},
                "next_page": {"anyOf": [{"type": "integer"}, {"type": "null"}], "title": "Next"},
            },
            "required": ["items", "total_count"],
        }
    elif verb == "delete":
        result = {
            "type": "object",
            "properties": {"deleted": {"type": "boolean", "title": "Deleted"}},
            "required": ["deleted"],
        }
    else:
        result = {"$ref": "#/$defs/Entity"}
    result = {**result, "$defs": _defs()}
    label = resource.replace("_", " ")
    description = {
        "get": f"Get details of {phrase} in a GitHub repository.",
        "list": f"List {label}s in a GitHub repository, newest first. Paginated.",
        "create": f"Create {phrase} in a GitHub repository.",
        "update": f"Update {phrase}; fields left out are unchanged.",
        "delete": f"Delete {phrase}. This cannot be undone.",
    }[verb]
    return {
        "name": f"{verb}_{resource}",
        "description": description,
        "inputSchema": {
            "type": "object",
            "title": f"{verb}_{resource}Arguments",
            "$defs": {"State": _defs()["State"]},
            "properties": props,
            "required": required,
        },
        "outputSchema": result,
    }


def large() -> list[Item]:
    """Return a 60-tool manifest shaped like a GitHub MCP server's (pydantic-style schemas)."""
    return [
        _tool(verb, resource, phrase, has_body)
        for resource, phrase, has_body in _RESOURCES
        for verb in _VERBS
    ]
