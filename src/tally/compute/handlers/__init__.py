"""Falcon resources of the compute API, one module per resource group."""
