"""What leaves the house through the queue, and its records (SPEC §6, PRV-5): transactional
email jobs, webhook endpoints and their deliveries, the local capture outbox and the send rate
shared by every worker. The job handlers here write tables; the clients they call, in
`delivery/`, know none."""
