import pytest

from engine.units import format_bytes, parse_bytes


@pytest.mark.parametrize("text,value", [("64MiB", 64 * 2**20), ("16GiB", 16 * 2**30), ("1.5KiB", 1536),
                                        ("512", 512), ("2 mib", 2 * 2**20), ("7B", 7)])
def test_parse(text, value):
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text,hint", [("16GB", "16GiB"), ("abc", "not a size"), ("", "not a size"),
                                       ("-3MiB", "not a size"), ("0MiB", "positive"), ("5 parsecs", "binary units")])
def test_parse_rejects_with_a_hint(text, hint):
    with pytest.raises(ValueError, match=hint):
        parse_bytes(text)


def test_format():
    assert format_bytes(512) == "512 B"
    assert format_bytes(3.1 * 2**20) == "3.1 MiB"
    assert format_bytes(180 * 2**30) == "180.0 GiB"
