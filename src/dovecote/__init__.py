"""dovecote: an ActiveMQ-Classic-compatible message broker and client."""

__version__ = "0.1.0"
