"""sdkgen: tool manifest -> typed Python and TypeScript SDK text (stdlib only)."""
