"""tidings: a self-hosted newsletter and bulk-email platform."""

__version__ = "0.1.0"
