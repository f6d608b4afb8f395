"""The Docker backend: the only code that imports docker-py."""
