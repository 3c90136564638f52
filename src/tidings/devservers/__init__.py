"""Development servers that stand in for the outside world on loopback: the Mailgun-compatible
dev provider (PRV-4) and the SMTP sink. Only the command line and the tests import this."""
