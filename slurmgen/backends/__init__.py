"""One backend per kind of job behind one protocol (interface), and the registry that picks one (registry)."""
