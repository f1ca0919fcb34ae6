"""host.tools: the tool schema DSL, validation, registry and scopes, and the pipeline."""
