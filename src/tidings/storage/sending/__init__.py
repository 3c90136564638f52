"""Named queries of a campaign send (SPEC §5): the send row, candidates, batches and the batch
a worker holds (`batch_claims`: claim, moves under the claim, finish, release), progress,
control, repairs, the shared send rate and what happened to the mail afterwards."""
