"""Hearing back (PRV-6, AUD-13, SND-27): provider events taken in (`intake`), mail that comes
back (`inbound_mail`), each event recorded once (`recording`, deliveries by `group_commit`)
and what it means for its subscriber carried out (`verdict`)."""
