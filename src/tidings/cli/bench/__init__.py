"""`tidings bench ...`: commands that measure and print JSON. Never timed tests."""
