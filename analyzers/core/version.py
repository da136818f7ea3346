"""The version of profplug, one place for the plugin, the CLI and the analyzer."""

__version__ = "0.1.0"
