"""The job spec: its field table (fields), value types (types), YAML source with line marks (yaml_source),
cross-field rules (rules), the resolved model (model) and the loader that ties them together (load)."""
