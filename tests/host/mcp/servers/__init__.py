"""Small MCP servers the MCP tests start over stdio."""
