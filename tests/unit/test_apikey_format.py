"""API keys are recognisable, checksummed and never stored in clear (API-2)."""

from hypothesis import given
from hypothesis import strategies as st

from tidings.domain.apikeys import PREFIX, generate_key, hash_token, hashes_match, parse_key


def test_generated_key_parses_back_to_its_id() -> None:
    """A key we hand out must be accepted by our own parser, or nobody could log in."""
    key = generate_key()
    assert key.token.startswith(PREFIX)
    parsed = parse_key(key.token)
    assert parsed is not None
    assert parsed.key_id == key.key_id
    assert hashes_match(key.secret_hash, parsed)


def test_two_generated_keys_differ() -> None:
    """Keys are random; a repeat would let one admin act as another."""
    assert generate_key().token != generate_key().token


@given(
    position=st.integers(min_value=4, max_value=200),
    replacement=st.characters(whitelist_categories=("Lu", "Ll", "Nd"), max_codepoint=127),
)
def test_a_single_typo_is_refused_by_the_checksum(position: int, replacement: str) -> None:
    """A mistyped key is refused before any database lookup."""
    token = generate_key().token
    position %= len(token)
    if token[position] == replacement or token[position] == "_":
        return
    mutated = token[:position] + replacement + token[position + 1 :]
    assert parse_key(mutated) is None


def test_malformed_keys_are_refused() -> None:
    """Anything not in the key format (a truncated key, another vendor's token) is refused."""
    token = generate_key().token
    for candidate in [
        "",
        "Bearer",
        token[:-1],
        token + "x",
        token.replace(PREFIX, "tdx_"),
        "ghp_" + "a" * 36,
    ]:
        assert parse_key(candidate) is None


def test_the_stored_hash_does_not_contain_the_secret() -> None:
    """Only a hash is stored: a database leak must not leak usable keys."""
    key = generate_key()
    secret_part = key.token.split("_")[2]
    assert secret_part not in key.secret_hash
    assert key.secret_hash == hash_token(key.token)
