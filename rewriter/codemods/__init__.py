"""One codemod per file, named after the pattern it applies."""
