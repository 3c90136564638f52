"""The three jobs of a send (SPEC §5), one module each, named after its job kind:
`send_campaign` prepares and dispatches, `send_batch` submits one batch, `finalise_campaign`
verifies and closes."""
